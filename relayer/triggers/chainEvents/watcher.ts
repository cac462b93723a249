/**
 * The watcher of one configured chain: on every poll it reads the enabled chain-event triggers of its
 * chain, and for each it hands the intake one firing per matching log that is buried under the chain's
 * confirmation depth, then moves the trigger's cursor (cursors.ts) past what it handed over.
 *
 * Confirmation and reorganisations: nothing above `head - confirmations` is ever read, so a block that a
 * reorganisation drops before it is confirmed fired nothing. A reorganisation deeper than the depth is
 * noticed by the hash of the block each cursor stands on, checked on every poll: on a mismatch the
 * cursor rewinds REWIND_BLOCKS and the logs are read again; the firing id
 * (`chain:<chainId>:<txHash>:<logIndex>`) makes a log handed over twice one run.
 *
 * A chain that is down: the poll fails, is logged (the first failure, then every tenth) and retried with
 * a growing delay; no cursor moves, so nothing is skipped. Only the operator's RPC URL is ever asked.
 */
import type { Logger } from "pino";
import type { ChainEndpoint } from "../../chains";
import {
  DEFAULT_LOG_RANGE,
  getLogs,
  hexBlock,
  nextConfirmedRange,
  type FetchedLog,
  type LogRpc,
} from "../../chain/logs/ranges";
import type { Trigger, TriggerDirectory, TriggerIntake } from "../model";
import { specKey, type ChainCursor, type ChainCursorStore } from "./cursors";
import { EventDecoder, triggerLog } from "./decode";
import { matches, planReads, type LogRead, type WatchedTrigger } from "./readPlan";

/** How far a cursor goes back when the block it stands on was replaced (a reorganisation past the depth). */
export const REWIND_BLOCKS = 64;

/** The narrowest range a refused eth_getLogs is halved down to (ranges.ts) before the poll gives up. */
export const MIN_LOG_RANGE = 100;

export interface ChainWatcherOptions {
  chain: ChainEndpoint;
  rpc: LogRpc;
  intake: TriggerIntake;
  directory: TriggerDirectory;
  cursors: ChainCursorStore;
  logger: Logger;
  pollIntervalMs: number;
  /** The longest wait between polls while the chain is down (default 30 s). */
  maxBackoffMs?: number;
  /** Widest range one read asks for (default DEFAULT_LOG_RANGE). */
  maxRange?: number;
}

export function firingIdOf(chainId: number, log: { transactionHash: string; logIndex: number }): string {
  return `chain:${chainId}:${log.transactionHash.toLowerCase()}:${log.logIndex}`;
}

export class ChainWatcher {
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;
  private again = false;
  private stopped = true;
  private failures = 0;
  /** Decoders by trigger id, rebuilt when the trigger's event signature changes. */
  private readonly decoders = new Map<string, { event: string | null; decoder: EventDecoder }>();

  constructor(private readonly o: ChainWatcherOptions) {}

