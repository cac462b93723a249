/**
 * The chain and checkpoint format (docs/audit-log.md, "The chain"). Every entry's hash covers the account,
 * its sequence number, the previous entry's hash, its kind, its time and its data, serialized as canonical
 * JSON (sorted keys, no whitespace); a checkpoint's digest covers (account, sequence, head hash, time) the
 * same way, and the enclave's identity key signs that digest. The SDK's offline verifier (sdk/audit.ts)
 * recomputes exactly this, from its own code: a test checks that an export written here verifies there.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../../enclave";
import type { AuditData, AuditKind } from "./entries";
import { ENTRY_FORMAT } from "./entryHash";

export { ENTRY_FORMAT, GENESIS_HASH, entryHashOfCanonicalData } from "./entryHash";
export const CHECKPOINT_FORMAT = "sigil-audit-checkpoint/v1";
export const EXPORT_FORMAT = "sigil-audit-export/v1";

export function sha256Hex(text: string): string {
  return "0x" + createHash("sha256").update(text, "utf8").digest("hex");
}

export interface ChainedFields {
  account: string;
  seq: number;
  prev_hash: string;
  kind: AuditKind;
  time_ms: number;
  data: AuditData;
}

export function entryHash(e: ChainedFields): string {
  return sha256Hex(
    canonicalJson({
      format: ENTRY_FORMAT,
      account: e.account,
      seq: e.seq,
      prev_hash: e.prev_hash,
      kind: e.kind,
      time_ms: e.time_ms,
      data: e.data,
    }),
  );
}

export interface CheckpointFields {
  account: string;
  seq: number;
  head_hash: string;
  time_ms: number;
}

/** What the enclave signs for a checkpoint (under its checkpoint domain, enclave/attestation.ts). */
export function checkpointDigest(c: CheckpointFields): string {
  return sha256Hex(
    canonicalJson({
      format: CHECKPOINT_FORMAT,
      account: c.account,
      seq: c.seq,
      head_hash: c.head_hash,
      time_ms: c.time_ms,
    }),
  );
}

/** SHA-256 of a response as the log records it: of its canonical JSON (undefined counts as null). */
export function responseDigest(response: unknown): string {
  try {
    return sha256Hex(canonicalJson(response === undefined ? null : response));
  } catch {
    // Not plain JSON (cannot happen for an executor answer, which crossed a structured clone as JSON).
    return sha256Hex(JSON.stringify(response) ?? "null");
  }
}
