/**
 * Charge references: the ledger's UNIQUE key for a usage charge, which is what makes a charge
 * idempotent (a retried charge of the same thing is a no-op). A reference must therefore name exactly
 * one billable thing, never something several of them share.
 *
 * - A path-A write is one ERC-2771 forward request. On chain it is identified by the forwarder that ran
 *   it and the signer's forwarder nonce (each nonce is consumed once, by one request): the forwarder's
 *   `ExecutedForwardRequest(signer, nonce, success)` event carries both. So the reference is
 *   `write:<chainId>:<forwarder>:<signer>:<nonce>`, which `npm run audit:billing` recomputes from the
 *   chain alone. It is not the transaction hash: a batched transaction (`executeBatch`) carries many
 *   requests, and a hash-keyed ledger charged only the first of them.
 * - An execution is one run, one HTTP request: `exec:<request id>` (a random UUID per request, never
 *   taken from the client).
 *
 * Ledgers written before this format hold `write:<transaction hash>` references; they stay valid (they
 * cannot collide with the new form, which starts with a decimal chain id) and the audit reads them as
 * "one charge somewhere in that transaction" (see parseWriteReference).
 */

/** What identifies one forward request on chain. */
export interface ForwardRequestId {
  chainId: number;
  forwarder: string;
  /** The address that signed the request (the `from` of ForwardRequestData). */
  signer: string;
  /** The signer's forwarder nonce the request consumed. */
  nonce: bigint;
}

export type ParsedWriteReference =
  | ({ kind: "forward_request" } & ForwardRequestId)
  /** A reference written before per-request references: one charge for some request of this transaction. */
  | { kind: "legacy_tx"; txHash: string };

const ADDRESS = /^0x[0-9a-f]{40}$/;
const TX_HASH = /^0x[0-9a-f]{64}$/;

export function writeChargeReference(id: ForwardRequestId): string {
  if (!Number.isSafeInteger(id.chainId) || id.chainId <= 0) throw new Error(`bad chain id ${id.chainId}`);
  const forwarder = id.forwarder.toLowerCase();
  const signer = id.signer.toLowerCase();
  if (!ADDRESS.test(forwarder) || !ADDRESS.test(signer))
    throw new Error("a write reference needs the forwarder's and the signer's addresses");
  if (typeof id.nonce !== "bigint" || id.nonce < 0n) throw new Error("a forwarder nonce is a uint256");
  return `write:${id.chainId}:${forwarder}:${signer}:${id.nonce.toString(10)}`;
}

/** Reads a write charge's reference back (the audit); null if it is not a write reference at all. */
export function parseWriteReference(reference: string): ParsedWriteReference | null {
  const parts = reference.split(":");
  if (parts[0] !== "write") return null;
  if (parts.length === 2 && TX_HASH.test(parts[1])) return { kind: "legacy_tx", txHash: parts[1] };
  if (parts.length !== 5) return null;
  const [, chainId, forwarder, signer, nonce] = parts;
  if (!/^[1-9][0-9]*$/.test(chainId) || !ADDRESS.test(forwarder) || !ADDRESS.test(signer)) return null;
  if (!/^(0|[1-9][0-9]*)$/.test(nonce)) return null;
  return { kind: "forward_request", chainId: Number(chainId), forwarder, signer, nonce: BigInt(nonce) };
}

export function executionChargeReference(requestId: string): string {
  if (typeof requestId !== "string" || requestId.length === 0 || requestId.length > 190)
    throw new Error("an execution reference needs the request id (1 to 190 characters)");
  return `exec:${requestId}`;
}

/** A pin is charged once per (account, CID): `pin:<account id>:<cid>`. */
export function pinChargeReference(accountId: string, cid: string): string {
  if (!/^[1-9][0-9]*$/.test(accountId)) throw new Error("a pin reference needs the account id");
  if (typeof cid !== "string" || cid.length === 0 || cid.length > 120)
    throw new Error("a pin reference needs the CID");
  return `pin:${accountId}:${cid}`;
}
