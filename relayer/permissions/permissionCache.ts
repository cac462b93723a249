/**
 * The permission cache. Per account, a projection of registry state loaded on first use (the account's
 * header from the `getAccount` view, everything else by replaying the account's events, see
 * accountHistory.ts), kept current by the registry's events: a poller reads eth_getLogs from the last
 * processed block (the cursor) and applies every event in chain order.
 *
 * Consistency: an account is loaded *at the cursor block* (view and replay both end there), and events of later blocks that
 * the poller processes while the load is running are buffered and applied after it, so a projection
 * always equals the chain at the cursor. Path-A writes call `syncTo(receipt block)` before answering,
 * so a key created by one call works on the next (read-your-writes); path-B writes are seen within one
 * poll interval. Revocation never waits on a TTL.
 *
 * Misses: a key, master key or PKP the chain does not know is remembered as unknown for a short, bounded
 * time (`missTtlMs`, at most `missMaxEntries` of each, least recently used first out), so a flood of
 * unknown values costs the chain one call per distinct value per TTL instead of one per request. The
 * event that would make such a value known (KeyAdded / KeyUpdated / KeyRemoved, AccountCreated,
 * PkpCreated) drops its entry the moment the poller or our own receipt shows it, so a new key works on
 * its very next request; a miss is only remembered if no such event was applied while it was looked up.
 *
 * RPC hiccups: a failed poll is retried on the next tick with backoff; the cursor (checkpointed under
 * dataDir) only moves after a batch was applied.
 *
 * Reorganisations (`confirmations`, SIGIL_CONFIRMATIONS, default 0): the cache always applies blocks as
 * soon as they are the chain's head (read-your-writes needs that); the confirmation depth says how deep a
 * reorganisation it undoes exactly. It remembers the hash of each of the last `depth + 1` processed
 * blocks (at least 2: depth 0 means "only the latest block can be replaced") and the accounts each one
 * touched (blockWindow.ts). Every poll reads the head block (one eth_getBlockByNumber, instead of
 * eth_blockNumber) and checks it links to what was processed (same hash, or its parent's, or the hash at
 * the newest processed height); only when that fails does it read the hash at each remembered height
 * (concurrently) to find the fork point. Then: the cursor returns to the block before the fork point; the
 * projections of the accounts the replaced blocks touched are dropped (and reloaded on demand at the new
 * cursor), with their index entries; in-flight loads are not installed; runs of those accounts stop
 * trusting what they were authorized for (`onAccountChanged`); remembered misses and found PKPs are
 * forgotten (a replaced block may have created what they say is unknown, or removed what they say
 * exists); our own receipts applied from dropped blocks are forgotten; the checkpoint is rewritten at once
 * with the new cursor and hashes. Then the poll goes on from there, so events the new blocks carry (the
 * same revocation re-mined, or none) are applied exactly once. A fork below the remembered window, or a
 * head below the cursor with no remembered hash to compare, drops every projection (logged as an error)
 * and they reload on demand at the head. Logs of remembered heights must come from the block whose hash
 * was read for that height, or the poll stops and the next one starts over.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { getAddress, type JsonRpcProvider, type LogDescription } from "ethers";
import type { Logger } from "pino";
import { parseRegistryLog } from "../chain/abi";
import { RegistryReader, RegistryRevert } from "../chain/registryReader";
import { chainUnavailable, withRetry } from "../chain/rpc";
import { ApiError } from "../errors";
import { replayAccount } from "./accountHistory";
import { BlockWindow } from "./blockWindow";
import { BoundedCache } from "./boundedCache";
import { accountFromStruct, applyEvent, type AccountProjection, type KeyRecord } from "./projection";

const MAX_LOG_RANGE = 5_000;

interface PendingEvent {
  ev: LogDescription;
  ts: number | null;
}

export type KeyLookup =
  | { status: "live"; account: AccountProjection; key: KeyRecord }
  | { status: "expired"; expiration: number }
  | { status: "unknown" };

/** What `GET /pkps/:id` shows: PKPs never change once created, so a found one is kept (bounded). */
export interface PkpInfo {
  id: string;
  accountId: number;
  name: string;
  description: string;
}

/** Defaults of CacheOptions.missTtlMs / missMaxEntries. */
export const DEFAULT_MISS_TTL_MS = 5_000;
export const DEFAULT_MISS_MAX_ENTRIES = 10_000;
const PKP_INFO_MAX_ENTRIES = 10_000;

