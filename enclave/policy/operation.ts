/**
 * What is about to be signed, parsed by the enclave itself into the facts a policy is checked against.
 * The action only ever supplies the inputs (transaction fields, typed data, a message); the enclave
 * serializes and hashes them here, and the digest computed here is the one that gets signed, so a
 * policy is never checked against one thing while another is signed.
 */
import {
  Transaction,
  TypedDataEncoder,
  getAddress,
  hashMessage,
  type TransactionLike,
  type TypedDataDomain,
  type TypedDataField,
} from "ethers";
import { decodeErc20Call, decodePermits, type Erc20Call, type PermitGrant } from "./erc20";
import type { OperationKind } from "./schema";
import { OperationError } from "./operationError";
import { readDigest } from "./digest";
import type { Ed25519Facts, SchnorrFacts } from "./chainOperations";

export { OperationError } from "./operationError";

export interface TransactionFacts {
  kind: "transaction";
  digest: string;
  /** The unsigned transaction the digest was computed from (signatures are attached to it). */
  tx: Transaction;
  chainId: bigint;
  /** Checksummed; null for a contract creation. */
  to: string | null;
  value: bigint;
  /** "0x" for empty calldata, else the first four bytes. */
  selector: string;
  erc20: Erc20Call | null;
}

export interface TypedDataFacts {
  kind: "typedData";
  digest: string;
  chainId: bigint | null;
  verifyingContract: string | null;
  name: string | null;
  primaryType: string;
  /** Allowances a Permit or Permit2 message grants (empty for other typed data). */
  permits: PermitGrant[];
}

export interface MessageFacts {
  kind: "message";
  digest: string;
  /** The message bytes (a string is its UTF-8 encoding, as EIP-191 signing hashes it). */
  bytes: Uint8Array;
}

export interface DigestFacts {
  kind: "digest";
  digest: string;
}

export interface PlainFacts {
  kind: "keyExport" | "encrypt" | "decrypt";
}

export type OperationFacts =
  TransactionFacts | TypedDataFacts | MessageFacts | DigestFacts | PlainFacts | Ed25519Facts | SchnorrFacts;

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const TX_FIELDS = new Set([
  "type",
  "chainId",
  "nonce",
  "gasLimit",
  "gas",
  "gasPrice",
  "maxFeePerGas",
  "maxPriorityFeePerGas",
  "to",
  "value",
  "data",
  "input",
  "accessList",
]);

/**
 * A transaction from the fields an action supplies (ethers' TransactionRequest shape, numbers as
 * numbers, decimal or hex strings). The chain id is required: a transaction without one (pre-EIP-155)
 * is valid on every chain, so no chain rule could hold for it. `from` is ignored (the signer is the PKP).
 */
export function parseTransaction(fields: unknown): TransactionFacts {
  if (!isPlainObject(fields)) throw new OperationError("the transaction must be an object");
  const like: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (k === "from" || v === undefined || v === null) continue;
    if (!TX_FIELDS.has(k)) throw new OperationError(`unknown transaction field "${k}"`);
    like[k === "gas" ? "gasLimit" : k === "input" ? "data" : k] = v;
  }
  if (like.chainId === undefined) throw new OperationError("the transaction must have a chainId");
  let tx: Transaction;
  try {
    tx = Transaction.from(like as TransactionLike<string>);
  } catch (e) {
    const why = (e as { shortMessage?: string }).shortMessage ?? (e as Error).message;
    throw new OperationError(`the transaction does not parse: ${why}`);
  }
  // No type: the one ethers would serialize (legacy unless EIP-1559 or access-list fields are present).
  if (tx.type === null) tx.type = tx.inferType();
  if (tx.type !== 0 && tx.type !== 1 && tx.type !== 2)
    throw new OperationError(`transaction type ${tx.type} is not supported (0, 1 and 2 are)`);
  if (tx.chainId <= 0n) throw new OperationError("the transaction must have a positive chainId");
  const to = tx.to === null ? null : getAddress(tx.to);
  const data = tx.data;
  return {
    kind: "transaction",
    digest: tx.unsignedHash,
    tx,
    chainId: tx.chainId,
    to,
    value: tx.value,
    selector: data.length >= 10 ? data.slice(0, 10).toLowerCase() : "0x",
    erc20: to === null ? null : decodeErc20Call(data),
  };
}

export function parseTypedData(domain: unknown, types: unknown, value: unknown): TypedDataFacts {
  if (!isPlainObject(domain) || !isPlainObject(types) || !isPlainObject(value))
    throw new OperationError("domain, types and value must be objects");
  // Payloads of eth_signTypedData_v4 often carry EIP712Domain; ethers derives it from the domain.
  const { EIP712Domain: _ignored, ...rest } = types as Record<string, TypedDataField[]>;
  void _ignored;
  let digest: string;
  let primaryType: string;
  try {
    const encoder = TypedDataEncoder.from(rest);
    primaryType = encoder.primaryType;
    digest = TypedDataEncoder.hash(domain as TypedDataDomain, rest, value);
  } catch (e) {
    const why = (e as { shortMessage?: string }).shortMessage ?? (e as Error).message;
    throw new OperationError(`the typed data does not encode: ${why}`);
  }
  const d = domain as TypedDataDomain;
  const vc = typeof d.verifyingContract === "string" ? getAddress(d.verifyingContract) : null;
  return {
    kind: "typedData",
    digest,
    chainId: d.chainId === undefined || d.chainId === null ? null : BigInt(d.chainId),
    verifyingContract: vc,
    name: typeof d.name === "string" ? d.name : null,
    primaryType,
    permits: decodePermits(primaryType, vc, value),
  };
}

export function parseMessage(message: unknown): MessageFacts {
  if (typeof message === "string") {
    if (!(message as unknown as { isWellFormed(): boolean }).isWellFormed())
      throw new OperationError("the message is not well-formed UTF-16");
    return { kind: "message", digest: hashMessage(message), bytes: Buffer.from(message, "utf8") };
  }
  if (message instanceof Uint8Array)
    return { kind: "message", digest: hashMessage(message), bytes: Uint8Array.from(message) };
  throw new OperationError("the message must be a string or bytes");
}

export function parseDigest(digest: unknown): DigestFacts {
  return { kind: "digest", digest: readDigest(digest) };
}

export function plainOperation(kind: PlainFacts["kind"]): PlainFacts {
  return { kind };
}

/** The kinds whose facts include a digest that a signature is made over. */
export function digestOf(facts: OperationFacts): string | undefined {
  return "digest" in facts ? facts.digest : undefined;
}

export type { OperationKind };
