/**
 * The projections the permission cache holds (projection.ts), with the indexes from a usage key or
 * master key to its account, and for the heights a reorganisation can still replace, which accounts
 * their events touched: the projections to drop when those blocks are rolled back.
 */
import type { LogDescription } from "ethers";
import { applyEvent, type AccountProjection } from "./projection";

export class LoadedAccounts {
  private readonly accounts = new Map<number, AccountProjection>();
  private readonly keyIndex = new Map<string, number>();
  private readonly masterIndex = new Map<string, number>();
  /** height → ids of the accounts whose events of that height were applied (or buffered, or indexed). */
  private readonly touched = new Map<number, Set<number>>();

  /** @param onChanged called synchronously whenever an account's projection changes or is dropped. */
  constructor(private readonly onChanged: (accountId: number) => void) {}

  get size(): number {
    return this.accounts.size;
  }

  get(id: number): AccountProjection | undefined {
    return this.accounts.get(id);
  }

  /** A freshly loaded account, with its keys and master key indexed. */
  install(acc: AccountProjection): void {
    this.accounts.set(acc.id, acc);
    for (const k of acc.keys.keys()) this.keyIndex.set(k, acc.id);
    if (acc.masterKey) this.masterIndex.set(acc.masterKey, acc.id);
  }

  accountOfKey(address: string): number | undefined {
    return this.keyIndex.get(address);
  }

  accountOfMasterKey(address: string): number | undefined {
    return this.masterIndex.get(address);
  }

  indexMasterKey(address: string, accountId: number): void {
    this.masterIndex.set(address, accountId);
  }

  /** Applies an event to a loaded account and keeps the key index current. */
  apply(acc: AccountProjection, ev: LogDescription, ts: number | null): void {
    const change = applyEvent(acc, ev, ts);
    if (change.keyAdded) this.keyIndex.set(change.keyAdded, acc.id);
    if (change.keyRemoved) this.keyIndex.delete(change.keyRemoved);
    this.onChanged(acc.id);
  }

  touch(height: number, accountId: number): void {
    let s = this.touched.get(height);
    if (s === undefined) this.touched.set(height, (s = new Set()));
    s.add(accountId);
  }

  /** Heights below `height` can no longer be replaced: forget what they touched. */
  settle(height: number): void {
    for (const h of this.touched.keys()) if (h < height) this.touched.delete(h);
  }

  /** Drops every account the heights from `fork` on touched; returns how many there were. */
  dropTouchedFrom(fork: number): number {
    const ids = new Set<number>();
    for (const [h, touched] of [...this.touched]) {
      if (h < fork) continue;
      for (const id of touched) ids.add(id);
      this.touched.delete(h);
    }
    for (const id of ids) this.forget(id);
    return ids.size;
  }

  /** Drops an account's projection and every index entry pointing at it. */
  private forget(id: number): void {
    this.accounts.delete(id);
    for (const [k, a] of this.keyIndex) if (a === id) this.keyIndex.delete(k);
    for (const [k, a] of this.masterIndex) if (a === id) this.masterIndex.delete(k);
    this.onChanged(id);
  }

  clear(): void {
    this.accounts.clear();
    this.keyIndex.clear();
    this.masterIndex.clear();
    this.touched.clear();
  }
}