export interface CacheOptions {
  provider: JsonRpcProvider;
  reader: RegistryReader;
  registry: string;
  chainId: number;
  deployBlock: number;
  dataDir: string;
  pollIntervalMs: number;
  logger: Logger;
  onApplied?: (events: number) => void;
  /**
   * Called synchronously whenever an event is applied to a loaded account, before any request can see
   * the change: in-flight executions of that account must stop trusting what was authorized when they
   * started (ActionExecutor.invalidateRunKeys).
   */
  onAccountChanged?: (accountId: number) => void;
  /** Called when every projection was dropped (the chain was reset, or reorganised below the window). */
  onReset?: () => void;
  /**
   * Called after a reorganisation within the window was rolled back to `fork` (the first replaced
   * height): transactions of ours in dropped blocks are gone, so cached gas-wallet nonces are wrong.
   */
  onRollback?: (fork: number) => void;
  /** Reorganisation depth handled exactly (see "Reorganisations" above); default 0. */
  confirmations?: number;
  /**
   * The newest block a write through any instance landed in (the cross-instance high-water mark,
   * relayer/cluster): `freshen` catches up to it before a request is authorized. Absent: no such check.
   */
  sharedMark?: { read(): Promise<number> };
  /** How long an unknown key, master key or PKP is remembered (default 5 s; 0 = never). */
  missTtlMs?: number;
  /** Most remembered misses of each kind (default 10,000). */
  missMaxEntries?: number;
}

export class PermissionCache {
  private cursor: number;
  private readonly accounts = new Map<number, AccountProjection>();
  private readonly loading = new Map<
    number,
    { promise: Promise<AccountProjection>; buffer: PendingEvent[] }
  >();
  private readonly keyIndex = new Map<string, number>();
  private readonly masterIndex = new Map<string, number>();
  /** Usage keys the chain answered "unknown" or "expired" for, by address (see "Misses" above). */
  private readonly keyMisses: BoundedCache<string, Exclude<KeyLookup, { status: "live" }>>;
  /** Master-key addresses of no account. */
  private readonly masterMisses: BoundedCache<string, true>;
  private readonly pkpMisses: BoundedCache<string, true>;
  private readonly pkpInfos = new BoundedCache<string, PkpInfo>(PKP_INFO_MAX_ENTRIES);
  /**
   * Bumped by every applied event that can turn a miss into a hit: a lookup started before the bump may
   * have read the chain before that event, so its miss is not remembered.
   */
  private missEpoch = 0;
  /** Chain lookups of unknown values in flight: concurrent requests for one value share one call. */
  private readonly inFlight = new Map<string, Promise<unknown>>();
  private polling: Promise<void> | null = null;
  /** Registry logs applied from our own receipts ahead of the poller ("block:logIndex"); it skips them. */
  private readonly preApplied = new Set<string>();
  /** Our transactions whose events are applied (hash → block), until the poller passes their block. */
  private readonly ownApplied = new Map<string, number>();
  private wanted = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private failures = 0;
  private synced = false;
  private lastCheckpointMs = 0;
  private readonly checkpointFile: string;
  /** Hashes and touched accounts of the last processed heights (reorganisation detection). */
  private readonly window: BlockWindow;
  /** For /health. */
  lastPollOkMs: number | null = null;
  lastPollError: string | null = null;

  constructor(private readonly o: CacheOptions) {
    const ttl = o.missTtlMs ?? DEFAULT_MISS_TTL_MS;
    const max = o.missMaxEntries ?? DEFAULT_MISS_MAX_ENTRIES;
    this.keyMisses = new BoundedCache(max, ttl);
    this.masterMisses = new BoundedCache(max, ttl);
    this.pkpMisses = new BoundedCache(max, ttl);
    this.checkpointFile = path.join(o.dataDir, "event-cursor.json");
    this.window = new BlockWindow(Math.max(1, Math.floor(o.confirmations ?? 0)) + 1);
    const saved = this.readCheckpoint();
    this.cursor = saved?.block ?? o.deployBlock - 1;
    if (saved) this.window.restore(saved.hashes);
  }

