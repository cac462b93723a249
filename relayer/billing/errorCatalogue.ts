/**
 * Every error code billing itself introduces, with why it happens and how to fix it. The "## Billing"
 * section of docs/errors.md is written from this table, and test/billing/errorCatalogue.test.ts checks
 * that every code thrown under relayer/billing is either here or in the relayer's catalogue (shared
 * codes: invalid_json, invalid_request, invalid_pagination, payload_too_large, owner_only, internal_error).
 * Same shape as the relayer's ERROR_CATALOGUE, so the two can be merged for the OpenAPI document.
 */
export interface BillingErrorEntry {
  status: number;
  why: string;
  fix: string;
}

// `satisfies` keeps the literal keys: `BillingErrorCode` is derived from them (see relayer/errorCatalogue.ts).
export const BILLING_ERROR_CATALOGUE = {
  amount_below_minimum: {
    status: 400,
    why: "`amount_cents` is below the minimum payment (500 cents by default, card and crypto alike); `details.minimum_cents` gives it.",
    fix: "Ask for at least the minimum; the Starter package is exactly 500.",
  },
  amount_above_maximum: {
    status: 400,
    why: "`amount_cents` is above the largest single top-up (1,000,000 cents by default); `details.maximum_cents` gives it.",
    fix: "Split the purchase into several payments, or ask the operator to raise the limit.",
  },
  invalid_webhook_signature: {
    status: 400,
    why: "POST billing/webhook: the Stripe-Signature header is missing, too old, or does not verify against the raw body and the endpoint's signing secret.",
    fix: "Configure STRIPE_WEBHOOK_SECRET with the endpoint's whsec_… secret; do not let a proxy re-encode the body.",
  },
  invalid_simulated_action: {
    status: 400,
    why: "Dev-only simulated processor: the action is not one of succeed, fail, process, cancel.",
    fix: "POST billing/simulated/intents/:id/{succeed|fail|process|cancel}.",
  },
  insufficient_credits: {
    status: 402,
    why: "The account's balance, less what runs in flight have reserved (`details.reserved_cents`), cannot cover the operation; `details.balance_cents` and `details.price_cents` give both. A run reserves its time limit's price at admission (`details.time_limit_ms`); `details.max_timeout_ms`, when present, is the largest `timeout_ms` that would fit.",
    fix: "Top up (create_payment_intent, pay, confirm_payment), send a smaller `timeout_ms`, or retry when runs in flight have ended.",
  },
  spend_cap_reached: {
    status: 403,
    why: "This usage key's spend plus what its runs in flight have reserved (`details.spent_cents`, `details.reserved_cents`) leaves no room under its cap (`details.cap_cents`) for this operation; a run reserves its time limit's price at admission, and `details.max_timeout_ms`, when present, is the largest `timeout_ms` that would fit. Other keys of the account are not affected.",
    fix: "Send a smaller `timeout_ms`, retry when the key's runs in flight have ended, or have the owner raise or remove the cap.",
  },
  payment_intent_not_found: {
    status: 404,
    why: "No payment intent with this id belongs to this account (it does not exist, or it is another account's: both look the same).",
    fix: "Use the payment_intent_id that create_payment_intent returned to this account.",
  },
  webhook_not_configured: {
    status: 404,
    why: "This deployment accepts no payment webhooks: Stripe is configured without a webhook signing secret, or the simulated processor is active.",
    fix: "Set STRIPE_WEBHOOK_SECRET (Stripe mode); with the simulated processor use the dev endpoint instead.",
  },
  payment_failed: {
    status: 409,
    why: "The last payment attempt failed (card declined, crypto transaction reverted); `details.reason` says why. No credits were applied and nothing was charged.",
    fix: "Pay again with another method, or create a new payment intent.",
  },
  payment_canceled: {
    status: 409,
    why: "The payment intent was canceled; it will never be credited.",
    fix: "Create a new payment intent.",
  },
  payment_not_completed: {
    status: 409,
    why: "confirm_payment was called before the customer completed the payment (`details.status` is Stripe's status, e.g. requires_payment_method or requires_action).",
    fix: "Finish the payment with Stripe's client library (client_secret), then call confirm_payment again.",
  },
  payment_not_cancelable: {
    status: 409,
    why: "cancel_payment on an intent that already succeeded or was canceled; `details.status` gives its state (a succeeded one has been credited).",
    fix: "Nothing to do; check the balance.",
  },
  invalid_simulated_transition: {
    status: 409,
    why: "Dev-only simulated processor: the intent's current status does not allow this action (e.g. failing a succeeded intent).",
    fix: "Create a new intent, or choose an action allowed from its status (docs/billing.md).",
  },
  payment_processor_unavailable: {
    status: 503,
    why: "Stripe could not be reached or answered with a server error; nothing was credited or charged.",
    fix: "Retry after Retry-After; confirming again is always safe.",
  },
  payment_processor_error: {
    status: 503,
    why: "Stripe refused the request (`details.processor_code`), e.g. an Idempotency-Key reused with another amount, or crypto not enabled on the Stripe account.",
    fix: "Use a fresh Idempotency-Key for a different amount; an operator checks the Stripe configuration.",
  },
} satisfies Record<string, BillingErrorEntry>;

/** Every code billing introduces: the billing catalogue's keys. */
export type BillingErrorCode = keyof typeof BILLING_ERROR_CATALOGUE;
