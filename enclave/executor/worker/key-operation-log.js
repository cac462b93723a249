"use strict";
/**
 * What each key operation of a run did, for the audit log (docs/audit-log.md, "Entry kinds"): its kind
 * (the signing policies' names: message, typedData, digest, transaction, keyExport, encrypt, decrypt),
 * the PKP, and for a signature the 32-byte digest it signed (0x hex). Records are appended here, on the
 * worker's trusted side, as each operation completes, and travel with the run's "done" message: no
 * message per operation. The list lives in the run's RunState, which the Compartment cannot reach, so
 * an action can neither add a record nor remove one. The enclave side keeps its own list for the
 * operations it serves (key-operation-log.ts); the two are joined in the run's result.
 *
 * Operations served by a later scheme (Ed25519, Schnorr, …) call recordKeyOperation the same way.
 */

const KINDS = new Set(["message", "typedData", "digest", "transaction", "keyExport", "encrypt", "decrypt"]);

/** A run's list; `limit` bounds it (the run's maxKeyOps: more cannot have been served). */
function makeKeyOperationLog(limit) {
  const records = [];
  return {
    records,
    /** One completed operation; `digest` a 32-byte Uint8Array or 0x hex string, or null. */
    recordKeyOperation(kind, pkpId, digest) {
      if (records.length >= limit || !KINDS.has(kind) || typeof pkpId !== "string") return;
      const hex =
        digest instanceof Uint8Array
          ? "0x" + Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength).toString("hex")
          : typeof digest === "string"
            ? digest.toLowerCase()
            : null;
      records.push(
        hex === null ? { kind, pkp: pkpId.toLowerCase() } : { kind, pkp: pkpId.toLowerCase(), digest: hex },
      );
    },
  };
}

module.exports = { makeKeyOperationLog, KINDS };
