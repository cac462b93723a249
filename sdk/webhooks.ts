/**
 * Webhooks in the SDK: typed helpers for the /core/v1/webhooks operations (account key), and
 * `verifyWebhookSignature` for the receiving side (docs/webhooks.md, "Verifying a delivery").
 */
import { createHmac, timingSafeEqual } from "node:crypto";
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
  const body = typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : Buffer.from(rawBody);
  const expected = createHmac("sha256", secret)
    .update(Buffer.concat([Buffer.from(`${t}.`, "utf8"), body]))
    .digest();
  return parts.some(([k, v]) => {
    if (k !== "v1" || v === undefined || !/^[0-9a-f]{64}$/.test(v)) return false;
    return timingSafeEqual(Buffer.from(v, "hex"), expected);
  });
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
