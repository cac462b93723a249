/**
 * The permission cache. Per account, a projection of registry state (projection.ts) loaded on first use
 * (accountLoader.ts), kept current by the registry's events: it is a subscription of the registry-log
 * follower (relayer/chain/logs/follower.ts), which applies every event in chain order and undoes the
 * blocks a reorganisation replaces.
 *
 * Consistency: a projection always equals the chain at the follower's cursor block. Path-A writes call
 * `syncTo(receipt block)` before answering (or apply their own receipt, applyOwnTransaction), so a key
 * created by one call works on the next (read-your-writes); path-B writes are seen within one poll
 * interval. Revocation never waits on a TTL. Unknown keys, master keys and PKPs are remembered briefly
 * (missCache.ts).
 *
 * Reorganisations: the follower says from which height blocks were replaced (onRollback). The projections
 * of the accounts those blocks touched are dropped (and reloaded on demand at the new cursor), with their
 * index entries; in-flight loads are not installed; runs of those accounts stop trusting what they were
 * authorized for (`onAccountChanged`); remembered misses and found PKPs are forgotten (a replaced block
 * may have created what they say is unknown, or removed what they say exists); our own receipts applied
 * from dropped blocks are forgotten. A reset (a fork below the follower's window, a chain reset) drops
 * every projection, and they reload on demand at the head.
 */
import { getAddress, type JsonRpcProvider, type LogDescription } from "ethers";
import { parseRegistryLog } from "../chain/abi";
import {
  logKey,
  RegistryLogFollower,
  type FollowedLog,
  type FollowerOptions,
  type LogBatch,
} from "../chain/logs/follower";
import { blockTimes } from "../chain/logs/blockTimes";
import type { FetchedLog } from "../chain/logs/ranges";
import { RegistryReader, RegistryRevert } from "../chain/registryReader";
import { withRetry } from "../chain/rpc";
import { AccountLoader } from "./accountLoader";
import { LoadedAccounts } from "./loadedAccounts";
import { MissCache, type KeyLookup, type PkpInfo } from "./missCache";
import type { AccountProjection } from "./projection";

export interface CacheOptions extends FollowerOptions {
  provider: JsonRpcProvider;
  reader: RegistryReader;
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
  /** How long an unknown key, master key or PKP is remembered (default 5 s; 0 = never). */
  missTtlMs?: number;
  /** Most remembered misses of each kind (default 10,000). */
  missMaxEntries?: number;
}

export class PermissionCache {
  /** The registry-log follower this cache subscribes to (other consumers may subscribe too). */
  readonly follower: RegistryLogFollower;
  private readonly accounts: LoadedAccounts;
  private readonly loader: AccountLoader;
  private readonly misses: MissCache;
  /** Registry logs applied from our own receipts ahead of the follower (logKey); it skips them. */
  private readonly preApplied = new Set<string>();
  /** Our transactions whose events are applied (hash → block), until the follower passes their block. */
  private readonly ownApplied = new Map<string, number>();

  constructor(private readonly o: CacheOptions) {
    this.follower = new RegistryLogFollower(o);
    this.accounts = new LoadedAccounts((id) => o.onAccountChanged?.(id));
    this.loader = new AccountLoader({ ...o, accounts: this.accounts, follower: this.follower });
    this.misses = new MissCache(o.missTtlMs, o.missMaxEntries);
    this.follower.subscribe({
      onLogs: (batch) => this.onLogs(batch),
      onRollback: (fork) => this.onRollback(fork),
      onReset: () => this.onReset(),
    });
  }

  // The follower's own operations, as the rest of the relayer calls them (see RegistryLogFollower).
  readonly start = () => this.follower.start();
  readonly stop = () => this.follower.stop();
  readonly catchUpTo = (block: number) => this.follower.catchUpTo(block);
  readonly syncTo = (block: number) => this.follower.syncTo(block);
  readonly ensureSynced = () => this.follower.ensureSynced();
  /** The projection of an account, loading it on first use. */
  readonly account = (id: number) => this.loader.account(id);

