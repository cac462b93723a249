/**
 * The key operations of one run, for its result and the audit log (docs/audit-log.md, "Entry kinds"):
 * kind, PKP and, for a signature, the 32-byte digest signed. The enclave side records the operations
 * it serves (key-ops.ts); the worker's trusted side records those it serves itself
 * (worker/key-operation-log.js) and sends them with the run's "done" message, checked here because the
 * worker also runs hostile code.
 */

export type KeyOperationKind =
  | "message"
  | "typedData"
  | "digest"
  | "transaction"
  | "keyExport"
  | "encrypt"
  | "decrypt"
  | "ed25519"
  | "schnorr";

export interface KeyOperationRecord {
  kind: KeyOperationKind;
  /** The canonical PKP id (bytes32, lowercase). */
  pkp: string;
  /** 0x + 64 lowercase hex digits: the hash that was signed. Absent for exports, encryption, decryption. */
  digest?: string;
}

const KINDS: ReadonlySet<string> = new Set<KeyOperationKind>([
  "message",
  "typedData",
  "digest",
  "transaction",
  "keyExport",
  "encrypt",
  "decrypt",
  "ed25519",
  "schnorr",
]);
const DIGEST = /^0x[0-9a-f]{64}$/;
const PKP_ID = /^0x[0-9a-f]{64}$/;

export class KeyOperationLog {
  readonly records: KeyOperationRecord[] = [];

  /** One operation the enclave side completed. */
  recordKeyOperation(kind: KeyOperationKind, pkpId: string, digest?: string | Uint8Array | null): void {
    const pkp = pkpId.toLowerCase();
    if (digest === undefined || digest === null) this.records.push({ kind, pkp });
    else
      this.records.push({
        kind,
        pkp,
        digest:
          typeof digest === "string" ? digest.toLowerCase() : "0x" + Buffer.from(digest).toString("hex"),
      });
  }

  /**
   * The worker's records, as its "done" message carried them: only well-formed ones, at most `served`
   * (the operations the worker says it served itself, already bounded by maxKeyOps), and only about the
   * PKP the run's key was handed over for (the only one the worker can sign with).
   */
  addWorkerRecords(records: unknown, served: number, pkpId: string | null): void {
    if (!Array.isArray(records) || pkpId === null) return;
    const pkp = pkpId.toLowerCase();
    for (const r of records.slice(0, served)) {
      if (typeof r !== "object" || r === null) continue;
      const x = r as Record<string, unknown>;
      if (typeof x.kind !== "string" || !KINDS.has(x.kind) || x.pkp !== pkp || !PKP_ID.test(pkp)) continue;
      if (x.digest !== undefined && (typeof x.digest !== "string" || !DIGEST.test(x.digest))) continue;
      this.records.push(
        x.digest === undefined
          ? { kind: x.kind as KeyOperationKind, pkp }
          : { kind: x.kind as KeyOperationKind, pkp, digest: x.digest as string },
      );
    }
  }
}
