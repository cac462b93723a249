import { toApiError } from "../http/errorHandler";
import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { ApiError, isApiError } from "../errors";
import { takeClaimedIpToken } from "../rateLimit";
import type { Ledger } from "./ledger";
import type { Metering, Principal, Prices } from "./metering";
import { CREDIT_PACKAGES, formatCents } from "./money";
import { intentNotFound } from "./paymentErrors";
import type { Payments } from "./payments";
import { type PaymentProcessor, ProcessorError } from "./processor";
import { type SimulatedAction, SimulatedProcessor } from "./simulatedProcessor";
import { declaredRouter, endpoint, runPlain, type DeclaredRouter, type Endpoint } from "../routes/endpoint";
import * as s from "../routes/schemas";

export interface RouterDeps {
  ledger: Ledger;
  metering: Metering;
  payments: Payments;
  processor: PaymentProcessor;
  prices: Prices;
  logger?: Logger;
}

const SIMULATED_ACTIONS: readonly SimulatedAction[] = ["succeed", "fail", "process", "cancel"];
const MAX_PAGE_SIZE = 100;
const DEFAULT_PAGE_SIZE = 20;

type BillingEndpoint = Endpoint<RouterDeps>;

const stripeConfig = endpoint<RouterDeps>("GET", "/stripe_config", {
  caller: "public",
  summary: "The payment processor's publishable key (null with the simulated processor) and its kind",
  answer: s.out({
    publishable_key: s.nullable(s.str()),
    mode: { type: "string", enum: ["stripe", "simulated"] },
  }),
  errors: [],
  handle: async ({ processor }) => ({
    body: { publishable_key: processor.publishableKey(), mode: processor.kind },
  }),
});

const packages = endpoint<RouterDeps>("GET", "/packages", {
  caller: "public",
  summary: "Credit packages (1 credit = 1 cent), the minimum payment and the prices",
  answer: s.out({
    items: s.arr(
      s.out({ id: s.str(), name: s.str(), amount_cents: s.int(), credits: s.int(), price_display: s.str() }),
    ),
    minimum_payment_cents: s.int(),
    prices: s.out({
      write_cents: s.int(),
      execution_cents_per_second: s.int(),
      pin_cents_per_100kb: s.int(),
      read_cents: s.int(),
    }),
  }),
  errors: [],
  handle: async ({ prices }) => ({
    body: {
      items: CREDIT_PACKAGES.map((p) => ({
        ...p,
        credits: p.amount_cents,
        price_display: formatCents(p.amount_cents),
      })),
      minimum_payment_cents: prices.minimum_payment_cents,
      prices: {
        write_cents: prices.write_cents,
        execution_cents_per_second: prices.execution_cents_per_second,
        pin_cents_per_100kb: prices.pin_cents_per_100kb,
        read_cents: 0,
      },
    },
  }),
});

/** Small JSON bodies: this router is mounted before the relayer's own parser and parses its own. */
const json = express.json({ limit: "16kb", type: () => true });

const createPaymentIntent = endpoint<RouterDeps>("POST", "/create_payment_intent", {
  caller: "account",
  summary: "Start a payment of amount_cents (at least 500): card or crypto, confirmed on the client",
  body: s.obj({ amount_cents: s.int() }, ["amount_cents"]),
  answer: s.out({
    client_secret: s.nullable(s.str()),
    payment_intent_id: s.str(),
    amount_cents: s.int(),
    status: s.str("The processor's PaymentIntent status"),
  }),
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "owner_only",
    "amount_below_minimum",
    "amount_above_maximum",
    "payment_processor_unavailable",
    "payment_processor_error",
  ],
  before: [json],
  ownBody:
    "billing parses its own small JSON bodies; its payments module checks the values with billing's codes",
  handle: async ({ payments }, req, res) => ({
    body: await payments.createIntent(
      principal(res).accountId,
      objectBody(req).amount_cents,
      req.get("idempotency-key") || undefined,
    ),
  }),
});

const confirmPayment = endpoint<RouterDeps>("POST", "/confirm_payment", {
  caller: "account",
  summary: "Credit a settled payment exactly once (200), or say it is still processing (202)",
  body: s.obj({ payment_intent_id: s.str() }, ["payment_intent_id"]),
  answer: s.ref("ConfirmPayment"),
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "owner_only",
    "payment_intent_not_found",
    "payment_failed",
    "payment_canceled",
    "payment_not_completed",
    "payment_processor_unavailable",
    "payment_processor_error",
  ],
  // A crypto payment still settling on chain: nothing credited yet, confirm again later.
  alsoAnswers: { status: 202, description: "processing", schema: s.ref("ConfirmPayment") },
  before: [json],
  ownBody:
    "billing parses its own small JSON bodies; its payments module checks the values with billing's codes",
  async handle({ payments }, req, res) {
    const out = await payments.confirm(principal(res).accountId, objectBody(req).payment_intent_id);
    return { status: out.httpStatus, body: out.body };
  },
});

