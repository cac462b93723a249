/**
 * The audit log as the relayer uses it (docs/audit-log.md): `record` writes an entry before the request
 * answers (one INSERT into the unchained table, store.ts), then the entry is chained behind the answer by
 * this instance's chainer; a periodic sweep chains whatever is left pending by any instance (one killed
 * after answering, say) and signs heads whose checkpoint is due by time. Nothing on the request path
 * waits for another request's entry.
 */
import type { Logger } from "pino";
import type { PendingEntry } from "./entries";
import { AuditStore, type AuditStoreOptions, type CheckpointSigner } from "./store";
import type { DataLayer } from "../db";
import type { RateLimiter } from "../rateLimit";
import type { AnchorOptions } from "./anchor";

export interface AuditOptions {
  /** Default true. False: nothing is recorded (and GET /audit answers an empty log). */
  enabled?: boolean;
  /** A signed checkpoint at least every this many entries (default 100)… */
  checkpointEvery?: number;
  /** …and at least every this many ms while entries arrive (default 300,000). */
  checkpointMs?: number;
  /** How often pending entries left by any instance are chained, in ms (default 2,000). */
  sweepMs?: number;
  /** Keep entries this many days (0 or absent: forever); older ones are pruned behind a checkpoint. */
  retentionDays?: number;
  /** Refusals recorded per account per minute (default 60); the rest are counted in the next one. */
  refusalsPerMinute?: number;
  /**
   * How long the chainer waits after a pending entry before chaining it (default
   * DEFAULT_CHAIN_AFTER_MS; 0: the next turn of the event loop, behind the answer; SQLite in a file
   * chains recorded entries as it writes them, store.ts). A longer window chains more entries per
   * transaction; the entries are written either way, so a crash within it loses nothing (the next
   * sweep chains them), and reads of the log chain what is pending first.
   */
  chainAfterMs?: number;
  /**
   * How long an entry may wait for others to share its transaction while runs are still in the
   * executor (default 4 ms; 0: never; store.ts, DEFAULT_GROUP_COMMIT_MS). With one request at a time
   * nothing waits.
   */
  groupCommitMs?: number;
  /** Anchor checkpoints on chain (anchor.ts); absent: never. */
  anchor?: AnchorOptions;
}

/**
 * The default chaining window: under load one chaining transaction per account every 100 ms instead
 * of one per few requests (the log's main cost on the request path's CPU and database; measured with
 * npm run bench:audit, docs/performance.md). Entries become visible in the chain within it; GET
 * /core/v1/audit and the export chain what is pending before they read.
 */
export const DEFAULT_CHAIN_AFTER_MS = 100;

export class AuditLog {
  readonly store: AuditStore;
  private readonly waiting = new Set<string>();
  private draining: Promise<void> | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private chainTimer: NodeJS.Timeout | null = null;
  private chainScan: (() => Promise<number>) | null = null;
  private anchorScan: (() => Promise<number>) | null = null;
  private lastPrune = 0;
  private stopped = false;
  private readonly refusalBudget = new Map<
    string,
    { windowStart: number; used: number; suppressed: number }
  >();

  constructor(
    db: DataLayer,
    signer: CheckpointSigner,
    readonly instance: string,
    private readonly opts: AuditOptions,
    private readonly logger: Logger,
    storeOpts: Pick<AuditStoreOptions, "now" | "moreSoon"> = {},
    /**
     * The refusal limit shared by every instance (a token bucket in PostgreSQL, refusalsPerMinute per
     * account): asked only for a refusal this instance's own limit admitted, so a flood costs the
     * database at most refusalsPerMinute statements per account and instance. Absent (one instance):
     * the instance's limit is the whole limit.
     */
    private readonly sharedRefusals?: RateLimiter,
  ) {
    this.store = new AuditStore(db, signer, {
      checkpointEvery: opts.checkpointEvery,
      checkpointMs: opts.checkpointMs,
      groupCommitMs: opts.groupCommitMs,
      ...storeOpts,
    });
  }

  /** Written before the answer leaves; chained with it (SQLite's writer thread) or behind it. */
  async record(entry: PendingEntry): Promise<void> {
    if (!(await this.store.enqueue(entry))) this.schedule(entry.account);
  }

