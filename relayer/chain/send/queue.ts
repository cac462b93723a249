/**
 * Batching: signed forward requests wait in one queue; a free send slot takes up to `maxBatch` of them
 * (and at most MAX_BATCH_GAS) into one transaction: `execute` for one, else `executeBatch` with the gas
 * wallet as refund receiver (not atomic: see ../batch.ts). No timer: a request that finds a free slot
 * goes at once; requests that arrive while every slot is busy go together in the next transaction.
 * Each request's outcome and logs are read from the ExecutedForwardRequest events of the receipt.
 */
import { encodeExecute, encodeExecuteBatch, splitBatchLogs, type SignedForwardRequest } from "../batch";
import type { Receipt } from "./receipts";
import type { Pending } from "./types";

/** Measured on anvil with 8 concurrent principals (bench/relayer.bench.ts): see docs/configuration.md. */
export const DEFAULT_MAX_BATCH = 16;
/**
 * A batch stays well below the block gas limit (30M on anvil and most chains) and the per-transaction
 * cap of EIP-7825 (2^24 = 16.8M).
 */
export const MAX_BATCH_GAS = 8_000_000n;
/**
 * The forwarder's own work per request of a batch besides the call and calldata: signature recovery,
 * the target's isTrustedForwarder, the nonce update (a cold slot, 22.1k if it was zero), the event.
 * Measured at ~40k; the margin is cheap (unused gas is not paid for).
 */
const BATCH_PER_REQUEST_GAS = 60_000n;
/** Intrinsic transaction gas plus the batch loop's own work. */
const BATCH_BASE_GAS = 60_000n;
/** Longest a queued request is held for writes being prepared (pump); normally one simulation, ~1 ms. */
export const HOLD_MAX_MS = 15;

export class BatchQueue {
  private readonly queue: Pending[] = [];
  /** Writes being simulated and signed (they will be queued in a moment). */
  private preparing = 0;
  private holdTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly maxBatch: number) {}

  get length(): number {
    return this.queue.length;
  }

  /** A write started preparing (simulation, signature): a free slot may wait for it. */
  startPreparing(): void {
    this.preparing++;
  }

  /**
   * A write stopped preparing: queued (`pending`) or failed. Queued before it stops counting as being
   * prepared, so that a pump in between cannot send the others without it.
   */
  donePreparing(pending?: Pending): void {
    if (pending) this.queue.push(pending);
    this.preparing--;
  }

  /**
   * Whether a free slot should hold the queue for writes being prepared (one RPC away) so that they
   * share the transaction. A lone write is not held (nothing else is being prepared), nor a full batch;
   * HOLD_MAX_MS from the oldest request's queueing bounds the wait, after which `wake` runs once.
   */
  shouldHold(wake: () => void): boolean {
    const first = this.queue[0];
    if (this.queue.length >= this.maxBatch) return false;
    if (this.preparing === 0) return false;
    const left = HOLD_MAX_MS - (performance.now() - first.queuedAt);
    if (left <= 0) return false;
    if (!this.holdTimer) {
      this.holdTimer = setTimeout(() => {
        this.holdTimer = null;
        wake();
      }, Math.ceil(left));
      this.holdTimer.unref?.();
    }
    return true;
  }

  /** The oldest queued requests, up to maxBatch and MAX_BATCH_GAS (the first is always taken). */
  takeBatch(): Pending[] {
    let gas = BATCH_BASE_GAS;
    let n = 0;
    while (n < this.queue.length && n < this.maxBatch) {
      gas += batchItemGas(this.queue[n].signed);
      if (n > 0 && gas > MAX_BATCH_GAS) break;
      n++;
    }
    return this.queue.splice(0, n);
  }
}

/** Gas a request adds to an executeBatch transaction: its call (+1/63, EIP-150), the forwarder's work, calldata. */
export function batchItemGas(r: SignedForwardRequest): bigint {
  const calldata = BigInt(7 * 32 + 64 + (r.data.length - 2) / 2 + (r.signature.length - 2) / 2 + 64);
  return (r.gas * 64n) / 63n + BATCH_PER_REQUEST_GAS + calldata * 16n;
}

/** The forwarder call carrying `batch`, and its gas limit. */
export function transactionFor(
  batch: readonly Pending[],
  refundReceiver: string,
): { data: string; gasLimit: bigint } {
  if (batch.length === 1) {
    const r = batch[0].signed;
    const data = encodeExecute(r);
    // The forwarder checks that at least `gas` reached the call (EIP-150 keeps 1/64 back), plus its
    // own work: signature recovery, nonce update, calldata.
    return { data, gasLimit: (r.gas * 64n) / 63n + 150_000n + BigInt((data.length - 2) / 2) * 16n };
  }
  // Refund receiver = the gas wallet: not zero, so one invalid or reverting request does not revert the
  // others (batch.ts).
  const data = encodeExecuteBatch(
    batch.map((p) => p.signed),
    refundReceiver,
  );
  // Each call must find its `gas` (plus 1/63) still available when its turn comes: sum them all.
  let gasLimit = BATCH_BASE_GAS;
  for (const p of batch) gasLimit += batchItemGas(p.signed);
  return { data, gasLimit };
}

/** Settles every request of a mined transaction from its receipt. */
export function settleFromReceipt(batch: readonly Pending[], receipt: Receipt, forwarder: string): void {
  const txHash = receipt.result.txHash;
  if (receipt.status !== 1) {
    // The whole transaction reverted (for `execute`: the call reverted or the request was invalid):
    // no nonce was used.
    for (const p of batch) p.settle({ kind: "skipped", txHash });
    return;
  }
  if (batch.length === 1) {
    batch[0].settle({ kind: "ok", result: receipt.result });
    return;
  }
  const outcomes = splitBatchLogs(
    receipt.result.logs,
    forwarder,
    batch.map((p) => ({ from: p.signed.from, nonce: p.nonce })),
  );
  batch.forEach((p, i) => {
    const o = outcomes[i];
    if (o.kind === "skipped") p.settle({ kind: "skipped", txHash });
    else if (!o.success) p.settle({ kind: "reverted", txHash });
    else p.settle({ kind: "ok", result: { ...receipt.result, logs: o.logs } });
  });
}
