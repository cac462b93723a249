/** The entry format's name, hashed into every entry. */
export declare const ENTRY_FORMAT: "sigil-audit-entry/v1";

/** The previous hash of an account's first entry. */
export declare const GENESIS_HASH: string;

/** An entry's hash from its data's canonical JSON (entryHash.js). */
export declare function entryHashOfCanonicalData(
  e: { account: string; seq: number; prev_hash: string; kind: string; time_ms: number },
  canonicalData: string,
): string;
