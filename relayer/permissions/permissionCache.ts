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
 * RPC hiccups: a failed poll is retried on the next tick with backoff; the cursor (checkpointed under
 * dataDir) only moves after a batch was applied. If the chain's head falls behind the cursor (a chain
 * reset), every projection is dropped and reloaded on demand.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { getAddress, type JsonRpcProvider, type LogDescription } from "ethers";
import type { Logger } from "pino";
import { parseRegistryLog } from "../chain/abi";
import { RegistryReader, RegistryRevert } from "../chain/registryReader";
import { withRetry } from "../chain/rpc";
import { replayAccount } from "./accountHistory";
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
  /** Called when the chain head fell behind the cursor (reset or reorganisation). */
  onReset?: () => void;
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
  /** For /health. */
  lastPollOkMs: number | null = null;
  lastPollError: string | null = null;

  constructor(private readonly o: CacheOptions) {
    this.checkpointFile = path.join(o.dataDir, "event-cursor.json");
    this.cursor = this.readCheckpoint() ?? o.deployBlock - 1;
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
    for (const l of result.logs) {
      if (l.address.toLowerCase() !== this.o.registry.toLowerCase()) continue;
      if (l.removed || Number(BigInt(l.blockNumber)) !== result.blockNumber) return false;
      const ev = safeParse(l);
      if (ev === null) return false;
      if (ev.name === "KeyAdded" || ev.name === "AccountCreated") return false;
      const acc = this.accounts.get(Number(ev.args[0]));
      if (acc === undefined) return false;
      events.push({ ev, acc, key: logKey(l) });
    }
    for (const { ev, acc, key } of events) {
      this.applyIndexed(acc, ev, null);
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
    const latest =
      target ??
      Number(
        BigInt(await withRetry(() => this.o.provider.send("eth_blockNumber", []) as Promise<string>, 1)),
      );
    if (latest < this.cursor) {
      this.o.logger.warn(
        { cursor: this.cursor, head: latest },
        "chain head is behind the event cursor (chain reset?): dropping the permission cache",
      );
      this.reset(latest);
      return;
    }
    while (this.cursor < latest) {
      const from = this.cursor + 1;
      const to = Math.min(latest, from + MAX_LOG_RANGE - 1);
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
        const ev = safeParse(l);
        if (ev) events.push({ ev, block: Number(BigInt(l.blockNumber)), key: logKey(l) });
      }
      const timestamps = await this.timestampsFor(events);
      let applied = 0;
      // Synchronous from here to the cursor update: no request observes a half-applied batch.
      for (const { ev, block, key } of events) {
        // Already applied from our own receipt (applyOwnTransaction).
        if (this.preApplied.delete(key)) continue;
        const accountId = Number(ev.args[0]);
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
      this.cursor = to;
      for (const [tx, block] of this.ownApplied) if (block <= to) this.ownApplied.delete(tx);
      if (applied) this.o.onApplied?.(applied);
    }
    this.synced = true;
    this.lastPollOkMs = Date.now();
    this.lastPollError = null;
    this.writeCheckpoint(false);
  }

  private applyIndexed(acc: AccountProjection, ev: LogDescription, ts: number | null): void {
    const change = applyEvent(acc, ev, ts);
    if (change.keyAdded) this.keyIndex.set(change.keyAdded, acc.id);
    if (change.keyRemoved) this.keyIndex.delete(change.keyRemoved);
    this.o.onAccountChanged?.(acc.id);
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

  private reset(head: number): void {
    this.preApplied.clear();
    this.ownApplied.clear();
    this.accounts.clear();
    this.keyIndex.clear();
    this.masterIndex.clear();
    this.cursor = head;
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
    const promise = this.load(id, at).then(
      (acc) => {
        for (const { ev, ts } of buffer) applyEvent(acc, ev, ts);
        this.accounts.set(id, acc);
        for (const k of acc.keys.keys()) this.keyIndex.set(k, id);
        if (acc.masterKey) this.masterIndex.set(acc.masterKey, id);
        this.loading.delete(id);
        return acc;
      },
      (err) => {
        this.loading.delete(id);
        throw err;
      },
    );
    this.loading.set(id, { promise, buffer });
    return promise;
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
    await this.ensureSynced();
    const id = Number((await this.o.reader.call("accountOfMasterKey", [address], this.cursor))[0]);
    if (id) this.masterIndex.set(address, id);
    return id;
  }

  /** A usage key's state as of the cursor: live (with its account), expired, or unknown/removed. */
  async lookupKey(address: string, nowSeconds: number): Promise<KeyLookup> {
    let accountId = this.keyIndex.get(address);
    if (accountId === undefined) {
      await this.ensureSynced();
      try {
        accountId = Number((await this.o.reader.call("getKey", [address], this.cursor))[0].accountId);
      } catch (err) {
        if (err instanceof RegistryRevert && err.decoded?.name === "KeyExpired")
          return { status: "expired", expiration: Number(err.decoded.args[1]) };
        if (err instanceof RegistryRevert) return { status: "unknown" };
        throw err;
      }
    }
    const account = await this.account(accountId);
    const key = account.keys.get(address);
    if (!key) return { status: "unknown" };
    // Same rule as the registry: expired from the second `expiration` on.
    if (key.expiration !== 0 && nowSeconds >= key.expiration)
      return { status: "expired", expiration: key.expiration };
    return { status: "live", account, key };
  }

  private readCheckpoint(): number | undefined {
    try {
      const c = JSON.parse(fs.readFileSync(this.checkpointFile, "utf8")) as {
        chainId: number;
        registry: string;
        block: number;
      };
      if (c.chainId !== this.o.chainId || c.registry.toLowerCase() !== this.o.registry.toLowerCase())
        return undefined;
      if (!Number.isSafeInteger(c.block) || c.block < this.o.deployBlock - 1) return undefined;
      return c.block;
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
        JSON.stringify({ chainId: this.o.chainId, registry: this.o.registry, block: this.cursor }),
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
  logIndex: string;
  removed?: boolean;
}

function hex(n: number): string {
  return "0x" + n.toString(16);
}

/** A log's identity within the chain: its block and its index in the block. */
function logKey(l: RawLog): string {
  return `${Number(BigInt(l.blockNumber))}:${Number(BigInt(l.logIndex))}`;
}

function safeParse(l: RawLog): LogDescription | null {
  return parseRegistryLog(l.topics, l.data);
}