  /**
   * Cross-instance read-your-writes: if a write through another instance landed in a block this cache
   * has not processed yet, catch up to it first. Null (nothing to wait for) without a shared mark, so
   * the single-instance path costs no promise.
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

  get lastProcessedBlock(): number {
    return this.cursor;
  }

  get loadedAccounts(): number {
    return this.accounts.size;
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
        this.lastPollError = err instanceof Error ? err.message : String(err);
        if (this.failures === 1 || this.failures % 20 === 0)
          this.o.logger.warn({ failures: this.failures, err: this.lastPollError }, "event poll failed");
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
   * Read-your-writes without a log query: applies the registry events of one of our own path-A
   * transactions straight from its receipt, when that is exactly what the poller would do next:
   *  - the cursor is at the block before, so every earlier event is applied;
   *  - the transaction is the first of its block, so no event of this block comes before its own (the
   *    poller applies the block's later transactions after them, skipping these);
   *  - every event concerns an account held in memory, and none needs more than the log (KeyAdded needs
   *    the block's time, AccountCreated the master-key index): otherwise nothing is applied.
   * All or nothing, synchronously. The writer then skips syncTo (isApplied); otherwise it calls it.
   */
  applyOwnTransaction(
    result: { txHash: string; blockNumber: number; logs: RawLog[] },
    transactionIndex: number | null,
  ): boolean {
    if (transactionIndex !== 0 || this.cursor !== result.blockNumber - 1) return false;
    const events: { ev: LogDescription; acc: AccountProjection; key: string }[] = [];
    let blockHash: string | undefined;
    for (const l of result.logs) {
      if (l.address.toLowerCase() !== this.o.registry.toLowerCase()) continue;
      if (l.removed || Number(BigInt(l.blockNumber)) !== result.blockNumber) return false;
      // The block's hash is what tells the poller whether this block is still the chain's.
      if (!l.blockHash || (blockHash !== undefined && l.blockHash !== blockHash)) return false;
      blockHash = l.blockHash;
      const ev = safeParse(l);
      if (ev === null) return false;
      if (ev.name === "KeyAdded" || ev.name === "AccountCreated") return false;
      const acc = this.accounts.get(Number(ev.args[0]));
      if (acc === undefined) return false;
      events.push({ ev, acc, key: logKey(l) });
    }
    if (blockHash === undefined) return false;
    this.window.record(result.blockNumber, blockHash);
    for (const { ev, acc, key } of events) {
      this.forgetMisses(ev);
      this.applyIndexed(acc, ev, null);
      this.window.touch(result.blockNumber, acc.id);
      this.preApplied.add(key);
    }
    this.ownApplied.set(result.txHash.toLowerCase(), result.blockNumber);
    if (events.length) this.o.onApplied?.(events.length);
    // Catch the cursor up to this block in the background (off the writer's path), so that the next
    // transaction of ours finds it at its predecessor block and takes this path too.
    this.syncTo(result.blockNumber).catch(() => undefined);
    return true;
  }

  /** Whether applyOwnTransaction applied this transaction (and the poller has not passed it yet). */
  isApplied(txHash: string): boolean {
    return this.ownApplied.has(txHash.toLowerCase());
  }

  /** Resolves once the cursor has reached `block` (polling now if needed). Throws 503 if the chain is down. */
  async syncTo(block: number): Promise<void> {
    while (this.cursor < block) {
      this.wanted = Math.max(this.wanted, block);
      await this.poll(this.wanted);
    }
  }

