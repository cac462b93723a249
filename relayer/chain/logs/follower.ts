/**
 * The one follower of the registry's logs: reads eth_getLogs from the last processed block (the cursor)
 * up to the head, in ranges (ranges.ts), hands every batch to its subscriptions in chain order, and
 * moves the cursor (checkpointed under dataDir, cursorFile.ts) only after a batch was applied. A new
 * consumer of registry events is one `subscribe` call.
 *
 * RPC hiccups: a failed poll is retried on the next tick with backoff (at most 2 s apart).
 *
 * Reorganisations (`confirmations`, SIGIL_CONFIRMATIONS, default 0): blocks are handed out as soon as
 * they are the chain's head (read-your-writes needs that); the confirmation depth says how deep a
 * reorganisation the follower undoes exactly. It remembers the hash of each of the last `depth + 1`
 * processed blocks (at least 2: depth 0 means "only the latest block can be replaced", blockWindow.ts).
 * Every poll reads the head block (one eth_getBlockByNumber, instead of eth_blockNumber) and checks it
 * links to what was processed (same hash, or its parent's, or the hash at the newest processed height);
 * only when that fails does it read the hash at each remembered height (concurrently, each at its own
 * height, even above the head just read: that read may predate a block of ours applied meanwhile) to
 * find the fork point; the log line of a reorganisation names the block and both hashes. Then the cursor returns to the block before the fork point, the checkpoint is rewritten at once,
 * and every subscription undoes the replaced blocks (`onRollback`); the poll goes on from there, so the
 * events the new blocks carry (the same one re-mined, or none) are handed out exactly once. A fork below
 * the remembered window, or a head below the cursor with no remembered hash to compare, makes every
 * subscription drop everything (`onReset`, logged as an error) and the cursor jump to the head. Logs of
 * remembered heights must come from the block whose hash was read for that height, or the poll stops and
 * the next one starts over.
 *
 * Consumers that only act on confirmed blocks and keep their cursor in the shared database (webhooks,
 * billing's catch-up) take their ranges from `nextConfirmedRange` / `blockRanges` instead: a reorganisation
 * shallower than their depth never reaches them.
 */
import type { LogDescription } from "ethers";
import type { Logger } from "pino";
import { ApiError } from "../../errors";
import { parseRegistryLog } from "../abi";
import { chainUnavailable, withRetry } from "../rpc";
import { BlockWindow } from "./blockWindow";
import { CursorFile } from "./cursorFile";
import { DEFAULT_LOG_RANGE, getLogs, hexBlock, type FetchedLog, type LogRpc } from "./ranges";

export interface FollowedLog {
  ev: LogDescription;
  block: number;
  /** The log's identity within the chain (logKey). */
  key: string;
}

export interface LogBatch {
  /** The batch's blocks: [from, to]. */
  from: number;
  to: number;
  /** The registry's logs of those blocks, decoded, in chain order. */
  logs: FollowedLog[];
  /** Heights from here on can still be rolled back: what a consumer must be able to undo. */
  undoableFrom: number;
  /** Heights below this can no longer be rolled back: a consumer may forget how to undo them. */
  settledBelow: number;
}

export interface LogSubscription {
  /**
   * A batch: reads what the consumer needs for it (block times, say) and returns the change, which the
   * follower runs synchronously together with every other subscription's and the cursor's move, so no
   * request sees half a batch.
   */
  onLogs(batch: LogBatch): Promise<() => void>;
  /** Blocks from `fork` on were replaced: undo what they did (synchronously). */
  onRollback(fork: number): void;
  /** What was processed cannot be undone exactly (chain reset, deep reorganisation): drop everything. */
  onReset(): void;
}

