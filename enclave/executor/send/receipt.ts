/**
 * The wait of a send for its receipt (docs/actions.md, "EVM send"): polled until the transaction is
 * `confirmations` blocks deep or the run's deadline comes, whichever is first. It holds no lock and no
 * key-operation slot; a failed poll is tried again until the deadline.
 */
import type { JsonRpcClient } from "./rpc";

export interface SendReceipt {
  status: number;
  blockNumber: number;
  /** Decimal string (gas amounts can exceed 2^53 in principle; JSON has no bigint). */
  gasUsed: string;
  logs: { address: string; topics: string[]; data: string; logIndex: number }[];
}

/** The receipt once `confirmations` blocks include it; null when the run's limit comes first. */
export async function waitForReceipt(
  rpc: JsonRpcClient,
  hash: string,
  confirmations: number,
  run: { deadline: number; live: () => boolean },
  pollMs: number,
): Promise<SendReceipt | null> {
  for (;;) {
    const left = run.deadline - performance.now();
    if (left <= 0 || !run.live()) return null;
    try {
      const r = await rpc.call<RawReceipt | null>("eth_getTransactionReceipt", [hash], left);
      if (r !== null && r.blockNumber) {
        const block = Number(BigInt(r.blockNumber));
        const head =
          confirmations <= 1 ? block : Number(BigInt(await rpc.call<string>("eth_blockNumber", [], left)));
        if (head - block + 1 >= confirmations) return receiptOf(r);
      }
    } catch {
      // A failed poll is retried until the deadline: the transaction is out, only the wait is left.
    }
    const pause = Math.min(pollMs, run.deadline - performance.now());
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
  }
}

interface RawReceipt {
  status?: string;
  blockNumber?: string;
  gasUsed?: string;
  logs?: { address: string; topics: string[]; data: string; logIndex: string }[];
}

function receiptOf(r: RawReceipt): SendReceipt {
  return {
    status: Number(BigInt(r.status ?? "0x0")),
    blockNumber: Number(BigInt(r.blockNumber ?? "0x0")),
    gasUsed: BigInt(r.gasUsed ?? "0x0").toString(),
    logs: (r.logs ?? []).map((l) => ({
      address: l.address,
      topics: [...l.topics],
      data: l.data,
      logIndex: Number(BigInt(l.logIndex)),
    })),
  };
}
