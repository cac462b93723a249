"use strict";
/**
 * The chain's rules (docs/audit-log.md, "The chain" and "Checkpoints"), in plain JavaScript so that both
 * chainers load them: the store's (store.ts, on the data layer's connection: PostgreSQL, SQLite in
 * memory) and the SQLite writer thread (sqliteWriter-thread.js). The one place each rule is written:
 *
 *  - an entry's hash: the SHA-256 of the entry's canonical JSON, assembled around the data's canonical
 *    JSON as stored instead of parsed and serialized again. Keys in canonical order: account, data,
 *    format, kind, prev_hash, seq, time_ms;
 *  - chaining pending entries onto an account's head, and which heads are then due a checkpoint:
 *    exactly every `checkpointEvery` entries, and the last head once the last checkpoint is
 *    `checkpointMs` old.
 */
const { createHash } = require("node:crypto");

const ENTRY_FORMAT = "sigil-audit-entry/v1";

/** The previous hash of an account's first entry. */
const GENESIS_HASH = "0x" + "00".repeat(32);

const FORMAT_JSON = JSON.stringify(ENTRY_FORMAT);

function entryHashOfCanonicalData(e, canonicalData) {
  if (!Number.isSafeInteger(e.seq) || !Number.isSafeInteger(e.time_ms))
    throw new TypeError("entryHashOfCanonicalData: seq and time_ms must be integers");
  const text =
    `{"account":${JSON.stringify(e.account)},"data":${canonicalData},"format":${FORMAT_JSON},` +
    `"kind":${JSON.stringify(e.kind)},"prev_hash":${JSON.stringify(e.prev_hash)},"seq":${e.seq},"time_ms":${e.time_ms}}`;
  return "0x" + createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * Chains `pending` (in order: each `{kind, time_ms, data, principal, cid, pkps, outcome}`, `data` the
 * canonical JSON) onto the account's head `{seq, hash, checkpoint_seq, checkpoint_ms}`. Answers the
 * `audit_entries` rows (ENTRY_COLUMNS order), the new head, and `due`: the heads `{seq, hash}` to sign,
 * in order; `signed` is then the last checkpoint's position as if they were signed at `now`.
 */
function chainOnto(account, head, pending, rules) {
  let seq = Number(head.seq);
  let hash = head.hash;
  let signedSeq = Number(head.checkpoint_seq);
  let signedMs = Number(head.checkpoint_ms);
  const rows = [];
  const due = [];
  for (const p of pending) {
    const timeMs = Number(p.time_ms);
    const h = entryHashOfCanonicalData(
      { account, seq: seq + 1, prev_hash: hash, kind: p.kind, time_ms: timeMs },
      p.data,
    );
    rows.push([account, seq + 1, hash, h, p.kind, timeMs, p.data, p.principal, p.cid, p.pkps, p.outcome]);
    seq++;
    hash = h;
    // Exactly every checkpointEvery entries, however many one pass chains.
    if (seq - signedSeq >= rules.checkpointEvery) {
      due.push({ seq, hash });
      signedSeq = seq;
      signedMs = rules.now;
    }
  }
  if (seq > signedSeq && rules.now - signedMs >= rules.checkpointMs) {
    due.push({ seq, hash });
    signedSeq = seq;
    signedMs = rules.now;
  }
  return { rows, seq, hash, due, signed: { seq: signedSeq, ms: signedMs } };
}

/** The columns of an `audit_entries` row as chainOnto answers it. */
const ENTRY_COLUMNS = [
  "account_id",
  "seq",
  "prev_hash",
  "hash",
  "kind",
  "time_ms",
  "data",
  "principal",
  "cid",
  "pkps",
  "outcome",
];

module.exports = { ENTRY_FORMAT, GENESIS_HASH, ENTRY_COLUMNS, entryHashOfCanonicalData, chainOnto };
