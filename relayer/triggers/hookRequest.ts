/**
 * What the hook endpoint (routes/hooks.ts), its fast path (hookFastPath.ts) and the hooks' own listener
 * (hookThread.ts) read off a request the same way: the path, the shape of a hook id, the delivery id a
 * sender names, the headers an action sees, the HMAC check, and whether the source's per-IP token was
 * already taken for this request (by the fast path, before it handed the request on). Nothing here
 * reaches the context: the listener's thread imports it.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";

/** The route's pattern, as the app's request log names it. */
export const HOOK_ROUTE = "/hooks/v1/:hook_id";
/** `/hooks/v1/<one segment>` and an optional query: what the app's router matches to HOOK_ROUTE, unencoded. */
export const HOOK_PATH = /^\/hooks\/v1\/([^/?#%]+)(?:\?.*)?$/s;

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

/** Headers the action never sees: credentials, cookies, and what proxies add about the client. */
const STRIPPED = new Set([
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  "forwarded",
  "via",
  "x-real-ip",
  "true-client-ip",
  "cf-connecting-ip",
  "x-amz-security-token",
  "x-csrf-token",
  "x-xsrf-token",
]);

/** The headers handed to the action (lower-case names; secret-bearing and proxy headers removed). */
export function safeHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase();
    if (STRIPPED.has(n) || n.startsWith("x-forwarded-") || n.startsWith("proxy-")) continue;
    if (value === undefined) continue;
    out[n] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

/** Does `given` carry the HMAC-SHA256 of `raw` under `secret` (after `prefix`, in `encoding`)? */
export function hmacMatches(
  raw: Buffer,
  secret: string,
  spec: { prefix: string; encoding: "hex" | "base64" },
  given: string | undefined,
): boolean {
  if (given === undefined || !given.startsWith(spec.prefix)) return false;
  const want = createHmac("sha256", secret).update(raw).digest();
  const got = Buffer.from(given.slice(spec.prefix.length).trim(), spec.encoding);
  return got.length === want.length && timingSafeEqual(got, want);
}

/** Requests whose per-IP token the fast path took before handing them to the app (taken once only). */
const ipTaken = new WeakSet<IncomingMessage>();

export function markIpTaken(req: IncomingMessage): void {
  ipTaken.add(req);
}

export function isIpTaken(req: IncomingMessage): boolean {
  return ipTaken.has(req);
}
