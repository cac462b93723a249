import type { OwnerSession } from "../../sdk";
/**
 * Where the signed-in key lives: sessionStorage only. It is per tab and dies with the tab; never
 * localStorage (survives the browser), a cookie (sent with every request) or the URL (history, logs,
 * Referer). Sign-out removes it.
 */
const SLOT = "sigil.session.key";
/**
 * An owner's wallet session: the SIWE message, the owner's signature of it and the session key it
 * names. Not the owner's key: the session key may only read, and only until the message expires (at
 * most an hour). Kept like a signed-in key (this tab only), so a reload does not ask the wallet again.
 */
const OWNER_SLOT = "sigil.session.owner";

export function savedOwnerSession(): OwnerSession | null {
  const raw = sessionStorage.getItem(OWNER_SLOT);
  if (!raw) return null;
  try {
    const s = JSON.parse(raw) as OwnerSession;
    return s.expiresAt > Date.now() / 1000 ? s : null;
  } catch {
    return null;
  }
}

export function saveOwnerSession(s: OwnerSession): void {
  sessionStorage.setItem(OWNER_SLOT, JSON.stringify(s));
}

export function savedKey(): string | null {
  return sessionStorage.getItem(SLOT);
}

export function saveKey(key: string): void {
  sessionStorage.setItem(SLOT, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(SLOT);
  sessionStorage.removeItem(OWNER_SLOT);
  // The tab's recent runs (recentRuns.ts) belong to the session too.
  sessionStorage.removeItem("sigil.session.runs");
}