export interface FollowerOptions {
  provider: LogRpc;
  registry: string;
  chainId: number;
  deployBlock: number;
  /** Where the cursor checkpoint lives. */
  dataDir: string;
  pollIntervalMs: number;
  logger: Logger;
  /** Reorganisation depth handled exactly (see above); default 0. */
  confirmations?: number;
  /** Widest range of one batch (default DEFAULT_LOG_RANGE). */
  maxRange?: number;
  /**
   * At most one cursor checkpoint per this many ms while following (default 5 s, cursorFile.ts); a
   * rollback, a reset and `stop` write it at once.
   */
  checkpointEveryMs?: number;
  /**
   * The newest block a write through any instance landed in (the cross-instance high-water mark,
   * relayer/cluster): `freshen` catches up to it. Absent: no such check.
   */
  sharedMark?: { read(): Promise<number> };
}

interface BlockHeader {
  number: number;
  hash: string;
  parentHash: string;
}

const retryOnce = <T>(fn: () => Promise<T>) => withRetry(fn, 1) as Promise<T>;

/**
 * A log's identity within the chain: its block, its index in the block, and the block's hash (the same
 * transaction re-mined in a replacing block is another log).
 */
export function logKey(l: { blockNumber: string; logIndex: string; blockHash?: string }): string {
  return `${Number(BigInt(l.blockNumber))}:${Number(BigInt(l.logIndex))}:${(l.blockHash ?? "").toLowerCase()}`;
}

export class RegistryLogFollower {
  private cursor: number;
  private readonly subscriptions: LogSubscription[] = [];
  private readonly window: BlockWindow;
  private readonly checkpoint: CursorFile;
  private polling: Promise<void> | null = null;
  private wanted = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private failures = 0;
  private synced = false;
  /** For /health. */
  lastPollOkMs: number | null = null;

  constructor(private readonly o: FollowerOptions) {
    this.window = new BlockWindow(Math.max(1, Math.floor(o.confirmations ?? 0)) + 1);
    this.checkpoint = new CursorFile(o.dataDir, o);
    const saved = this.checkpoint.read();
    this.cursor = saved?.block ?? o.deployBlock - 1;
    if (saved) this.window.restore(saved.hashes);
  }

  /** Adds a consumer: it is handed every batch from the cursor on (subscribe before `start`). */
  subscribe(s: LogSubscription): void {
    this.subscriptions.push(s);
  }

  get lastProcessedBlock(): number {
    return this.cursor;
  }

  /**
   * Remembers the hash of a block a consumer applied ahead of the cursor (from one of our own receipts),
   * so that the poll checks it is still the chain's before going past it.
   */
  rememberBlock(height: number, hash: string): void {
    this.window.record(height, hash);
  }

