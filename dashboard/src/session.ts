/**
 * Where the signed-in key lives: sessionStorage only. It is per tab and dies with the tab; never
 * localStorage (survives the browser), a cookie (sent with every request) or the URL (history, logs,
 * Referer). Sign-out removes it.
 */
const SLOT = "sigil.session.key";

export function savedKey(): string | null {
  return sessionStorage.getItem(SLOT);
}

export function saveKey(key: string): void {
  sessionStorage.setItem(SLOT, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(SLOT);
}