  /**
   * Whether a refusal of this account may be written now (a flood of refusals must not flood the log),
   * and how many were skipped since the last one written: first this instance's budget, then the
   * cluster's (sharedRefusals), so N instances together write refusalsPerMinute per account, not N times
   * as many. Skipped refusals are counted by the instance that skipped them, in its next one written.
   */
  async admitRefusal(account: string, now = Date.now()): Promise<{ admit: boolean; suppressed: number }> {
    const limit = this.opts.refusalsPerMinute ?? 60;
    let b = this.refusalBudget.get(account);
    if (!b || now - b.windowStart >= 60_000) {
      b = { windowStart: now, used: 0, suppressed: b?.suppressed ?? 0 };
      this.refusalBudget.set(account, b);
      if (this.refusalBudget.size > 100_000) this.refusalBudget.clear();
    }
    if (b.used >= limit) {
      b.suppressed++;
      return { admit: false, suppressed: 0 };
    }
    b.used++;
    const suppressed = b.suppressed;
    b.suppressed = 0;
    if (this.sharedRefusals) {
      try {
        await this.sharedRefusals.take(account, `audit refusals of account ${account}`);
      } catch (e) {
        if ((e as { code?: unknown }).code !== "rate_limited") throw e;
        b.suppressed += suppressed + 1;
        return { admit: false, suppressed: 0 };
      }
    }
    return { admit: true, suppressed };
  }

  /** Entries written by another path (the chain follower's transaction): chained behind it like any. */
  chainSoon(accounts: Iterable<string>): void {
    for (const a of accounts) this.schedule(a);
  }

  /** Checkpoints anchored on chain on every sweep, after they are signed (anchor.ts). */
  anchorWith(anchorDue: () => Promise<number>): void {
    this.anchorScan = anchorDue;
  }

  /** Path-B writes: read from the registry's logs on every sweep (chainWrites.ts). */
  followChain(scan: () => Promise<number>): void {
    this.chainScan = scan;
  }

  private schedule(account: string): void {
    this.waiting.add(account);
    if (this.stopped) return;
    const after = this.opts.chainAfterMs ?? DEFAULT_CHAIN_AFTER_MS;
    if (after <= 0) {
      void this.kick();
      return;
    }
    this.chainTimer ??= setTimeout(() => {
      this.chainTimer = null;
      void this.kick();
    }, after);
    this.chainTimer.unref();
  }

  /**
   * Runs the chainer unless it runs already. It starts on the next turn of the event loop (setImmediate),
   * behind the answer being written, and takes every account that recorded meanwhile in one pass.
   */
  private kick(): Promise<void> {
    this.draining ??= (async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      try {
        while (this.waiting.size > 0) {
          const accounts = [...this.waiting];
          this.waiting.clear();
          for (const a of accounts) {
            try {
              await this.store.chain(a);
            } catch (err) {
              // Still pending: the sweep retries (and so does any other instance's).
              this.logger.warn({ err: (err as Error).message, account: a }, "audit: chaining failed");
            }
          }
        }
      } finally {
        this.draining = null;
      }
    })();
    return this.draining;
  }

  /** Chains everything pending (any instance's), checkpoints stale heads, prunes when retention is set. */
  async sweep(now = Date.now()): Promise<void> {
    // The chain being out of reach must not hold back the chaining of what requests recorded.
    if (this.chainScan)
      await this.chainScan().catch((err: unknown) =>
        this.logger.warn({ err: (err as Error).message }, "audit: reading path-B writes failed; retried"),
      );
    for (const a of await this.store.accountsPending()) this.waiting.add(a);
    await this.flush();
    await this.store.checkpointStale();
    if (this.anchorScan)
      await this.anchorScan().catch((err: unknown) =>
        this.logger.warn({ err: (err as Error).message }, "audit: anchoring failed; retried"),
      );
    const days = this.opts.retentionDays ?? 0;
    if (days > 0 && now - this.lastPrune >= 60 * 60_000) {
      this.lastPrune = now;
      const removed = await this.store.prune(now - days * 86_400_000);
      if (removed > 0) this.logger.info({ removed }, "audit: entries past retention pruned");
    }
  }

  /** Waits until every entry this instance recorded so far is chained. */
  async flush(): Promise<void> {
    if (this.chainTimer) clearTimeout(this.chainTimer);
    this.chainTimer = null;
    while (this.draining || this.waiting.size > 0) await this.kick();
    await this.store.settled();
  }

  start(): void {
    const every = this.opts.sweepMs ?? 2_000;
    let running = false;
    this.sweepTimer = setInterval(() => {
      if (running || this.stopped) return;
      running = true;
      this.sweep()
        .catch((err: unknown) => this.logger.warn({ err: (err as Error).message }, "audit: sweep failed"))
        .finally(() => (running = false));
    }, every);
    this.sweepTimer.unref();
    // Leftovers of a previous run (killed after answering) are chained at start, not a sweep later.
    this.sweep().catch((err: unknown) =>
      this.logger.warn({ err: (err as Error).message }, "audit: first sweep failed"),
    );
  }

  /** Chains what this instance recorded, then stops (before the database closes). */
  async stop(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    await this.flush().catch(() => undefined);
    this.stopped = true;
    await this.store.close();
  }
}