const cancelPayment = endpoint<RouterDeps>("POST", "/cancel_payment", {
  caller: "account",
  summary: "Abandon an unpaid payment intent",
  body: s.obj({ payment_intent_id: s.str() }, ["payment_intent_id"]),
  answer: s.out({ payment_intent_id: s.str(), status: s.str() }),
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "owner_only",
    "payment_intent_not_found",
    "payment_not_cancelable",
    "payment_processor_unavailable",
    "payment_processor_error",
  ],
  before: [json],
  ownBody:
    "billing parses its own small JSON bodies; its payments module checks the values with billing's codes",
  handle: async ({ payments }, req, res) => ({
    body: await payments.cancel(principal(res).accountId, objectBody(req).payment_intent_id),
  }),
});

const history = endpoint<RouterDeps>("GET", "/history", {
  caller: "account",
  summary: "The account's ledger entries, newest first",
  params: s.pagingParams,
  answer: s.page(
    s.out({
      id: s.int(),
      type: { type: "string", enum: ["credit", "debit"] },
      amount_cents: s.int(),
      balance_after_cents: s.int(),
      operation: s.str(),
      reference: s.str(),
      key_address: s.nullable(s.str()),
      action_cid: s.nullable(
        s.str(
          "The action an execution charge paid for (inline code: the CID computed for it); null for other entries",
        ),
      ),
      created_at: s.int("Unix seconds"),
    }),
  ),
  errors: ["invalid_request", "invalid_pagination", "owner_only"],
  async handle({ ledger, metering }, req, res) {
    const pageNumber = intParam(req.query.page_number, 0, 0, Number.MAX_SAFE_INTEGER, "page_number");
    const pageSize = intParam(req.query.page_size, DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE, "page_size");
    await metering.flush();
    const { items, total } = await ledger.history(principal(res).accountId, pageNumber, pageSize);
    return { body: { items, page_number: pageNumber, page_size: pageSize, total } };
  },
});

const webhook = endpoint<RouterDeps>("POST", "/webhook", {
  caller: "public",
  summary: "Stripe's webhook (signed with Stripe-Signature over the raw body)",
  body: { type: "object" },
  answer: s.out({ received: s.bool(), event_id: s.str(), outcome: s.str() }),
  errors: [...s.BODY_ERRORS, "invalid_webhook_signature", "webhook_not_configured"],
  // The signature is over the raw bytes.
  before: [express.raw({ type: () => true, limit: "512kb" })],
  ownBody: "the processor's signature covers the raw bytes",
  async handle({ processor, payments }, req) {
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    let event;
    try {
      event = processor.parseWebhook(raw, req.get("stripe-signature"));
    } catch (e) {
      if (e instanceof ProcessorError && e.kind === "invalid_signature") {
        throw new ApiError(
          "invalid_webhook_signature",
          "the Stripe-Signature header does not verify against the raw body",
        );
      }
      if (e instanceof ProcessorError && e.kind === "unsupported") {
        throw new ApiError(
          "webhook_not_configured",
          "this deployment does not accept payment webhooks (no signing secret, or the simulated processor)",
        );
      }
      throw e;
    }
    const outcome = await payments.handleEvent(event);
    return { body: { received: true, event_id: event.id, outcome } };
  },
});

const simulatedTransition = endpoint<RouterDeps>("POST", "/simulated/intents/:id/:action", {
  caller: "account",
  summary:
    "Simulated processor only (dev): move a payment intent as a card or wallet would (succeed, fail, process, cancel)",
  params: [
    s.idParam("id", s.str()),
    s.idParam("action", { type: "string", enum: ["succeed", "fail", "process", "cancel"] }),
  ],
  answer: s.out({ payment_intent_id: s.str(), status: s.str(), last_error: s.nullable(s.str()) }),
  errors: [
    "owner_only",
    "invalid_simulated_action",
    "payment_intent_not_found",
    "invalid_simulated_transition",
  ],
  // Dev-only: exists only while the simulated processor is active, never with Stripe.
  when: ({ processor }) => processor instanceof SimulatedProcessor,
  async handle({ processor, payments }, req, res) {
    const id = String(req.params.id);
    const action = String(req.params.action) as SimulatedAction;
    if (!SIMULATED_ACTIONS.includes(action)) {
      throw new ApiError(
        "invalid_simulated_action",
        `action must be one of ${SIMULATED_ACTIONS.join(", ")}`,
        {
          details: { action },
        },
      );
    }
    if ((await payments.intentAccount(id)) !== principal(res).accountId) throw intentNotFound(id);
    let intent;
    try {
      intent = await (processor as SimulatedProcessor).transition(id, action);
    } catch (e) {
      if (e instanceof ProcessorError && e.kind === "unexpected_state") {
        throw new ApiError("invalid_simulated_transition", e.message, {
          details: { payment_intent_id: id, action },
        });
      }
      throw e;
    }
    // What Stripe's webhook would do next: record the new state, crediting a success.
    await payments.observeNow(intent);
    return { body: { payment_intent_id: id, status: intent.status, last_error: intent.lastError } };
  },
});