  /** Starts polling. Does not throw if the chain is down: requests then get 503 until it is back. */
  start(): void {
    const tick = async () => {
      if (this.stopped) return;
      try {
        await this.poll();
        this.failures = 0;
      } catch (err) {
        this.failures++;
        if (this.failures === 1 || this.failures % 20 === 0)
          this.o.logger.warn(
            { failures: this.failures, err: err instanceof Error ? err.message : String(err) },
            "event poll failed",
          );
      }
      if (this.stopped) return;
      // Back off while the chain is down so a dead RPC is not hammered, but never beyond 2 s.
      const delay =
        this.failures === 0
          ? this.o.pollIntervalMs
          : Math.min(2_000, this.o.pollIntervalMs * 2 ** Math.min(this.failures, 4));
      this.timer = setTimeout(tick, delay);
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.polling?.catch(() => undefined);
    this.writeCheckpoint(true);
  }

  /**
   * Cross-instance read-your-writes: if a write through another instance landed in a block not processed
   * yet, catch up to it first. Null (nothing to wait for) without a shared mark, so the single-instance
   * path costs no promise.
   */
  freshen(): Promise<void> | null {
    const mark = this.o.sharedMark;
    if (!mark) return null;
    return mark.read().then((block) => (block > this.cursor ? this.catchUpTo(block) : undefined));
  }

  /**
   * syncTo(block), unless the RPC endpoint does not have that block (another instance's node is ahead,
   * or a reorganisation made the chain shorter since the write): then as far as the endpoint has.
   */
  async catchUpTo(block: number): Promise<void> {
    try {
      await this.syncTo(block);
    } catch (err) {
      if (!(err instanceof ApiError && err.details?.unknownBlock === block)) throw err;
      await this.poll();
    }
  }

  /** Resolves once the cursor has reached `block` (polling now if needed). Throws 503 if the chain is down. */
  async syncTo(block: number): Promise<void> {
    while (this.cursor < block) {
      this.wanted = Math.max(this.wanted, block);
      await this.poll(this.wanted);
    }
  }

  /** Before the first successful catch-up, the cursor may be far behind the chain: catch up first. */
  async ensureSynced(): Promise<void> {
    if (this.synced) return;
    await this.poll();
  }

  /** One poll, shared by concurrent callers: if one is running, wait for it (and run another if asked). */
  private async poll(target?: number): Promise<void> {
    if (this.polling) {
      try {
        await this.polling;
      } catch {
        // The caller loops (syncTo) or the next tick retries.
      }
      if (target === undefined || this.cursor >= target) return;
    }
    this.polling = this.pollOnce(target).finally(() => {
      this.polling = null;
    });
    await this.polling;
  }

  private async pollOnce(target?: number): Promise<void> {
    const head = await this.header(target ?? "latest");
    if (head === null)
      throw chainUnavailable(new Error(`block ${target} is not known to the RPC endpoint yet`), {
        unknownBlock: target,
      });
    await this.detectReorganisation(head);
    if (head.number < this.cursor) {
      this.o.logger.error(
        { cursor: this.cursor, head: head.number },
        "chain head is behind the event cursor (chain reset?): registry-log consumers start over",
      );
      this.reset(head);
      return;
    }
    while (this.cursor < head.number) if (!(await this.step(head))) return;
    this.synced = true;
    this.lastPollOkMs = Date.now();
    this.writeCheckpoint(false);
  }

  /** Hands out the next range after the cursor; false if the chain reorganised while it was read. */
  private async step(head: BlockHeader): Promise<boolean> {
    const from = this.cursor + 1;
    const to = Math.min(head.number, from + (this.o.maxRange ?? DEFAULT_LOG_RANGE) - 1);
    // The heights of this range that the window remembers once processed (and any block a consumer
    // applied ahead of the cursor): their hashes are read first, and every log of them must come from
    // exactly that block.
    const undoableFrom = Math.max(from, head.number - this.window.size + 1);
    const heights = new Set<number>();
    for (let h = undoableFrom; h <= to; h++) heights.add(h);
    for (const h of this.window.heights) if (h >= from && h <= to) heights.add(h);
    const headers = await this.headers([...heights], head);
    for (const [h, hdr] of headers) {
      const ours = this.window.hashAt(h);
      // A block applied ahead of the cursor that the chain replaced before the poll got here.
      if (ours !== undefined && ours !== hdr.hash) this.rollback(h, hdr.hash);
    }
    const logs: FetchedLog[] = await getLogs(this.o.provider, { address: this.o.registry }, from, to, {
      maxRange: to - from + 1,
      retry: retryOnce,
    });
    const batch: LogBatch = { from, to, logs: [], undoableFrom, settledBelow: to - this.window.size + 1 };
    for (const l of logs) {
      if (l.removed) continue;
      const block = Number(BigInt(l.blockNumber));
      const expected = headers.get(block)?.hash;
      if (expected !== undefined && l.blockHash?.toLowerCase() !== expected) return false;
      const ev = parseRegistryLog(l.topics, l.data);
      if (ev) batch.logs.push({ ev, block, key: logKey(l) });
    }
    const changes: Array<() => void> = [];
    for (const s of this.subscriptions) changes.push(await s.onLogs(batch));
    // Synchronous from here to the cursor's move: no request observes a half-applied batch.
    for (const change of changes) change();
    for (const [h, hdr] of headers) this.window.record(h, hdr.hash);
    this.cursor = to;
    this.window.prune(to);
    return true;
  }

  /**
   * Whether processed blocks were replaced, and if so, undo them (rollback) or everything (reset). The
   * cheap check first: the head links to the newest remembered block.
   */
  private async detectReorganisation(head: BlockHeader): Promise<void> {
    const top = this.window.top;
    if (top === null) return;
    let linked: string | undefined;
    if (head.number === top) linked = head.hash;
    else if (head.number === top + 1) linked = head.parentHash;
    else if (head.number > top + 1) linked = (await this.header(top))?.hash;
    if (linked !== undefined && linked === this.window.hashAt(top)) return;
    // Every remembered height is read at its own height, those above `head` too: `head` may be a read
    // answered before a block of ours was mined whose receipt was applied (rememberBlock) while the
    // answer was on its way, so "the head is below it" says nothing about that block. A read issued
    // now, after it was remembered, that finds no block there does mean the chain got shorter.
    const remembered = this.window.heights;
    const found = await this.headers(remembered, head);
    const canonical = new Map<number, string | undefined>();
    for (const h of remembered) canonical.set(h, found.get(h)?.hash);
    const fork = this.window.forkPoint(canonical);
    if (fork === null) return;
    if (fork === "deep") {
      const oldest = remembered[0];
      this.o.logger.error(
        {
          cursor: this.cursor,
          head: head.number,
          window: this.window.size,
          ...this.disagreement(oldest, canonical.get(oldest)),
        },
        "chain reorganisation deeper than the confirmation depth: registry-log consumers start over",
      );
      this.reset(head);
      return;
    }
    this.rollback(fork, canonical.get(fork));
  }

  /**
   * Undoes every processed block from `fork` on (`chainHash`: the chain's block there now, undefined if
   * it has none). Synchronous: no request sees a half-rolled-back state.
   */
  private rollback(fork: number, chainHash: string | undefined): void {
    const before = this.cursor;
    const evidence = this.disagreement(fork, chainHash);
    this.window.dropFrom(fork);
    this.cursor = Math.min(this.cursor, fork - 1);
    for (const s of this.subscriptions) s.onRollback(fork);
    this.writeCheckpoint(true);
    this.o.logger.warn(
      { fork, cursor: before, rolledBackTo: this.cursor, ...evidence },
      "chain reorganisation: registry log consumers rolled back to the fork point",
    );
  }

  /** What a reorganisation's log line carries: the block, the hash we processed, the chain's hash now. */
  private disagreement(block: number, chainHash: string | undefined) {
    return { block, processedHash: this.window.hashAt(block) ?? null, chainHash: chainHash ?? null };
  }

  private reset(head: BlockHeader): void {
    this.window.clear();
    this.window.record(head.number, head.hash);
    this.cursor = head.number;
    this.writeCheckpoint(true);
    for (const s of this.subscriptions) s.onReset();
  }

  private async header(tag: number | "latest"): Promise<BlockHeader | null> {
    const b = await retryOnce(
      () =>
        this.o.provider.send("eth_getBlockByNumber", [
          typeof tag === "number" ? hexBlock(tag) : tag,
          false,
        ]) as Promise<{ number: string; hash: string; parentHash: string } | null>,
    );
    if (!b) return null;
    return {
      number: Number(BigInt(b.number)),
      hash: b.hash.toLowerCase(),
      parentHash: b.parentHash.toLowerCase(),
    };
  }

  /** Headers at several heights, read concurrently (`known` is reused); a missing one is left out. */
  private async headers(heights: number[], known: BlockHeader): Promise<Map<number, BlockHeader>> {
    const got = await Promise.all(heights.map((h) => (h === known.number ? known : this.header(h))));
    const out = new Map<number, BlockHeader>();
    heights.forEach((h, i) => {
      const hdr = got[i];
      if (hdr) out.set(h, hdr);
    });
    return out;
  }

  /** Unforced: only when the cursor moved, and not too often (CursorFile.save); forced: now. */
  private writeCheckpoint(force: boolean): void {
    const cursor = this.cursor;
    // The processed blocks' hashes: a restart after a reorganisation (or during one) still detects it.
    this.checkpoint.save(cursor, () => this.window.snapshot(cursor), force);
  }
}