  /** Before the first successful catch-up, projections would be loaded at a stale block: catch up first. */
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
    const latest = head.number;
    if (latest < this.cursor) {
      this.o.logger.error(
        { cursor: this.cursor, head: latest },
        "chain head is behind the event cursor (chain reset?): dropping the permission cache",
      );
      this.reset(head);
      return;
    }
    while (this.cursor < latest) {
      const from = this.cursor + 1;
      const to = Math.min(latest, from + MAX_LOG_RANGE - 1);
      // The heights of this range that the window remembers once processed (and any block of ours
      // applied from its receipt ahead of the poller): their hashes are read first, and every log of
      // them must come from exactly that block.
      const lowest = Math.max(from, latest - this.window.size + 1);
      const heights = new Set<number>();
      for (let h = lowest; h <= to; h++) heights.add(h);
      for (const h of this.window.heights) if (h >= from && h <= to) heights.add(h);
      const headers = await this.headers([...heights], head);
      for (const [h, hdr] of headers) {
        const ours = this.window.hashAt(h);
        // A block of ours, applied from its receipt, that the chain replaced before the poller got here.
        if (ours !== undefined && ours !== hdr.hash) this.rollback(h);
      }
      const logs = (await withRetry(
        () =>
          this.o.provider.send("eth_getLogs", [
            { address: this.o.registry, fromBlock: hex(from), toBlock: hex(to) },
          ]) as Promise<RawLog[]>,
        1,
      )) as RawLog[];
      const events: { ev: LogDescription; block: number; key: string }[] = [];
      for (const l of logs) {
        if (l.removed) continue;
        const block = Number(BigInt(l.blockNumber));
        const expected = headers.get(block)?.hash;
        // The chain reorganised between reading the hashes and the logs: start over on the next poll.
        if (expected !== undefined && l.blockHash?.toLowerCase() !== expected) return;
        const ev = safeParse(l);
        if (ev) events.push({ ev, block, key: logKey(l) });
      }
      const timestamps = await this.timestampsFor(events);
      let applied = 0;
      // Synchronous from here to the cursor update: no request observes a half-applied batch.
      for (const { ev, block, key } of events) {
        // Of every account, loaded or not: a remembered miss must not outlive the event that ends it.
        this.forgetMisses(ev);
        const accountId = Number(ev.args[0]);
        // Loaded, loading or not: a replaced block must drop whatever it indexed (master keys, too).
        if (block >= lowest) this.window.touch(block, accountId);
        // Already applied from our own receipt (applyOwnTransaction).
        if (this.preApplied.delete(key)) continue;
        const ts = timestamps.get(block) ?? null;
        if (ev.name === "AccountCreated") {
          const master = ev.args.masterKey as string;
          if (BigInt(master) !== 0n) this.masterIndex.set(getAddress(master), accountId);
        }
        const acc = this.accounts.get(accountId);
        if (acc) {
          this.applyIndexed(acc, ev, ts);
          applied++;
          continue;
        }
        this.loading.get(accountId)?.buffer.push({ ev, ts });
      }
      for (const [h, hdr] of headers) this.window.record(h, hdr.hash);
      this.cursor = to;
      this.window.prune(to);
      for (const [tx, block] of this.ownApplied) if (block <= to) this.ownApplied.delete(tx);
      if (applied) this.o.onApplied?.(applied);
    }
    this.synced = true;
    this.lastPollOkMs = Date.now();
    this.lastPollError = null;
    this.writeCheckpoint(false);
  }

  /**
   * Whether blocks the cache processed were replaced, and if so, undo them (rollback) or everything
   * (reset). The cheap check first: the head links to the newest remembered block.
   */
  private async detectReorganisation(head: BlockHeader): Promise<void> {
    const top = this.window.top;
    if (top === null) return;
    let linked: string | undefined;
    if (head.number === top) linked = head.hash;
    else if (head.number === top + 1) linked = head.parentHash;
    else if (head.number > top + 1) linked = (await this.header(top))?.hash;
    if (linked !== undefined && linked === this.window.hashAt(top)) return;
    const remembered = this.window.heights.filter((h) => h <= head.number);
    const found = await this.headers(remembered, head);
    const canonical = new Map<number, string | undefined>();
    for (const h of this.window.heights) canonical.set(h, found.get(h)?.hash);
    const fork = this.window.forkPoint(canonical);
    if (fork === null) return;
    if (fork === "deep") {
      this.o.logger.error(
        { cursor: this.cursor, head: head.number, window: this.window.size },
        "chain reorganisation deeper than the confirmation depth: dropping the permission cache",
      );
      this.reset(head);
      return;
    }
    this.rollback(fork);
  }

  /**
   * Undoes every processed block from `fork` on (see "Reorganisations" above). Synchronous: no request
   * sees a half-rolled-back cache.
   */
  private rollback(fork: number): void {
    const before = this.cursor;
    const accounts = this.window.dropFrom(fork);
    for (const id of accounts) this.forgetAccount(id);
    // Loads in flight read views and logs at a block that may have been replaced: never installed.
    this.loading.clear();
    for (const key of [...this.preApplied])
      if (Number(key.split(":")[0]) >= fork) this.preApplied.delete(key);
    for (const [tx, block] of this.ownApplied) if (block >= fork) this.ownApplied.delete(tx);
    this.clearMisses();
    this.cursor = Math.min(this.cursor, fork - 1);
    this.writeCheckpoint(true);
    this.o.logger.warn(
      { fork, cursor: before, rolledBackTo: this.cursor, accounts: accounts.size },
      "chain reorganisation: permission cache rolled back to the fork point",
    );
    this.o.onRollback?.(fork);
  }

  /** Drops an account's projection and every index entry pointing at it; its runs stop trusting it. */
  private forgetAccount(id: number): void {
    this.accounts.delete(id);
    for (const [k, a] of this.keyIndex) if (a === id) this.keyIndex.delete(k);
    for (const [k, a] of this.masterIndex) if (a === id) this.masterIndex.delete(k);
    this.o.onAccountChanged?.(id);
  }

  private async header(tag: number | "latest"): Promise<BlockHeader | null> {
    const b = (await withRetry(
      () =>
        this.o.provider.send("eth_getBlockByNumber", [
          typeof tag === "number" ? hex(tag) : tag,
          false,
        ]) as Promise<RawHeader | null>,
      1,
    )) as RawHeader | null;
    if (!b) return null;
    return {
      number: Number(BigInt(b.number)),
      hash: b.hash.toLowerCase(),
      parentHash: b.parentHash.toLowerCase(),
    };
  }

  /** Headers at several heights, read concurrently (`known` is reused); a missing one is a 503. */
  private async headers(heights: number[], known: BlockHeader): Promise<Map<number, BlockHeader>> {
    const got = await Promise.all(heights.map((h) => (h === known.number ? known : this.header(h))));
    const out = new Map<number, BlockHeader>();
    heights.forEach((h, i) => {
      const hdr = got[i];
      if (hdr) out.set(h, hdr);
    });
    return out;
  }

  private applyIndexed(acc: AccountProjection, ev: LogDescription, ts: number | null): void {
    const change = applyEvent(acc, ev, ts);
    if (change.keyAdded) this.keyIndex.set(change.keyAdded, acc.id);
    if (change.keyRemoved) this.keyIndex.delete(change.keyRemoved);
    this.o.onAccountChanged?.(acc.id);
  }

  /** Drops the remembered miss an event ends (see "Misses" above). */
  private forgetMisses(ev: LogDescription): void {
    switch (ev.name) {
      case "KeyAdded":
      case "KeyUpdated":
      case "KeyRemoved":
        this.keyMisses.delete(getAddress(ev.args.key as string));
        break;
      case "AccountCreated":
        this.masterMisses.delete(getAddress(ev.args.masterKey as string));
        break;
      case "PkpCreated":
        this.pkpMisses.delete((ev.args.pkpId as string).toLowerCase());
        break;
      default:
        return;
    }
    this.missEpoch++;
  }

  private clearMisses(): void {
    this.keyMisses.clear();
    this.masterMisses.clear();
    this.pkpMisses.clear();
    this.pkpInfos.clear();
    this.missEpoch++;
  }

  /** Block timestamps for KeyAdded events of accounts we hold (the list shows when a key was created). */
  private async timestampsFor(events: { ev: LogDescription; block: number }[]): Promise<Map<number, number>> {
    const blocks = new Set<number>();
    for (const { ev, block } of events) {
      const id = Number(ev.args[0]);
      if (ev.name === "KeyAdded" && (this.accounts.has(id) || this.loading.has(id))) blocks.add(block);
    }
    const out = new Map<number, number>();
    for (const b of blocks) {
      const blk = (await withRetry(
        () => this.o.provider.send("eth_getBlockByNumber", [hex(b), false]) as Promise<{ timestamp: string }>,
        1,
      )) as {
        timestamp: string;
      };
      out.set(b, Number(BigInt(blk.timestamp)));
    }
    return out;
  }

  private reset(head: BlockHeader): void {
    this.preApplied.clear();
    this.ownApplied.clear();
    this.accounts.clear();
    this.loading.clear();
    this.keyIndex.clear();
    this.masterIndex.clear();
    this.clearMisses();
    this.window.clear();
    this.window.record(head.number, head.hash);
    this.cursor = head.number;
    this.writeCheckpoint(true);
    this.o.onReset?.();
  }

  /** The projection of an account, loading it on first use. */
  async account(id: number): Promise<AccountProjection> {
    const have = this.accounts.get(id);
    if (have) return have;
    const inFlight = this.loading.get(id);
    if (inFlight) return inFlight.promise;
    await this.ensureSynced();
    const again = this.accounts.get(id);
    if (again) return again;
    const already = this.loading.get(id);
    if (already) return already.promise;
    const buffer: PendingEvent[] = [];
    const at = this.cursor; // read in the same tick as registering the buffer: every later event is buffered
    const entry = { promise: null as unknown as Promise<AccountProjection>, buffer };
    entry.promise = this.load(id, at).then(
      (acc) => {
        for (const { ev, ts } of buffer) applyEvent(acc, ev, ts);
        // A reorganisation or reset while loading dropped this load: answer this caller, keep nothing.
        if (this.loading.get(id) !== entry) return acc;
        this.accounts.set(id, acc);
        for (const k of acc.keys.keys()) this.keyIndex.set(k, id);
        if (acc.masterKey) this.masterIndex.set(acc.masterKey, id);
        this.loading.delete(id);
        return acc;
      },
      (err) => {
        if (this.loading.get(id) === entry) this.loading.delete(id);
        throw err;
      },
    );
    this.loading.set(id, entry);
    return entry.promise;
  }

  /**
   * The account at block `at`: its header from the view, its keys, PKPs and groups (names, CID strings,
   * members) by replaying its events from the registry's deployment block to `at`.
   */
  private async load(id: number, at: number): Promise<AccountProjection> {
    const head = accountFromStruct((await this.o.reader.call("getAccount", [id], at))[0]);
    const acc: AccountProjection = { ...head, keys: new Map(), groups: new Map(), pkps: new Map() };
    await replayAccount(this.o.provider, this.o.registry, acc, this.o.deployBlock, at, {
      maxRange: MAX_LOG_RANGE,
      retry: (fn) => withRetry(fn, 1),
    });
    // The replay re-applies AccountCreated and ownership events: the view at `at` is the header's truth.
    Object.assign(acc, head);
    return acc;
  }

  /** The account whose master key is `address`, or 0. */
  async accountOfMasterKey(address: string): Promise<number> {
    const hit = this.masterIndex.get(address);
    if (hit) return hit;
    if (this.masterMisses.get(address)) return 0;
    return this.shared(`master:${address}`, async () => {
      await this.ensureSynced();
      const epoch = this.missEpoch;
      const id = Number((await this.o.reader.call("accountOfMasterKey", [address], this.cursor))[0]);
      if (id) this.masterIndex.set(address, id);
      else if (epoch === this.missEpoch) this.masterMisses.set(address, true);
      return id;
    });
  }

  /** A usage key's state as of the cursor: live (with its account), expired, or unknown/removed. */
  async lookupKey(address: string, nowSeconds: number): Promise<KeyLookup> {
    let accountId = this.keyIndex.get(address);
    if (accountId === undefined) {
      const missed = this.keyMisses.get(address);
      if (missed) return missed;
      const found = await this.shared(`key:${address}`, async () => {
        await this.ensureSynced();
        const epoch = this.missEpoch;
        const classified = await this.classifyKey(address, this.cursor);
        if (classified.status !== "live" && epoch === this.missEpoch) this.keyMisses.set(address, classified);
        return classified;
      });
      if (found.status !== "live") return found;
      accountId = found.accountId;
    }
    const account = await this.account(accountId);
    const key = account.keys.get(address);
    if (!key) return { status: "unknown" };
    // Same rule as the registry: expired from the second `expiration` on.
    if (key.expiration !== 0 && nowSeconds >= key.expiration)
      return { status: "expired", expiration: key.expiration };
    return { status: "live", account, key };
  }

  /**
   * One chain call that tells a live key (and its account) from an expired one (and its expiration) from
   * an unknown or removed one. The registry's views cannot: they treat an expired key as absent (`getKey`
   * reverts UnknownKey, `accountOfKey` is 0). Its write authorization can: an owner-only write simulated
   * from the key's address (eth_call, nothing is sent) reverts KeyExpired(key, expiration) for an expired
   * key, NoAccount for an unknown or removed one, and NotOwner(key, accountId) for a live key.
   */
  private async classifyKey(
    address: string,
    block: number,
  ): Promise<{ status: "live"; accountId: number } | Exclude<KeyLookup, { status: "live" }>> {
    try {
      await this.o.reader.call("cancelOwnershipTransfer", [], block, address);
    } catch (err) {
      if (!(err instanceof RegistryRevert)) throw err;
      const d = err.decoded;
      if (d?.name === "NotOwner") return { status: "live", accountId: Number(d.args[1]) };
      if (d?.name === "KeyExpired") return { status: "expired", expiration: Number(d.args[1]) };
      return { status: "unknown" };
    }
    // Not refused: the address is an account's owner, not a usage key.
    return { status: "unknown" };
  }

  /**
   * A PKP by id (any account's: public data), or null. Found PKPs are kept (they never change); unknown
   * ids are remembered like unknown keys.
   */
  async pkp(id: string): Promise<PkpInfo | null> {
    const hit = this.pkpInfos.get(id);
    if (hit) return hit;
    if (this.pkpMisses.get(id)) return null;
    return this.shared(`pkp:${id}`, () => this.readPkp(id));
  }

  private async readPkp(id: string): Promise<PkpInfo | null> {
    const epoch = this.missEpoch;
    let info;
    try {
      // At the head, not the cursor: our own write may be applied from its receipt ahead of the cursor
      // (applyOwnTransaction), and a PKP never changes, so the newest answer is the right one. A miss read
      // at the head is still ended by its PkpCreated, which the poller can only process later.
      info = (await this.o.reader.call("getPkp", [id]))[0];
    } catch (err) {
      if (!(err instanceof RegistryRevert)) throw err;
      if (epoch === this.missEpoch) this.pkpMisses.set(id, true);
      return null;
    }
    const found: PkpInfo = {
      id,
      accountId: Number(info.accountId),
      name: info.name as string,
      description: info.description as string,
    };
    this.pkpInfos.set(id, found);
    return found;
  }

  /**
   * Runs `lookup` once for concurrent callers asking about the same `what`. A caller that arrives after an
   * event that can end a miss was applied starts its own lookup rather than join one that may predate it.
   */
  private shared<T>(value: string, lookup: () => Promise<T>): Promise<T> {
    const what = `${value}@${this.missEpoch}`;
    const running = this.inFlight.get(what);
    if (running) return running as Promise<T>;
    const p = lookup().finally(() => this.inFlight.delete(what));
    this.inFlight.set(what, p);
    return p;
  }

  private readCheckpoint(): { block: number; hashes: unknown } | undefined {
    try {
      const c = JSON.parse(fs.readFileSync(this.checkpointFile, "utf8")) as {
        chainId: number;
        registry: string;
        block: number;
        hashes?: unknown;
      };
      if (c.chainId !== this.o.chainId || c.registry.toLowerCase() !== this.o.registry.toLowerCase())
        return undefined;
      if (!Number.isSafeInteger(c.block) || c.block < this.o.deployBlock - 1) return undefined;
      return { block: c.block, hashes: c.hashes ?? null };
    } catch {
      return undefined;
    }
  }

  /** Atomic (write then rename), at most once a second unless forced. */
  private writeCheckpoint(force: boolean): void {
    const now = Date.now();
    if (!force && now - this.lastCheckpointMs < 1_000) return;
    this.lastCheckpointMs = now;
    const tmp = `${this.checkpointFile}.tmp`;
    try {
      fs.writeFileSync(
        tmp,
        JSON.stringify({
          chainId: this.o.chainId,
          registry: this.o.registry,
          block: this.cursor,
          // The processed blocks' hashes: a restart after a reorganisation (or during one) still detects it.
          hashes: this.window.snapshot(this.cursor),
        }),
      );
      fs.renameSync(tmp, this.checkpointFile);
    } catch (err) {
      this.o.logger.warn({ err: (err as Error).message }, "could not write the event-cursor checkpoint");
    }
  }
}

interface RawLog {
  address: string;
  topics: string[];
  data: string;
  blockNumber: string;
  blockHash?: string;
  logIndex: string;
  removed?: boolean;
}

interface RawHeader {
  number: string;
  hash: string;
  parentHash: string;
}

interface BlockHeader {
  number: number;
  hash: string;
  parentHash: string;
}

function hex(n: number): string {
  return "0x" + n.toString(16);
}

/**
 * A log's identity within the chain: its block, its index in the block, and the block's hash (the same
 * transaction re-mined in a replacing block is another log).
 */
function logKey(l: RawLog): string {
  return `${Number(BigInt(l.blockNumber))}:${Number(BigInt(l.logIndex))}:${(l.blockHash ?? "").toLowerCase()}`;
}

function safeParse(l: RawLog): LogDescription | null {
  return parseRegistryLog(l.topics, l.data);
}
