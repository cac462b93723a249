/**
 * A key refused before a request is authenticated (an expired usage key) still belongs to a known
 * account: authentication marks its refusal with the key's account and address, so that the refusal
 * recorder (refusals.ts) can write it to that account's log like the refusals of authenticated keys.
 * The mark stays on the server: it is not part of the error's JSON.
 */
const marks = new WeakMap<object, RefusedKey>();

export interface RefusedKey {
  accountId: string;
  /** The usage key's address (its public id). */
  keyAddress: string;
  /** The key as sent (for its hash prefix); null for a signed request, which sends no key. */
  apiKey: string | null;
}

/** Marks `err` as the refusal of a key of a known account; answers `err` (for `throw markRefusedKey(…)`). */
export function markRefusedKey<E extends object>(err: E, key: RefusedKey): E {
  marks.set(err, key);
  return err;
}

export function refusedKeyOf(err: unknown): RefusedKey | undefined {
  return typeof err === "object" && err !== null ? marks.get(err) : undefined;
}
