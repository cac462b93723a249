/**
 * Stripe's return URL. After a payment, Stripe sends the browser back to the `return_url` the page gave
 * `confirmPayment` with `payment_intent`, `payment_intent_client_secret` and `redirect_status` added to
 * its query string (before the `#`, since the page's own route lives in the hash), or, if the URL is
 * typed or reloaded, inside the hash's query. The client secret can complete a payment: it must not
 * stay in the address bar, the history or a bookmark, so the URL is rewritten before anything else
 * runs, keeping only the intent's id (not a secret: confirming it takes the account key) and the
 * status hint.
 */

export const RETURN_ROUTE = "#/billing/return";

export interface PaymentReturn {
  paymentIntentId: string;
  /** Stripe's hint only ("succeeded", "processing", "failed"): only confirm_payment credits. */
  redirectStatus: string | null;
}

/** The URL Stripe should send the browser back to: this page, on the return route. */
export function returnUrl(location: Pick<Location, "origin" | "pathname">): string {
  return `${location.origin}${location.pathname}${RETURN_ROUTE}`;
}

/** The return page's parameters from the hash (`#/billing/return?payment_intent=…`), or null. */
export function readPaymentReturn(hash: string): PaymentReturn | null {
  if (!hash.startsWith(RETURN_ROUTE)) return null;
  const q = new URLSearchParams(hash.slice(RETURN_ROUTE.length).replace(/^\?/, ""));
  const id = q.get("payment_intent");
  if (!id || !/^[A-Za-z0-9_]{1,255}$/.test(id)) return null;
  return { paymentIntentId: id, redirectStatus: q.get("redirect_status") };
}

const STRIPE_PARAMS = ["payment_intent", "payment_intent_client_secret", "redirect_status"] as const;

/**
 * Moves Stripe's parameters from the query string into the return route's hash and drops the client
 * secret from both, with history.replaceState (no new history entry, no reload). Call before the
 * first render. Returns whether the URL changed.
 */
export function scrubPaymentReturnUrl(w: Pick<Window, "location" | "history"> = window): boolean {
  const url = new URL(w.location.href);
  const search = url.searchParams;
  const hashQueryAt = url.hash.indexOf("?");
  const hashQuery = new URLSearchParams(hashQueryAt >= 0 ? url.hash.slice(hashQueryAt + 1) : "");
  const fromSearch = STRIPE_PARAMS.some((p) => search.has(p));
  if (!fromSearch && !hashQuery.has("payment_intent_client_secret")) return false;
  const kept = new URLSearchParams();
  for (const p of ["payment_intent", "redirect_status"]) {
    const v = search.get(p) ?? hashQuery.get(p);
    if (v !== null) kept.set(p, v);
  }
  for (const p of STRIPE_PARAMS) search.delete(p);
  const hash = fromSearch ? RETURN_ROUTE : url.hash.slice(0, hashQueryAt);
  url.hash = `${hash}?${kept.toString()}`;
  w.history.replaceState(null, "", url.toString());
  return true;
}
