/**
 * Lazy loading of the permission cache's projections: an account is loaded on first use, *at the
 * follower's cursor block* (its header from the `getAccount` view, everything else by replaying its
 * events, see accountHistory.ts; view and replay both end there). Events of later blocks that the
 * follower hands out while the load is running are buffered and applied after it, so a projection always
 * equals the chain at the cursor. A reorganisation or reset while loading abandons the load: its caller
 * gets its answer, nothing is kept.
 */
import type { LogDescription } from "ethers";
import type { RegistryReader } from "../chain/registryReader";
import type { LogRpc } from "../chain/logs/ranges";
import { withRetry } from "../chain/rpc";
import { replayAccount } from "./accountHistory";
import type { LoadedAccounts } from "./loadedAccounts";
import { accountFromStruct, applyEvent, type AccountProjection } from "./projection";

interface Loading {
  promise: Promise<AccountProjection>;
  buffer: Array<{ ev: LogDescription; ts: number | null }>;
}

export interface LoaderOptions {
  provider: LogRpc;
  reader: RegistryReader;
  registry: string;
  deployBlock: number;
  accounts: LoadedAccounts;
  /** The follower: where loads read, and the first catch-up before any load. */
  follower: { lastProcessedBlock: number; ensureSynced(): Promise<void> };
}

export class AccountLoader {
  private readonly loading = new Map<number, Loading>();

  constructor(private readonly o: LoaderOptions) {}

  isLoading(id: number): boolean {
    return this.loading.has(id);
  }

  /** An event of an account being loaded: applied once the load has finished. */
  buffer(id: number, ev: LogDescription, ts: number | null): void {
    this.loading.get(id)?.buffer.push({ ev, ts });
  }

  /** Loads in flight read views and logs at a block that may have been replaced: none is installed. */
  abandon(): void {
    this.loading.clear();
  }

  /** The projection of an account, loading it on first use. */
  async account(id: number): Promise<AccountProjection> {
    const { accounts, follower } = this.o;
    const have = accounts.get(id) ?? this.loading.get(id)?.promise;
    if (have) return have;
    await follower.ensureSynced();
    const again = accounts.get(id) ?? this.loading.get(id)?.promise;
    if (again) return again;
    const at = follower.lastProcessedBlock; // read in the same tick as registering the buffer
    const entry: Loading = { promise: null as unknown as Promise<AccountProjection>, buffer: [] };
    entry.promise = this.load(id, at).then(
      (acc) => {
        for (const { ev, ts } of entry.buffer) applyEvent(acc, ev, ts);
        if (this.loading.get(id) !== entry) return acc;
        accounts.install(acc);
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
      retry: (fn) => withRetry(fn, 1),
    });
    // The replay re-applies AccountCreated and ownership events: the view at `at` is the header's truth.
    Object.assign(acc, head);
    return acc;
  }
}
