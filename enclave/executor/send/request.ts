/**
 * The arguments of `Actions.sendTransaction` as the enclave side reads them (the worker copied them
 * into plain data; they are read again here, as everything from a worker is).
 */
import { Transaction, type TransactionLike } from "ethers";

/** The transaction fields an action may give; nonce, chain id and `from` are the send's to fill. */
const ACTION_FIELDS = new Set([
  "type",
  "to",
  "value",
  "data",
  "gasLimit",
  "gas",
  "gasPrice",
  "maxFeePerGas",
  "maxPriorityFeePerGas",
  "accessList",
  "chainId",
]);

/** Most confirmations a wait may ask for: beyond this a run's time limit ends it anyway. */
export const MAX_WAIT_CONFIRMATIONS = 64;

export interface SendRequest {
  chainId: number;
  /** The action's transaction fields, `gas` as `gasLimit`; no nonce, no chainId. */
  tx: Record<string, unknown>;
  /** Confirmations to wait for; 0: return once broadcast. */
  confirmations: number;
}

function invalid(message: string): never {
  throw { code: "invalid_argument", shortMessage: `sendTransaction: ${message}` };
}

export function readSendRequest(args: Record<string, unknown>): SendRequest {
  const chainId = args.chainId;
  if (typeof chainId !== "number" || !Number.isSafeInteger(chainId) || chainId < 1)
    invalid("chainId must be a positive integer");
  const raw = args.transaction;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) invalid("tx must be an object");
  const tx: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    if (v === undefined || v === null || k === "from") continue;
    if (k === "nonce")
      invalid("tx.nonce is filled by the PKP's nonce manager; leave it out (docs/actions.md, EVM send)");
    if (!ACTION_FIELDS.has(k)) invalid(`unknown transaction field "${k}"`);
    tx[k === "gas" ? "gasLimit" : k] = v;
  }
  if (tx.chainId !== undefined) {
    let same = false;
    try {
      same = BigInt(tx.chainId as never) === BigInt(chainId);
    } catch {
      same = false;
    }
    if (!same) invalid(`tx.chainId differs from chainId ${chainId}`);
    delete tx.chainId;
  }
  const wait = args.wait;
  let confirmations = 0;
  if (wait === true) confirmations = 1;
  else if (wait !== undefined && wait !== false) {
    const n =
      typeof wait === "object" && wait !== null ? (wait as { confirmations?: unknown }).confirmations : NaN;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 1 || n > MAX_WAIT_CONFIRMATIONS)
      invalid(`wait must be true, false or { confirmations: 1…${MAX_WAIT_CONFIRMATIONS} }`);
    confirmations = n;
  }
  return { chainId, tx, confirmations };
}

export interface Normalized {
  to: string | null;
  value: bigint;
  data: string;
  gasLimit?: bigint;
  /** The action asked for type 0 or 1 (legacy gas price). */
  legacy: boolean;
  fees: { gasPrice?: bigint; maxFeePerGas?: bigint; maxPriorityFeePerGas?: bigint };
  /** What the signature carries besides nonce, chain id, gas and fees. */
  fields: Record<string, unknown>;
}

/** The action's fields through ethers' own parser (the one signTransaction uses), as plain values. */
export function normalize(req: SendRequest): Normalized {
  let tx: Transaction;
  try {
    tx = Transaction.from({ ...req.tx, chainId: req.chainId, nonce: 0 } as TransactionLike<string>);
  } catch (e) {
    const why = (e as { shortMessage?: string }).shortMessage ?? (e as Error).message;
    throw {
      code: "invalid_argument",
      shortMessage: `sendTransaction: the transaction does not parse: ${why}`,
    };
  }
  const given = req.tx;
  const fields: Record<string, unknown> = { value: tx.value.toString(), data: tx.data };
  if (tx.to !== null) fields.to = tx.to;
  if (given.accessList !== undefined) fields.accessList = tx.accessList;
  return {
    to: tx.to,
    value: tx.value,
    data: tx.data,
    gasLimit: given.gasLimit !== undefined ? tx.gasLimit : undefined,
    legacy: given.type !== undefined && tx.type !== null && tx.type < 2,
    fees: {
      gasPrice: given.gasPrice !== undefined ? (tx.gasPrice ?? undefined) : undefined,
      maxFeePerGas: given.maxFeePerGas !== undefined ? (tx.maxFeePerGas ?? undefined) : undefined,
      maxPriorityFeePerGas:
        given.maxPriorityFeePerGas !== undefined ? (tx.maxPriorityFeePerGas ?? undefined) : undefined,
    },
    fields,
  };
}