  get chainId(): number {
    return this.o.chain.chainId;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  /** Polls now (the directory changed): at once if idle, right after the running poll otherwise. */
  wake(): void {
    if (this.stopped) return;
    if (this.polling) {
      this.again = true;
      return;
    }
    this.schedule(0);
  }

  /** Stops polling and waits for a poll under way; no timer is left behind. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.polling;
  }

  /** One poll (tests and the loop); throws what the chain or the database threw. */
  async pollOnce(): Promise<void> {
    const triggers = (await this.o.directory.enabledOfKind("chain_event")).filter(
      (t) => t.chainEvent !== null && t.chainEvent.chainId === this.chainId,
    );
    this.forgetDecodersExcept(triggers);
    // No trigger on this chain: not a single request to it.
    if (triggers.length === 0) return;
    const head = Number(BigInt((await this.o.rpc.send("eth_blockNumber", [])) as string));
    const watched = await this.withCursors(triggers);
    await this.rewindReplaced(watched);
    for (const read of planReads(watched)) await this.runRead(read, head);
  }

  private schedule(delayMs: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.polling = this.tick().finally(() => {
        this.polling = null;
      });
    }, delayMs);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    this.again = false;
    try {
      await this.pollOnce();
      if (this.failures > 0)
        this.o.logger.info(
          { chain: this.o.chain.name, failures: this.failures },
          "chain-event triggers: chain reachable again",
        );
      this.failures = 0;
    } catch (err) {
      this.failures++;
      if (this.failures === 1 || this.failures % 10 === 0)
        this.o.logger.warn(
          {
            chain: this.o.chain.name,
            failures: this.failures,
            err: this.describe(err),
          },
          "chain-event triggers: poll failed; retrying with backoff (nothing is skipped)",
        );
    }
    if (this.stopped) return;
    const backoff = Math.min(
      this.o.maxBackoffMs ?? 30_000,
      this.o.pollIntervalMs * 2 ** Math.min(this.failures, 6),
    );
    this.schedule(this.failures > 0 ? backoff : this.again ? 0 : this.o.pollIntervalMs);
  }

  /** Each trigger with where it stands: its stored cursor, or just before its `fromBlock` (backfill). */
  private async withCursors(triggers: Trigger[]): Promise<WatchedTrigger[]> {
    const keys = new Map(triggers.map((t) => [t.id, specKey(t.chainEvent!)]));
    const stored = await this.o.cursors.forChain(this.chainId, keys);
    return triggers.map((trigger) => {
      const spec = trigger.chainEvent!;
      return {
        trigger,
        spec,
        cursor: stored.get(trigger.id) ?? { block: spec.fromBlock - 1, blockHash: null },
      };
    });
  }

  /**
   * A reorganisation deeper than the confirmation depth replaced a block a cursor stands on: that
   * cursor rewinds REWIND_BLOCKS (not before its trigger's start) and the blocks are read again.
   */
  private async rewindReplaced(watched: WatchedTrigger[]): Promise<void> {
    const heights = [
      ...new Set(watched.filter((w) => w.cursor.blockHash !== null).map((w) => w.cursor.block)),
    ];
    const hashes = new Map(
      await Promise.all(heights.map(async (h) => [h, await this.blockHash(h)] as const)),
    );
    for (const w of watched) {
      const { block, blockHash } = w.cursor;
      if (blockHash === null || hashes.get(block) === blockHash) continue;
      const rewound: ChainCursor = {
        block: Math.max(w.spec.fromBlock - 1, block - REWIND_BLOCKS),
        blockHash: null,
      };
      this.o.logger.warn(
        {
          chain: this.o.chain.name,
          triggerId: w.trigger.id,
          block,
          readHash: blockHash,
          chainHash: hashes.get(block) ?? null,
          rewoundTo: rewound.block,
        },
        "chain-event triggers: a confirmed block was replaced (reorganisation deeper than the confirmation depth); reading again",
      );
      await this.o.cursors.rewind(w.trigger.id, w.spec, rewound);
      w.cursor = rewound;
    }
  }

  /** One query over the next confirmed range of a group, then each member's firings and cursor. */
  private async runRead(read: LogRead, head: number): Promise<void> {
    const range = nextConfirmedRange(
      head,
      this.o.chain.confirmations,
      read.after,
      this.o.maxRange ?? DEFAULT_LOG_RANGE,
    );
    if (range === null) return;
    const [from, to] = range;
    // The hash of the range's last block first: the cursor will stand on it, and every log read from it
    // must come from that very block (else the chain moved under the read: try again next poll).
    const toHash = await this.blockHash(to);
    if (toHash === undefined) return;
    const logs = (
      await getLogs(this.o.rpc, read.filter, from, to, {
        maxRange: Math.min(MIN_LOG_RANGE, to - from + 1),
        wholeSpanFirst: true,
      })
    ).filter((l) => !l.removed);
    if (logs.some((l) => Number(BigInt(l.blockNumber)) === to && l.blockHash?.toLowerCase() !== toHash))
      return;
    logs.sort((a, b) => order(a) - order(b));
    for (const member of read.members) await this.hand(member, logs, { block: to, blockHash: toHash });
  }

  /**
   * Hands the member's matching logs to the intake in chain order, then moves its cursor to `end`. A
   * refusal (the trigger's queue is full, the database is down) stops at that log: the cursor stops
   * before its block, so the next poll hands it (and its block's earlier logs, absorbed) again.
   */
  private async hand(member: WatchedTrigger, logs: FetchedLog[], end: ChainCursor): Promise<void> {
    const decoder = this.decoderFor(member.trigger);
    for (const raw of logs) {
      if (!matches(member.spec, raw.topics)) continue;
      const log = triggerLog(raw);
      try {
        await this.o.intake.fire({
          triggerId: member.trigger.id,
          firingId: firingIdOf(this.chainId, log),
          firedAt: Date.now(),
          input: { kind: "chain_event", chainId: this.chainId, log, args: decoder.args(log) },
        });
      } catch (err) {
        // A full queue is the trigger's own backpressure, expected while it is busy: not worth a warning
        // on every poll. Anything else (the database down) is.
        const queueFull = (err as { code?: unknown }).code === "trigger_queue_full";
        this.o.logger[queueFull ? "debug" : "warn"](
          {
            chain: this.o.chain.name,
            triggerId: member.trigger.id,
            block: log.blockNumber,
            err: this.describe(err),
          },
          "chain-event triggers: firing refused; the log is handed over again on a later poll",
        );
        if (log.blockNumber - 1 > member.cursor.block)
          await this.o.cursors.advance(member.trigger.id, member.spec, {
            block: log.blockNumber - 1,
            blockHash: null,
          });
        return;
      }
    }
    await this.o.cursors.advance(member.trigger.id, member.spec, end);
  }

  private decoderFor(trigger: Trigger): EventDecoder {
    const event = trigger.chainEvent!.event;
    const known = this.decoders.get(trigger.id);
    if (known && known.event === event) return known.decoder;
    let decoder: EventDecoder;
    try {
      decoder = new EventDecoder(event);
    } catch (err) {
      // A stored signature that no longer parses (written around parseEventSpec): this trigger still
      // gets its raw logs, and one bad trigger never stalls the others on the chain.
      this.o.logger.warn(
        { chain: this.o.chain.name, triggerId: trigger.id, err: this.describe(err) },
        "chain-event triggers: the trigger's event signature does not parse; its runs get args: null",
      );
      decoder = new EventDecoder(null);
    }
    this.decoders.set(trigger.id, { event, decoder });
    return decoder;
  }

  private forgetDecodersExcept(triggers: Trigger[]): void {
    const live = new Set(triggers.map((t) => t.id));
    for (const id of this.decoders.keys()) if (!live.has(id)) this.decoders.delete(id);
  }

  /**
   * An error for the log, without the RPC URL: hosted endpoints carry their API key in it, and the
   * operator's secrets are never logged.
   */
  private describe(err: unknown): string {
    const message = err instanceof Error ? err.message : String(err);
    return message.split(this.o.chain.rpcUrl).join(`<${this.o.chain.name} rpc>`);
  }

  /** The hash of the chain's block at `height` (lowercase), undefined when the node has none there. */
  private async blockHash(height: number): Promise<string | undefined> {
    const b = (await this.o.rpc.send("eth_getBlockByNumber", [hexBlock(height), false])) as {
      hash: string;
    } | null;
    return b?.hash.toLowerCase();
  }
}

/** A log's position in the chain, for sorting. */
function order(l: FetchedLog): number {
  return Number(BigInt(l.blockNumber)) * 1_000_000 + Number(BigInt(l.logIndex));
}
