/**
 * PKP address → PKP id, per account, so that an action or request naming a PKP by its address costs a
 * map lookup, not a scan deriving the address of every PKP of the account (one EC multiplication each
 * on a cold enclave cache) on every miss.
 *
 * Kept current by the projection itself: an account's PKPs only ever grow (the registry has no PKP
 * deletion; PkpCreated appends to `pkps`, a Map in insertion order), so the index remembers how many
 * of them it has seen and addresses only the new ones, once each. A projection reloaded from views (a
 * chain reset, an account evicted and loaded again) is a new `pkps` Map and starts a new index: the
 * entries are held in a WeakMap keyed by that Map, so they live exactly as long as the projection.
 * A miss on an account whose PKP count has not changed costs nothing but the lookup.
 */
import type { AccountProjection } from "./projection";

interface AccountIndex {
  /** How many of the account's PKPs (in insertion order) are indexed. */
  seen: number;
  byAddress: Map<string, string>; // lower-case address → lower-case pkp id
}

export class PkpAddressIndex {
  private readonly accounts = new WeakMap<AccountProjection["pkps"], AccountIndex>();

  /** @param addressOf the PKP's address (the enclave's pkpAddress; public data, cached there). */
  constructor(private readonly addressOf: (pkpId: string) => string) {}

  /** The id of the account's PKP with this address (any case), or null. */
  lookup(pkps: AccountProjection["pkps"], address: string): string | null {
    const id = this.catchUp(pkps).byAddress.get(address.toLowerCase());
    return id !== undefined && pkps.has(id) ? id : null;
  }

  private catchUp(pkps: AccountProjection["pkps"]): AccountIndex {
    let index = this.accounts.get(pkps);
    if (index === undefined) {
      index = { seen: 0, byAddress: new Map() };
      this.accounts.set(pkps, index);
    }
    if (index.seen === pkps.size) return index;
    let i = 0;
    for (const id of pkps.keys()) {
      if (i++ < index.seen) continue; // already indexed: PKPs are only ever appended
      index.byAddress.set(this.addressOf(id).toLowerCase(), id);
    }
    index.seen = pkps.size;
    return index;
  }
}

const byEnclave = new WeakMap<object, PkpAddressIndex>();

/**
 * The one index of an enclave (every route resolving addresses shares it): addresses are a function
 * of the enclave's root key, so an index must never outlive or cross enclaves.
 */
export function pkpAddressIndexOf(enclave: { pkpAddress(pkpId: string): string }): PkpAddressIndex {
  let index = byEnclave.get(enclave);
  if (index === undefined) {
    index = new PkpAddressIndex((id) => enclave.pkpAddress(id));
    byEnclave.set(enclave, index);
  }
  return index;
}
