/**
 * Webhooks in the SDK: typed helpers for the /core/v1/webhooks operations (account key), and
 * `verifyWebhookSignature` for the receiving side (docs/webhooks.md, "Verifying a delivery").
 */
// @noble/hashes rather than node:crypto: the SDK also runs in the browser (the dashboard), where
// node:crypto is a two-function shim.
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { paginate, type Page } from "./paginate";
import type { Answer, Body } from "./types";

export type WebhookEndpoint = Answer<"/core/v1/webhooks/{id}", "get">;
export type NewWebhookEndpoint = Answer<"/core/v1/webhooks", "post">;
export type WebhookDelivery = Answer<"/core/v1/webhooks/{id}/deliveries", "get">["items"][number];
export type WebhookEventType = NonNullable<Body<"/core/v1/webhooks", "post">["event_types"]>[number];

/** What every delivery's body holds (docs/webhooks.md lists each type's `data`). */
export interface WebhookEvent {
  id: string;
  type: WebhookEventType;
  created: number;
  account_id: number;
  block_number?: number;
  block_hash?: string;
  transaction_hash?: string;
  log_index?: number;
  data: Record<string, unknown>;
}

export interface VerifyOptions {
  /** Oldest accepted `t`, in seconds before now (and newest after it). Default 300. */
  toleranceSeconds?: number;
  /** Now, in unix seconds (tests). */
  nowSeconds?: number;
}

/**
 * True when `header` (the Sigil-Signature header) holds a v1 signature of `rawBody` by `secret`
 * whose timestamp is within the tolerance. `rawBody` must be the exact bytes received: verify before
 * parsing JSON. Any v1 may match (during a secret rotation there are two).
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | null | undefined,
  rawBody: string | Uint8Array,
  opts: VerifyOptions = {},
): boolean {
  if (typeof header !== "string" || header.length > 4096) return false;
  const parts = header.split(",").map((p) => p.trim().split("=", 2) as [string, string | undefined]);
  const t = parts.find(([k]) => k === "t")?.[1];
  if (t === undefined || !/^[0-9]{1,12}$/.test(t)) return false;
  const now = opts.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(t)) > (opts.toleranceSeconds ?? 300)) return false;
  const encoder = new TextEncoder();
  const body = typeof rawBody === "string" ? encoder.encode(rawBody) : rawBody;
  const prefix = encoder.encode(`${t}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix);
  signed.set(body, prefix.length);
  const expected = hmac(sha256, encoder.encode(secret), signed);
  return parts.some(
    ([k, v]) =>
      k === "v1" && v !== undefined && /^[0-9a-f]{64}$/.test(v) && equalBytes(hexBytes(v), expected),
  );
}

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Constant time for equal lengths: how many bytes match must not show in how long it takes. */
function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

/** Verifies, then parses: the event, or an Error saying the signature did not verify. */
export function parseWebhookEvent(
  secret: string,
  header: string | null | undefined,
  rawBody: string | Uint8Array,
  opts: VerifyOptions = {},
): WebhookEvent {
  if (!verifyWebhookSignature(secret, header, rawBody, opts))
    throw new Error(
      "Sigil-Signature does not verify (wrong secret, altered body, or a timestamp outside the tolerance)",
    );
  return JSON.parse(
    typeof rawBody === "string" ? rawBody : Buffer.from(rawBody).toString("utf8"),
  ) as WebhookEvent;
}

/** The operations, given the client's calls (createSigil wires them as `sigil.webhooks`). */
export function webhookOperations(call: {
  get: (path: string, init?: unknown) => Promise<unknown>;
  post: (path: string, init?: unknown) => Promise<unknown>;
  delete: (path: string, init?: unknown) => Promise<unknown>;
}) {
  const params = (id: string) => ({ path: { id } });
  return {
    /** Registers an endpoint; the answer's `secret` is shown this once. */
    create: (body: Body<"/core/v1/webhooks", "post">) =>
      call.post("/core/v1/webhooks", { body }) as Promise<NewWebhookEndpoint>,
    /** Every endpoint of the account, as an async iterator. */
    list: () =>
      paginate(
        (page_number, page_size) =>
          call.get("/core/v1/webhooks", { params: { query: { page_number, page_size } } }) as Promise<
            Page<WebhookEndpoint>
          >,
      ),
    get: (id: string) =>
      call.get("/core/v1/webhooks/{id}", { params: params(id) }) as Promise<WebhookEndpoint>,
    update: (id: string, body: Body<"/core/v1/webhooks/{id}", "post">) =>
      call.post("/core/v1/webhooks/{id}", { params: params(id), body }) as Promise<WebhookEndpoint>,
    delete: (id: string) =>
      call.delete("/core/v1/webhooks/{id}", { params: params(id) }) as Promise<
        Answer<"/core/v1/webhooks/{id}", "delete">
      >,
    /** A new secret, shown once; the previous one keeps signing for `expirePreviousInSeconds` (default 24 h). */
    rotateSecret: (id: string, expirePreviousInSeconds?: number) =>
      call.post("/core/v1/webhooks/{id}/rotate_secret", {
        params: params(id),
        body:
          expirePreviousInSeconds === undefined
            ? {}
            : { expire_previous_in_seconds: expirePreviousInSeconds },
      }) as Promise<Answer<"/core/v1/webhooks/{id}/rotate_secret", "post">>,
    /** The endpoint's deliveries, newest first, as an async iterator. */
    deliveries: (id: string) =>
      paginate(
        (page_number, page_size) =>
          call.get("/core/v1/webhooks/{id}/deliveries", {
            params: { path: { id }, query: { page_number, page_size } },
          }) as Promise<Page<WebhookDelivery>>,
      ),
    /** Sends a delivery again (same event id and body). */
    resend: (id: string, deliveryId: string) =>
      call.post("/core/v1/webhooks/{id}/deliveries/{delivery}/resend", {
        params: { path: { id, delivery: deliveryId } },
        body: {},
      }) as Promise<WebhookDelivery>,
  };
}
