/**
 * The chain side of the outbox: reads the registry's logs from its own cursor (kept in the database,
 * shared by every instance, independent of the permission cache's, keyed by chain and registry:
 * chainCursor.ts says where a new one starts), only up to `confirmations` blocks
 * below the head, and turns each log into an event plus one delivery per subscribed endpoint, all in
 * one transaction with the cursor's move. A crash mid-batch leaves the cursor where it was, and the
 * batch is scanned again: events already stored are recognised by their id and skipped.
 */
import type { JsonRpcProvider, Log } from "ethers";
import type { Logger } from "pino";
import { parseRegistryLog } from "../chain/abi";
import { blockTimes } from "../chain/logs/blockTimes";
import { nextConfirmedRange } from "../chain/logs/ranges";
import { openChainCursor, type OpenedCursor } from "./chainCursor";
import { chainEventPayload, describeLog } from "./chainEvents";
import type { Subscriber, WebhookStore } from "./store";

/** Blocks per scan: each scan's events, deliveries and cursor move are one database transaction. */
const MAX_RANGE = 2_000;

export interface ChainScannerOptions {
  provider: JsonRpcProvider;
  registry: string;
  chainId: number;
  deployBlock: number;
  confirmations: number;
  store: WebhookStore;
  logger: Logger;
}

/** The account of a registry log: every registry event's first indexed argument (topic 1). */
function accountOf(log: Log): string {
  return log.topics.length > 1 ? BigInt(log.topics[1]).toString() : "";
}

export class ChainScanner {
  /** The cursor's name once it is open (first scan); its position is read again on every scan. */
  private cursorName: string | null = null;

  constructor(private readonly o: ChainScannerOptions) {}

  /** One step: scans at most MAX_RANGE confirmed blocks; returns how many events it stored. */
  async scanOnce(): Promise<number> {
    const { provider, store } = this.o;
    const head = await provider.getBlockNumber();
    // Other instances move it too: read on every scan, never remembered. Opened on the first scan, and
    // again if the row went away (an operator resetting it), by the same rules.
    let cursor = this.cursorName === null ? undefined : await store.cursorIfAny(this.cursorName);
    if (cursor === undefined) cursor = await this.openCursor();
    const cursorName = this.cursorName!;
    const range = nextConfirmedRange(head, this.o.confirmations, cursor, MAX_RANGE);
    if (range === null) return 0;
    const [from, to] = range;
    const logs = await provider.getLogs({ address: this.o.registry, fromBlock: from, toBlock: to });
    // Only accounts that have an endpoint now: a deployment without webhooks pays one query per scan,
    // not a block read per log. An endpoint registered during this scan hears from the next one on.
    const watched = await store.accountsWithEndpoints();
    // The time of each block that has a log: the event's `created`, the same on every instance.
    const times = await blockTimes(
      provider,
      logs.filter((l) => watched.has(accountOf(l))).map((l) => l.blockNumber),
    );
    let stored = 0;
    await store.db.transaction(async (tx) => {
      const cids = new Map<string, string>();
      // Each account's subscribers, read once per batch.
      const subscribers = new Map<string, Subscriber[]>();
      for (const log of logs) {
        if (log.removed) continue;
        const ev = parseRegistryLog(log.topics, log.data);
        if (ev === null) continue;
        if (ev.name === "ActionAdded") {
          const hash = String(ev.args.cidHash).toLowerCase();
          cids.set(hash, ev.args.cid);
          await store.putCid(tx, hash, ev.args.cid);
        }
        let removedCid: string | null = null;
        if (ev.name === "ActionRemoved") {
          const hash = String(ev.args.cidHash).toLowerCase();
          removedCid = cids.get(hash) ?? (await store.cid(hash, tx));
        }
        const described = describeLog(ev, () => removedCid);
        if (described === null) continue;
        const accountId = String(ev.args[0]);
        if (!watched.has(accountId)) continue;
        let subs = subscribers.get(accountId);
        if (!subs) subscribers.set(accountId, (subs = await store.subscribers(accountId, tx)));
        const payload = chainEventPayload(
          ev,
          {
            chainId: this.o.chainId,
            blockNumber: log.blockNumber,
            blockHash: log.blockHash,
            transactionHash: log.transactionHash,
            logIndex: log.index,
            blockTimestamp: times.get(log.blockNumber)!,
          },
          described,
        );
        if (await store.addEvent(tx, accountId, payload, subs)) stored++;
      }
      await store.advanceCursor(tx, cursorName, to);
    });
    return stored;
  }

  /** Opens (creates on first use) this registry's cursor; returns its position. */
  private async openCursor(): Promise<number> {
    const opened = await openChainCursor(this.o.store, this.o);
    this.announce(opened);
    this.cursorName = opened.name;
    return opened.position;
  }

  /** One line for the operator when this instance created the registry's cursor (once per registry and database). */
  private announce(c: OpenedCursor): void {
    const where = { registry: this.o.registry, chainId: this.o.chainId, afterBlock: c.position };
    if (c.origin === "unkeyed_cursor")
      this.o.logger.info(
        where,
        "webhook events: continuing the previous (unkeyed) event cursor for this registry",
      );
    if (c.origin === "deployment_block" && c.ignoredUnkeyed === undefined)
      this.o.logger.info(
        where,
        "webhook events: new registry, announcing its events from its deployment block",
      );
    // The database served another registry before, and nothing (a migration) said where this one's news
    // starts: its history is announced, which is right for a new registry and wrong for a hand-made replay.
    if (c.ignoredUnkeyed !== undefined)
      this.o.logger.warn(
        { ...where, earlierRegistryCursor: c.ignoredUnkeyed },
        "webhook events: new registry, announcing its events from its deployment block (the event cursor of " +
          "an earlier registry is left alone); if its accounts were copied onto it by hand, see docs/webhooks.md",
      );
  }
}
