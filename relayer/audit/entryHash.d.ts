/** The entry format's name, hashed into every entry. */
export declare const ENTRY_FORMAT: "sigil-audit-entry/v1";

/** The previous hash of an account's first entry. */
export declare const GENESIS_HASH: string;

/** An entry's hash from its data's canonical JSON (entryHash.js). */
export declare function entryHashOfCanonicalData(
  e: { account: string; seq: number; prev_hash: string; kind: string; time_ms: number },
  canonicalData: string,
): string;

/** A pending entry as the chainers read it (`data`: its canonical JSON). */
export interface PendingRow {
  kind: string;
  time_ms: number | string;
  data: string;
  principal: string | null;
  cid: string | null;
  pkps: string;
  outcome: string;
}

/** Chains pending entries onto an account's head (entryHash.js). */
export declare function chainOnto(
  account: string,
  head: {
    seq: number | string;
    hash: string;
    checkpoint_seq: number | string;
    checkpoint_ms: number | string;
  },
  pending: readonly PendingRow[],
  rules: { checkpointEvery: number; checkpointMs: number; now: number },
): {
  rows: unknown[][];
  seq: number;
  hash: string;
  due: Array<{ seq: number; hash: string }>;
  signed: { seq: number; ms: number };
};

/** The columns of an audit_entries row as chainOnto answers it. */
export declare const ENTRY_COLUMNS: readonly string[];
