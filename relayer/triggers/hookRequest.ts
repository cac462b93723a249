/**
 * What the hook endpoint (routes/hooks.ts) and its fast path (hookFastPath.ts) read off a request the
 * same way: the shape of a hook id, the delivery id a sender names, and whether the source's per-IP
 * token was already taken for this request (by the fast path, before it handed the request on).
 */
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";

/** A public hook id: `hk_` and 24 random bytes in base64url (service.ts, newHookId). */
export const HOOK_ID = /^hk_[A-Za-z0-9_-]{32}$/;

const DELIVERY_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * The sender's id for this delivery (X-Request-Id, X-GitHub-Delivery or X-Delivery-Id, the first one
 * present), when it is a sane printable string: a re-delivery with it is answered its first run.
 * Null: none, so the firing's id is made fresh.
 */
export function deliveryIdOf(headers: IncomingHttpHeaders): string | null {
  const header = [headers["x-request-id"], headers["x-github-delivery"], headers["x-delivery-id"]].find(
    (h) => h !== undefined,
  );
  const value = Array.isArray(header) ? header.join(", ") : header;
  return value !== undefined && DELIVERY_ID.test(value) ? value : null;
}

/** Requests whose per-IP token the fast path took before handing them to the app (taken once only). */
const ipTaken = new WeakSet<IncomingMessage>();

export function markIpTaken(req: IncomingMessage): void {
  ipTaken.add(req);
}

export function isIpTaken(req: IncomingMessage): boolean {
  return ipTaken.has(req);
}
