"use strict";
/**
 * An audit entry's hash from its data's canonical JSON (docs/audit-log.md, "The chain"), shared by the
 * relayer's chainer (format.ts) and its SQLite writer thread (sqliteWriter-thread.js), which plain
 * JavaScript can load: the one place this rule is written. The text is the entry's canonical JSON,
 * assembled around the stored data instead of parsed and serialized again. Keys in canonical order:
 * account, data, format, kind, prev_hash, seq, time_ms.
 */
const { createHash } = require("node:crypto");

const ENTRY_FORMAT = "sigil-audit-entry/v1";

/** The previous hash of an account's first entry. */
const GENESIS_HASH = "0x" + "00".repeat(32);

function entryHashOfCanonicalData(e, canonicalData) {
  if (!Number.isSafeInteger(e.seq) || !Number.isSafeInteger(e.time_ms))
    throw new TypeError("entryHashOfCanonicalData: seq and time_ms must be integers");
  const text =
    `{"account":${JSON.stringify(e.account)},"data":${canonicalData},"format":${JSON.stringify(ENTRY_FORMAT)},` +
    `"kind":${JSON.stringify(e.kind)},"prev_hash":${JSON.stringify(e.prev_hash)},"seq":${e.seq},"time_ms":${e.time_ms}}`;
  return "0x" + createHash("sha256").update(text, "utf8").digest("hex");
}

module.exports = { ENTRY_FORMAT, GENESIS_HASH, entryHashOfCanonicalData };
