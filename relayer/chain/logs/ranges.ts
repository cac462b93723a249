/**
 * Range splitting for eth_getLogs, the one rule every reader of the chain's logs follows: hosted RPC
 * endpoints refuse a query over too many blocks (or answering too many logs), so a span is asked for in
 * ranges of at most `maxRange` blocks. A reader that expects few logs over a long history (an account's
 * replay) asks for the whole span first, which self-hosted nodes and anvil take in one request, and
 * halves a refused range until it is accepted or down to `maxRange`, where the refusal is final.
 */
import type { RawLog } from "../rawLog";

/** The widest range a reader asks for by default: accepted by the common hosted endpoints. */
export const DEFAULT_LOG_RANGE = 5_000;

/** What eth_getLogs answers beyond a receipt's log: the block's hash, and whether a reorg removed it. */
export interface FetchedLog extends RawLog {
  blockHash?: string;
  removed?: boolean;
}

/** Raw JSON-RPC (an ethers JsonRpcProvider has it). */
export interface LogRpc {
  send(method: string, params: unknown[]): Promise<unknown>;
}

export interface LogFilter {
  address: string;
  topics?: Array<string | null>;
}

export interface RangeOptions {
  /** Widest range asked for at once (default DEFAULT_LOG_RANGE). */
  maxRange?: number;
  /** Ask for the whole span first and halve a refused range down to `maxRange` (see above). */
  wholeSpanFirst?: boolean;
  /** Retry wrapper for each request (the relayer's withRetry); called once per request. */
  retry?: <T>(fn: () => Promise<T>) => Promise<T>;
}

export const hexBlock = (n: number): string => "0x" + n.toString(16);

/** [from, to] cut into consecutive ranges of at most `size` blocks (none when to < from). */
export function blockRanges(from: number, to: number, size: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let start = from; start <= to; start += size) out.push([start, Math.min(to, start + size - 1)]);
  return out;
}

/** The logs matching `filter` in blocks [from, to], in chain order. */
export async function getLogs(
  rpc: LogRpc,
  filter: LogFilter,
  from: number,
  to: number,
  options: RangeOptions = {},
): Promise<FetchedLog[]> {
  const maxRange = options.maxRange ?? DEFAULT_LOG_RANGE;
  const retry = options.retry ?? ((fn) => fn());
  const out: FetchedLog[] = [];
  const fetchSpan = async (a: number, b: number): Promise<void> => {
    let logs: FetchedLog[];
    try {
      logs = await retry(
        () =>
          rpc.send("eth_getLogs", [{ ...filter, fromBlock: hexBlock(a), toBlock: hexBlock(b) }]) as Promise<
            FetchedLog[]
          >,
      );
    } catch (err) {
      if (b - a + 1 <= maxRange) throw err;
      const mid = a + Math.floor((b - a) / 2);
      await fetchSpan(a, mid);
      await fetchSpan(mid + 1, b);
      return;
    }
    out.push(...logs);
  };
  from = Math.max(0, from);
  if (to < from) return out;
  const spans = options.wholeSpanFirst ? [[from, to] as [number, number]] : blockRanges(from, to, maxRange);
  for (const [a, b] of spans) await fetchSpan(a, b);
  return out;
}

/**
 * The next range a consumer that only reads confirmed blocks scans: after its cursor (the last block
 * it processed), up to `confirmations` blocks below the head, at most `maxRange` blocks; null when
 * there is nothing confirmed past the cursor.
 */
export function nextConfirmedRange(
  head: number,
  confirmations: number,
  cursor: number,
  maxRange: number,
): [number, number] | null {
  const confirmed = head - Math.max(0, confirmations);
  if (confirmed <= cursor) return null;
  return [cursor + 1, Math.min(confirmed, cursor + maxRange)];
}
