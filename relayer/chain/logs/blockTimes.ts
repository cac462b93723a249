/**
 * The time of blocks that carry logs (a key's `createdAt`, a webhook event's `created`): the block's
 * own timestamp, so every instance and every replay says the same.
 */
import { hexBlock, type LogRpc } from "./ranges";

/** The timestamp (seconds) of each distinct block, one eth_getBlockByNumber each. */
export async function blockTimes(
  rpc: LogRpc,
  blocks: Iterable<number>,
  retry: <T>(fn: () => Promise<T>) => Promise<T> = (fn) => fn(),
): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const n of new Set(blocks)) {
    const b = await retry(
      () => rpc.send("eth_getBlockByNumber", [hexBlock(n), false]) as Promise<{ timestamp: string } | null>,
    );
    if (!b) throw new Error(`block ${n} is not available from the RPC endpoint`);
    out.set(n, Number(BigInt(b.timestamp)));
  }
  return out;
}