const balance = endpoint<RouterDeps>("GET", "/balance", {
  caller: "account",
  summary: "The account's credit balance (billing enabled; account key)",
  answer: s.out({
    balance_cents: s.int(),
    balance_display: s.str(),
    reserved_cents: s.int(
      "Held by runs in flight (each reserves its time limit's price until it ends); balance_cents − reserved_cents can be spent",
    ),
  }),
  errors: ["owner_only"],
  async handle({ metering }, _req, res) {
    const view = await metering.balanceView(principal(res).accountId);
    // reserved_cents: what runs in flight hold; balance_cents − reserved_cents is what can be spent.
    return {
      body: {
        balance_cents: view.balance_cents,
        balance_display: formatCents(view.balance_cents),
        reserved_cents: view.reserved_cents,
      },
    };
  },
});

/** /core/v1/billing's endpoints, in the order the OpenAPI document lists them. */
export const BILLING_ENDPOINTS: readonly BillingEndpoint[] = [
  stripeConfig,
  packages,
  createPaymentIntent,
  confirmPayment,
  cancelPayment,
  history,
  webhook,
  simulatedTransition,
  balance,
];

/**
 * /core/v1/billing. Mounted before the relayer's JSON parser, so it parses its own bodies: the
 * webhook needs the raw bytes for the signature check, the rest take small JSON bodies.
 */
export function buildRouter(deps: RouterDeps, requireAccountKey: RequestHandler): DeclaredRouter {
  return declaredRouter(deps, BILLING_ENDPOINTS, {
    // Public routes take the IP token the relayer's perIpLimit may have left to authentication.
    guards: { account: [requireAccountKey, requireAccountPrincipal], public: [takeClaimedIpToken] },
    run: (e) => runPlain(deps, e),
    onError: (err: unknown, req: Request, res: Response, next: NextFunction) =>
      renderError(err, req, res, next, deps.logger),
  });
}

const requireAccountPrincipal: RequestHandler = (_req, res, next) => {
  const p = res.locals.principal as Principal | undefined;
  if (!p) return next(new Error("billing router: requireAccountKey did not set res.locals.principal"));
  if (p.kind !== "account")
    return next(new ApiError("owner_only", "billing endpoints take the account key, not a usage key"));
  next();
};

function principal(res: Response): Principal {
  return res.locals.principal as Principal;
}

function objectBody(req: Request): Record<string, unknown> {
  const b = req.body as unknown;
  if (b === null || b === undefined || typeof b !== "object" || Array.isArray(b)) {
    throw new ApiError("invalid_request", "the request body must be a JSON object");
  }
  return b as Record<string, unknown>;
}

function intParam(v: unknown, dflt: number, min: number, max: number, name: string): number {
  if (v === undefined) return dflt;
  const n = typeof v === "string" && /^[0-9]{1,15}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ApiError("invalid_pagination", `${name} must be an integer from ${min} to ${max}`, {
      details: { field: name },
    });
  }
  return n;
}

/** The relayer's error format, rendered here because this router runs before the relayer's own handlers. */
function renderError(err: unknown, req: Request, res: Response, _next: NextFunction, logger?: Logger): void {
  let apiErr: ApiError;
  const bodyErr = err as { type?: string; status?: number };
  // Client mistakes express or the body parser throw (bad JSON, a path with broken percent-encoding such
  // as /simulated/intents/%zz/…) get the relayer's own typed answers; only the rest is a 500.
  const clientMistake = isApiError(err) ? undefined : toApiError(err);
  if (isApiError(err)) apiErr = err;
  else if (bodyErr?.type === "entity.parse.failed")
    apiErr = new ApiError("invalid_json", "the request body is not valid JSON");
  else if (bodyErr?.type === "entity.too.large")
    apiErr = new ApiError("payload_too_large", "the request body is too large");
  else if (clientMistake) apiErr = clientMistake;
  else {
    logger?.error({ err, path: req.path }, "billing: unexpected error");
    apiErr = new ApiError("internal_error", "internal error");
  }
  let requestId =
    (res.getHeader("x-request-id") as string | undefined) ?? (res.locals.requestId as string | undefined);
  if (!requestId) {
    requestId = randomUUID();
    res.setHeader("X-Request-Id", requestId);
  }
  if (apiErr.retryAfter !== undefined) res.setHeader("Retry-After", String(apiErr.retryAfter));
  res.status(apiErr.status).json({ error: apiErr.toJSON(), request_id: requestId });
}