  get lastProcessedBlock(): number {
    return this.follower.lastProcessedBlock;
  }

  get loadedAccounts(): number {
    return this.accounts.size;
  }

  /** For /health. */
  get lastPollOkMs(): number | null {
    return this.follower.lastPollOkMs;
  }

  /** On the prototype, unlike the operations above: the consistency bench switches it off there. */
  freshen(): Promise<void> | null {
    return this.follower.freshen();
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
    result: { txHash: string; blockNumber: number; logs: FetchedLog[] },
    transactionIndex: number | null,
  ): boolean {
    if (transactionIndex !== 0 || this.follower.lastProcessedBlock !== result.blockNumber - 1) return false;
    const events: { ev: LogDescription; acc: AccountProjection; key: string }[] = [];
    let blockHash: string | undefined;
    for (const l of result.logs) {
      if (l.address.toLowerCase() !== this.o.registry.toLowerCase()) continue;
      if (l.removed || Number(BigInt(l.blockNumber)) !== result.blockNumber) return false;
      // The block's hash is what tells the follower whether this block is still the chain's.
      if (!l.blockHash || (blockHash !== undefined && l.blockHash !== blockHash)) return false;
      blockHash = l.blockHash;
      const ev = parseRegistryLog(l.topics, l.data);
      if (ev === null) return false;
      if (ev.name === "KeyAdded" || ev.name === "AccountCreated") return false;
      const acc = this.accounts.get(Number(ev.args[0]));
      if (acc === undefined) return false;
      events.push({ ev, acc, key: logKey(l) });
    }
    if (blockHash === undefined) return false;
    this.follower.rememberBlock(result.blockNumber, blockHash);
    for (const { ev, acc, key } of events) {
      this.misses.forget(ev);
      this.accounts.apply(acc, ev, null);
      this.accounts.touch(result.blockNumber, acc.id);
      this.preApplied.add(key);
    }
    this.ownApplied.set(result.txHash.toLowerCase(), result.blockNumber);
    if (events.length) this.o.onApplied?.(events.length);
    // Catch the cursor up to this block in the background (off the writer's path), so that the next
    // transaction of ours finds it at its predecessor block and takes this path too.
    this.follower.syncTo(result.blockNumber).catch(() => undefined);
    return true;
  }

  /** Whether applyOwnTransaction applied this transaction (and the follower has not passed it yet). */
  isApplied(txHash: string): boolean {
    return this.ownApplied.has(txHash.toLowerCase());
  }

  /** A batch from the follower: block times first, then every event, synchronously. */
  private async onLogs(batch: LogBatch): Promise<() => void> {
    const timestamps = await this.timestampsFor(batch.logs);
    return () => {
      let applied = 0;
      for (const { ev, block, key } of batch.logs) {
        // Of every account, loaded or not: a remembered miss must not outlive the event that ends it.
        this.misses.forget(ev);
        const accountId = Number(ev.args[0]);
        // Loaded, loading or not: a replaced block must drop whatever it indexed (master keys, too).
        if (block >= batch.undoableFrom) this.accounts.touch(block, accountId);
        // Already applied from our own receipt (applyOwnTransaction).
        if (this.preApplied.delete(key)) continue;
        const ts = timestamps.get(block) ?? null;
        if (ev.name === "AccountCreated") {
          const master = ev.args.masterKey as string;
          if (BigInt(master) !== 0n) this.accounts.indexMasterKey(getAddress(master), accountId);
        }
        const acc = this.accounts.get(accountId);
        if (acc) {
          this.accounts.apply(acc, ev, ts);
          applied++;
        } else this.loader.buffer(accountId, ev, ts);
      }
      this.accounts.settle(batch.settledBelow);
      for (const [tx, block] of this.ownApplied) if (block <= batch.to) this.ownApplied.delete(tx);
      if (applied) this.o.onApplied?.(applied);
    };
  }

  private onRollback(fork: number): void {
    this.accounts.dropTouchedFrom(fork);
    this.loader.abandon();
    for (const key of [...this.preApplied])
      if (Number(key.split(":")[0]) >= fork) this.preApplied.delete(key);
    for (const [tx, block] of this.ownApplied) if (block >= fork) this.ownApplied.delete(tx);
    this.misses.clear();
    this.o.onRollback?.(fork);
  }

