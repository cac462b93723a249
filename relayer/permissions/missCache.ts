/**
 * The permission cache's memory of what the chain does not know. A key, master key or PKP the chain does
 * not know is remembered as unknown for a short, bounded time (`missTtlMs`, at most `missMaxEntries` of
 * each, least recently used first out), so a flood of unknown values costs the chain one call per
 * distinct value per TTL instead of one per request. The event that would make such a value known
 * (KeyAdded / KeyUpdated / KeyRemoved, AccountCreated, PkpCreated) drops its entry the moment it is
 * applied, so a new key works on its very next request; a miss is only remembered if no such event was
 * applied while it was looked up (`epoch`). Found PKPs are kept too: a PKP never changes once created.
 */
import { getAddress, type LogDescription } from "ethers";
import { BoundedCache } from "./boundedCache";
import type { AccountProjection, KeyRecord } from "./projection";

export type KeyLookup =
  | { status: "live"; account: AccountProjection; key: KeyRecord }
  /** `accountId` when known here (the key's account is loaded; the chain's answer does not say it). */
  | { status: "expired"; expiration: number; accountId?: number }
  | { status: "unknown" };

/** What `GET /pkps/:id` shows. */
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

export class MissCache {
  /** Usage keys the chain answered "unknown" or "expired" for, by address. */
  readonly keys: BoundedCache<string, Exclude<KeyLookup, { status: "live" }>>;
  /** Master-key addresses of no account. */
  readonly masters: BoundedCache<string, true>;
  readonly pkps: BoundedCache<string, true>;
  readonly pkpInfos = new BoundedCache<string, PkpInfo>(PKP_INFO_MAX_ENTRIES);
  /**
   * Bumped by every applied event that can turn a miss into a hit: a lookup started before the bump may
   * have read the chain before that event, so its miss is not remembered.
   */
  epoch = 0;
  /** Chain lookups of unknown values in flight: concurrent requests for one value share one call. */
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(ttlMs = DEFAULT_MISS_TTL_MS, maxEntries = DEFAULT_MISS_MAX_ENTRIES) {
    this.keys = new BoundedCache(maxEntries, ttlMs);
    this.masters = new BoundedCache(maxEntries, ttlMs);
    this.pkps = new BoundedCache(maxEntries, ttlMs);
  }

  /** Drops the remembered miss an event ends. */
  forget(ev: LogDescription): void {
    switch (ev.name) {
      case "KeyAdded":
      case "KeyUpdated":
      case "KeyRemoved":
        this.keys.delete(getAddress(ev.args.key as string));
        break;
      case "AccountCreated":
        this.masters.delete(getAddress(ev.args.masterKey as string));
        break;
      case "PkpCreated":
        this.pkps.delete((ev.args.pkpId as string).toLowerCase());
        break;
      default:
        return;
    }
    this.epoch++;
  }

  /** Forgets every miss and found PKP (a replaced block may have created or removed what they say). */
  clear(): void {
    this.keys.clear();
    this.masters.clear();
    this.pkps.clear();
    this.pkpInfos.clear();
    this.epoch++;
  }

  /**
   * Runs `lookup` once for concurrent callers asking about the same `value`. A caller that arrives after
   * an event that can end a miss was applied starts its own lookup rather than join one that may predate it.
   */
  shared<T>(value: string, lookup: () => Promise<T>): Promise<T> {
    const what = `${value}@${this.epoch}`;
    const running = this.inFlight.get(what);
    if (running) return running as Promise<T>;
    const p = lookup().finally(() => this.inFlight.delete(what));
    this.inFlight.set(what, p);
    return p;
  }
}
