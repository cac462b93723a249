/**
 * Receipts of path-A transactions: reading a node's receipt object, and waiting for one by polling.
 * Automining chains include a transaction within milliseconds, so polling starts tight and backs off.
 */
import type { JsonRpcProvider } from "ethers";
import { ApiError } from "../../errors";
import { chainUnavailable, isTransient, sleep } from "../rpc";
import type { RawLog, WriteResult } from "./types";

export interface RawReceipt {
  transactionHash: string;
  transactionIndex?: string;
  status: string;
  blockNumber: string;
  logs: RawLog[];
  gasUsed: string;
}

export interface Receipt {
  status: number;
  result: WriteResult;
  /** Position of the transaction in its block (null if the node did not say). */
  transactionIndex: number | null;
}

export function toReceipt(txHash: string, r: RawReceipt): Receipt {
  return {
    status: Number(BigInt(r.status)),
    result: { txHash, blockNumber: Number(BigInt(r.blockNumber)), logs: r.logs, gasUsed: BigInt(r.gasUsed) },
    transactionIndex:
      typeof r.transactionIndex === "string" && /^0x[0-9a-fA-F]+$/.test(r.transactionIndex)
        ? Number(BigInt(r.transactionIndex))
        : null,
  };
}

export interface ReceiptWaitOptions {
  provider: JsonRpcProvider;
  /** Longest wait for the transaction to be mined (then 503 chain_unavailable with its hash). */
  receiptTimeoutMs: number;
  /** Longest the node may fail transiently in a row (then 503 chain_unavailable). */
  rpcTimeoutMs: number;
  onTransient?: (err: unknown) => void;
}

/** Polls until the transaction is mined; a timeout is a 503 that names the hash (it may still land). */
export async function waitForReceipt(o: ReceiptWaitOptions, txHash: string): Promise<Receipt> {
  const deadline = Date.now() + o.receiptTimeoutMs;
  let delay = 2;
  let failingSince: number | null = null;
  for (;;) {
    try {
      const r = (await o.provider.send("eth_getTransactionReceipt", [txHash])) as RawReceipt | null;
      failingSince = null;
      if (r) return toReceipt(txHash, r);
    } catch (err) {
      if (!isTransient(err)) throw err;
      o.onTransient?.(err);
      failingSince ??= Date.now();
      if (Date.now() - failingSince > o.rpcTimeoutMs) throw chainUnavailable(err, { tx_hash: txHash });
    }
    if (Date.now() > deadline) {
      throw new ApiError("chain_unavailable", "The write was sent but is not confirmed yet.", {
        retryAfter: 5,
        details: { tx_hash: txHash },
      });
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 25);
  }
}
