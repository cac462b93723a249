/**
 * The dashboard's one API client: the SDK (sdk/), on the page's own origin. An account key is sent as a
 * bearer credential; a usage key signs every request and every write, so it never leaves the page.
 */
import { createSigil, isSigilError, keyKind, type OwnerSession, type Sigil } from "../../sdk";

export type KeyKind = "account" | "usage";

export interface Session {
  sigil: Sigil;
  /** "owner": the on-chain owner signed in with a wallet (reads; changes are owner transactions). */
  kind: KeyKind | "owner";
}

/** The owner's wallet session: every request signed by its session key (sdk/siwe.ts). */
export function openOwnerSession(owner: OwnerSession): Session {
  return { sigil: createSigil({ baseUrl: window.location.origin, ownerSession: owner }), kind: "owner" };
}

export function openSession(key: string): Session {
  const kind = keyKind(key);
  if (kind === null) throw new Error("not a Sigil key");
  return { sigil: createSigil({ baseUrl: window.location.origin, apiKey: key }), kind };
}

/** The SDK's check of a key's shape, for inline form errors before anything is sent. */
export function keyKindOf(key: string): KeyKind | null {
  return keyKind(key);
}

export interface ShownError {
  message: string;
  code: string;
  status?: number;
  /** The service's `error.details` (which field, which limit, a payment's failure reason). */
  details?: Record<string, unknown>;
  /** How to fix it (the service's error catalogue), shown under the message. */
  fix?: string;
  /** The code's entry in docs/errors.md. */
  docsUrl?: string;
}

/** Every failure as the user sees it: the API's message, its stable code and how to fix it. */
export function describeError(err: unknown): ShownError {
  if (isSigilError(err))
    return {
      message: err.shortMessage,
      code: err.code,
      status: err.status,
      details: err.details,
      fix: err.fix,
      docsUrl: err.docsUrl,
    };
  return { message: err instanceof Error ? err.message : String(err), code: "client_error" };
}

export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/**
 * Billing endpoints. The SDK's typed paths list only /billing/balance today, so the others go through
 * the same SDK client (its transport: authentication, retries, idempotency keys, typed errors) with the
 * path cast; once the SDK types them this file loses the casts and nothing else changes.
 */
type Untyped = (path: string, init?: { body?: unknown; params?: unknown }) => Promise<unknown>;

export interface BillingHistoryItem {
  id: number;
  type: "credit" | "debit";
  amount_cents: number;
  balance_after_cents: number;
  operation: string;
  reference: string;
  /** The action an execution charge paid for (its CID); null for credits, writes and pins. */
  action_cid: string | null;
  created_at: number;
}

export function billingApi(sigil: Sigil) {
  const get = sigil.get as unknown as Untyped;
  const post = sigil.post as unknown as Untyped;
  return {
    balance: () =>
      get("/core/v1/billing/balance") as Promise<{ balance_cents: number; balance_display: string }>,
    mode: () =>
      get("/core/v1/billing/stripe_config") as Promise<{
        publishable_key: string;
        mode?: "stripe" | "simulated";
      }>,
    createIntent: (amount_cents: number) =>
      post("/core/v1/billing/create_payment_intent", { body: { amount_cents } }) as Promise<{
        payment_intent_id: string;
        client_secret: string;
        amount_cents: number;
      }>,
    simulateSuccess: (id: string) =>
      post(`/core/v1/billing/simulated/intents/${encodeURIComponent(id)}/succeed`),
    cancel: (payment_intent_id: string) =>
      post("/core/v1/billing/cancel_payment", { body: { payment_intent_id } }) as Promise<{
        payment_intent_id: string;
        status: string;
      }>,
    confirm: (payment_intent_id: string) =>
      post("/core/v1/billing/confirm_payment", { body: { payment_intent_id } }) as Promise<{
        status: "succeeded" | "processing";
        credited_cents: number;
        newly_credited: boolean;
        balance_cents: number;
        balance_display: string;
      }>,
    /** The newest 50 entries (billing pages count from 0, unlike the SDK's lists). */
    history: () =>
      get("/core/v1/billing/history", { params: { query: { page_number: 0, page_size: 50 } } }) as Promise<{
        items: BillingHistoryItem[];
        total: number;
      }>,
  };
}

export interface PinnedAction {
  cid: string;
  bytes: number;
  /** ISO 8601, UTC: when the account first pinned this CID. */
  pinned_at: string;
}

/** The account's newest pinned actions (`GET /core/v1/actions/pinned`, newest first). */
export async function listPinnedActions(
  sigil: Sigil,
  page_number = 0,
  page_size = 50,
): Promise<{ items: PinnedAction[]; total: number }> {
  const get = sigil.get as unknown as Untyped;
  return (await get("/core/v1/actions/pinned", { params: { query: { page_number, page_size } } })) as {
    items: PinnedAction[];
    total: number;
  };
}