  private onReset(): void {
    this.preApplied.clear();
    this.ownApplied.clear();
    this.accounts.clear();
    this.loader.abandon();
    this.misses.clear();
    this.o.onReset?.();
  }

  /** Block timestamps for KeyAdded events of accounts we hold (the list shows when a key was created). */
  private timestampsFor(logs: FollowedLog[]): Promise<Map<number, number>> {
    const blocks = logs.flatMap(({ ev, block }) => {
      const id = Number(ev.args[0]);
      return ev.name === "KeyAdded" && (this.accounts.get(id) || this.loader.isLoading(id)) ? [block] : [];
    });
    return blockTimes(this.o.provider, blocks, (fn) => withRetry(fn, 1));
  }

  /** The account whose master key is `address`, or 0. */
  async accountOfMasterKey(address: string): Promise<number> {
    const hit = this.accounts.accountOfMasterKey(address);
    if (hit) return hit;
    if (this.misses.masters.get(address)) return 0;
    return this.misses.shared(`master:${address}`, async () => {
      await this.follower.ensureSynced();
      const epoch = this.misses.epoch;
      const id = Number(
        (await this.o.reader.call("accountOfMasterKey", [address], this.follower.lastProcessedBlock))[0],
      );
      if (id) this.accounts.indexMasterKey(address, id);
      else if (epoch === this.misses.epoch) this.misses.masters.set(address, true);
      return id;
    });
  }

  /** Whether a usage key is live in what the cache holds now: its account loaded, the key unexpired (no chain call). */
  holdsLiveKey(address: string, nowSeconds: number): boolean {
    const id = this.accounts.accountOfKey(address);
    const key = id === undefined ? undefined : this.accounts.get(id)?.keys.get(address);
    return key !== undefined && (key.expiration === 0 || nowSeconds < key.expiration);
  }

  /** Whether an account key's account is loaded in the cache now (no chain call to authenticate it). */
  holdsMasterKey(address: string): boolean {
    const id = this.accounts.accountOfMasterKey(address);
    return id !== undefined && this.accounts.get(id) !== undefined;
  }

  /** A usage key's state as of the cursor: live (with its account), expired, or unknown/removed. */
  async lookupKey(address: string, nowSeconds: number): Promise<KeyLookup> {
    let accountId = this.accounts.accountOfKey(address);
    if (accountId === undefined) {
      const missed = this.misses.keys.get(address);
      if (missed) return missed;
      const found = await this.misses.shared(`key:${address}`, async () => {
        await this.follower.ensureSynced();
        const epoch = this.misses.epoch;
        const classified = await this.classifyKey(address, this.follower.lastProcessedBlock);
        if (classified.status !== "live" && epoch === this.misses.epoch)
          this.misses.keys.set(address, classified);
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
      return { status: "expired", expiration: key.expiration, accountId };
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
    const hit = this.misses.pkpInfos.get(id);
    if (hit) return hit;
    if (this.misses.pkps.get(id)) return null;
    return this.misses.shared(`pkp:${id}`, () => this.readPkp(id));
  }

  private async readPkp(id: string): Promise<PkpInfo | null> {
    const epoch = this.misses.epoch;
    let info;
    try {
      // At the head, not the cursor: our own write may be applied from its receipt ahead of the cursor
      // (applyOwnTransaction), and a PKP never changes, so the newest answer is the right one. A miss read
      // at the head is still ended by its PkpCreated, which the poller can only process later.
      info = (await this.o.reader.call("getPkp", [id]))[0];
    } catch (err) {
      if (!(err instanceof RegistryRevert)) throw err;
      if (epoch === this.misses.epoch) this.misses.pkps.set(id, true);
      return null;
    }
    const found: PkpInfo = {
      id,
      accountId: Number(info.accountId),
      name: info.name as string,
      description: info.description as string,
    };
    this.misses.pkpInfos.set(id, found);
    return found;
  }
}
