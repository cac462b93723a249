/**
 * Rate limits and the per-account concurrency cap shared by every instance through PostgreSQL (used
 * only when SIGIL_DATABASE_URL is set; the embedded default keeps them in memory).
 *
 * Accuracy: a token bucket is one row, refilled and decremented by one upsert under its row lock, with
 * the database's clock, so N instances together admit exactly `capacity` requests per window (no
 * per-instance share, no clock skew between instances). Executions hold a lease row each; a lease of an
 * instance that died is counted until it expires (`leaseMs`), so after a crash an account may briefly
 * see fewer free slots, never more.
 *
 * Cost (docs/performance.md, "PostgreSQL per request"): one statement per admitted request and limit,
 * one for several limits taken together (`takeAlong`: the per-IP, per-key and per-account limits of
 * an authenticated request), one per execution admitted or none when it rides in the run's
 * reservation (`leaseAlong`), and releases ride along with the next admission or go out in batches.
 * Under concurrency (`batched`, the default) the requests of one instance share those statements: the
 * takes waiting while one is on its way go together in one `sigil_take_batch` call, the leases in one
 * `sigil_lease_batch` call (migration 21; relayer/db/batching.ts), each request answered as if sent
 * alone in the batch's order. Both tables are UNLOGGED (migration 8): no WAL flush per request; a crash
 * of the database server empties them (docs/consistency.md).
 */
import { randomUUID } from "node:crypto";
import {
  type ExecutionCap,
  type LimitTake,
  type RateLimiter,
  type RidingLease,
  rateLimited,
  tooManyConcurrent,
} from "../rateLimit";
import { type BatchAnswer, StatementBatcher, retryingDeadlocks } from "./batching";
import { type DataLayer, isPostgresLayer } from "./engine";
import { SweepThrottle } from "./expiringRows";
import type { BatchedLease } from "./riding";

const DB_NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/**
 * One statement taking a token from each of `n` buckets in order, each only if every earlier one
 * was taken (data-modifying CTEs; bucket i's insert selects from bucket i-1's RETURNING). A bucket seen
 * for the first time starts full, minus this token. Parameters per bucket: name, capacity, refill per ms.
 * Answers one row: t0..t(n-1), 1 for a token taken, 0 for a refusal (and none taken after it).
 */
function takeStatement(n: number): string {
  const ctes: string[] = [];
  for (let i = 0; i < n; i++) {
    const [name, cap, rate] = [`$${3 * i + 1}`, `$${3 * i + 2}::float8`, `$${3 * i + 3}::float8`];
    const refilled = `LEAST(${cap}, rate_buckets.tokens + (${DB_NOW_MS} - rate_buckets.updated_ms) * ${rate})`;
    ctes.push(
      `t${i} AS (INSERT INTO rate_buckets (bucket, tokens, updated_ms)
         SELECT ${name}, ${cap} - 1, ${DB_NOW_MS} WHERE ${cap} >= 1${i ? ` AND EXISTS (SELECT 1 FROM t${i - 1})` : ""}
         ON CONFLICT (bucket) DO UPDATE SET tokens = ${refilled} - 1, updated_ms = ${DB_NOW_MS}
           WHERE ${refilled} >= 1
         RETURNING 1)`,
    );
  }
  const taken = Array.from({ length: n }, (_, i) => `(SELECT COUNT(*) FROM t${i})::int AS t${i}`);
  return `WITH ${ctes.join(",\n")} SELECT ${taken.join(", ")}`;
}
const takeStatements = new Map<number, string>();
function takeStatementFor(n: number): string {
  let s = takeStatements.get(n);
  if (!s) takeStatements.set(n, (s = takeStatement(n)));
  return s;
}

/**
 * Whether concurrent requests of this instance share their admission statements (relayer/db/batching.ts,
 * migration 21): the token takes of every limit on one database go together, and so do the execution
 * leases of one cap. Off: one statement per request, as before migration 21.
 */
export interface SharedLimitOptions {
  batched?: boolean;
}
/** The default of `batched` for limits created from now on (`npm run bench:postgres` turns it off to compare). */
export const sharedLimitDefaults = { batched: true };

/** One request's takes, in order: the number of them taken (all, or those before its refusal). */
type TakeItem = readonly LimitTake[];
const takeBatchers = new WeakMap<DataLayer, StatementBatcher<TakeItem, number>>();

/** The batcher of every shared limit on `db`: one `sigil_take_batch` call for the waiting requests. */
function takeBatcherOf(db: DataLayer): StatementBatcher<TakeItem, number> {
  let b = takeBatchers.get(db);
  if (!b) {
    b = new StatementBatcher<TakeItem, number>(async (items) => {
      const [ids, buckets, caps, rates] = [[], [], [], []] as [number[], string[], number[], number[]];
      items.forEach((takes, i) => {
        for (const t of takes) {
          const l = t.limiter as SharedTokenBuckets;
          ids.push(i);
          buckets.push(l.bucketOf(t.key));
          caps.push(l.capacity);
          rates.push(l.refillPerMs);
        }
      });
      const rows = (await retryingDeadlocks(() =>
        db.exec(
          "SELECT item, taken FROM sigil_take_batch($1::int[], $2::text[], $3::float8[], $4::float8[])",
          [ids, buckets, caps, rates],
          { prepared: true },
        ),
      )) as Array<{ item: number; taken: number }>;
      const answers: Array<BatchAnswer<number>> = items.map(() => ({
        ok: false,
        error: new Error("sigil_take_batch did not answer this request"),
      }));
      for (const r of rows) answers[Number(r.item)] = { ok: true, value: Number(r.taken) };
      return answers;
    });
    takeBatchers.set(db, b);
  }
  return b;
}

/** Rows one sweep deletes at most, and how often (per limit and instance) a sweep may run. */
const SWEEP_BATCH = 1_000;
const SWEEP_EVERY_MS = 60_000;

export class SharedTokenBuckets implements RateLimiter {
  readonly refillPerMs: number;
  /** At most once per SWEEP_EVERY_MS per limit and instance, off the request's path; best effort. */
  private readonly sweeps = new SweepThrottle(
    SWEEP_EVERY_MS,
    () => this.sweep(),
    () => undefined,
    false,
  );

  /** `capacity` requests per `windowMs`, refilled continuously; `name` separates this limit's rows. */
  private readonly batched: boolean;

  constructor(
    private readonly db: DataLayer,
    private readonly name: string,
    readonly capacity: number,
    windowMs: number,
    options: SharedLimitOptions = {},
  ) {
    this.refillPerMs = capacity / windowMs;
    this.batched = options.batched ?? sharedLimitDefaults.batched;
  }

  take(key: string, what: string): Promise<void> {
    return this.takeAll([{ limiter: this, key, what }]);
  }

  /**
   * This limit's token and then each of `then`'s, in one statement when they all live in this
   * database; null (the caller takes them one by one) otherwise.
   */
  takeAlong(key: string, what: string, then: readonly LimitTake[]): Promise<void> | null {
    const all: LimitTake[] = [{ limiter: this, key, what }, ...then];
    if (!all.every((t) => t.limiter instanceof SharedTokenBuckets && t.limiter.db === this.db)) return null;
    return this.takeAll(all);
  }

  private async takeAll(takes: readonly LimitTake[]): Promise<void> {
    const taken = this.batched ? await takeBatcherOf(this.db).submit(takes) : await this.takeAlone(takes);
    for (const t of takes) (t.limiter as SharedTokenBuckets).sweeps.poke();
    const refused = taken < takes.length ? taken : -1;
    if (refused >= 0) {
      const t = takes[refused];
      await (t.limiter as SharedTokenBuckets).refuse(t.key, t.what);
    }
  }

  /** The takes in a statement of their own (unbatched): the number taken, as sigil_take_batch answers. */
  private async takeAlone(takes: readonly LimitTake[]): Promise<number> {
    const params: unknown[] = [];
    for (const t of takes) {
      const l = t.limiter as SharedTokenBuckets;
      params.push(l.bucketOf(t.key), l.capacity, l.refillPerMs);
    }
    const [row] = (await this.db.exec(takeStatementFor(takes.length), params, { prepared: true })) as Array<
      Record<string, number>
    >;
    const refused = takes.findIndex((_, i) => row[`t${i}`] !== 1);
    return refused < 0 ? takes.length : refused;
  }

  bucketOf(key: string): string {
    return `${this.name}:${key}`;
  }

  /** Throws the 429 for a refused token, with the seconds until one is back (off the admitted path). */
  private async refuse(key: string, what: string): Promise<never> {
    const rows = (await this.db.exec(
      `SELECT LEAST($2::float8, tokens + (${DB_NOW_MS} - updated_ms) * $3::float8) AS tokens FROM rate_buckets WHERE bucket = $1`,
      [this.bucketOf(key), this.capacity, this.refillPerMs],
    )) as Array<{ tokens: number }>;
    const tokens = rows[0]?.tokens ?? 0;
    throw rateLimited(this.capacity, what, Math.max(1, Math.ceil((1 - tokens) / this.refillPerMs / 1000)));
  }

  /**
   * Drops up to SWEEP_BATCH buckets that have refilled completely (equivalent to no row: a take
   * recreates a full bucket), so the table holds the recently active clients, not every IP ever seen.
   * A take racing the DELETE holds the row lock; the DELETE then re-checks the updated row and keeps it.
   */
  async sweep(): Promise<number> {
    const rows = await this.db.exec(
      `DELETE FROM rate_buckets WHERE ctid IN (
         SELECT ctid FROM rate_buckets WHERE bucket LIKE $1
            AND tokens + (${DB_NOW_MS} - updated_ms) * $2::float8 >= $3::float8 LIMIT ${SWEEP_BATCH})
         AND tokens + (${DB_NOW_MS} - updated_ms) * $2::float8 >= $3::float8
       RETURNING bucket`,
      [`${this.name}:%`, this.refillPerMs, this.capacity],
    );
    return rows.length;
  }
}

/**
 * How long a released lease may wait for the next admission of this instance to carry its DELETE
 * before it is sent on its own (with every other release waiting by then). The bound on how much
 * later than before a released slot is free for the other instances; on this instance it is free at once.
 */
export const RELEASE_FLUSH_MS = 2;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export class SharedConcurrencyCap implements ExecutionCap {
  /** Leases released here whose DELETE has not been sent yet. */
  private released: string[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  /** Null when unbatched: each admission is its own `sigil_lease` call. */
  private readonly batcher: StatementBatcher<LeaseItem, LeaseAnswer> | null;

  constructor(
    private readonly db: DataLayer,
    private readonly cap: number,
    /** How long a lease counts if its instance never releases it (crash). */
    private readonly leaseMs = 10 * 60 * 1000,
    options: SharedLimitOptions = {},
  ) {
    if (!isPostgresLayer(db)) throw new Error("SharedConcurrencyCap needs PostgreSQL");
    if (!Number.isSafeInteger(cap) || !Number.isSafeInteger(leaseMs))
      throw new Error("cap and leaseMs must be integers");
    this.batcher =
      (options.batched ?? sharedLimitDefaults.batched)
        ? new StatementBatcher((items) => this.leaseBatch(items))
        : null;
  }

  /**
   * One `sigil_lease_batch` call (migration 21) for the admissions waiting on this instance: the same
   * lock, deletions and count as `sigil_lease`, the items admitted in order while there is room, and
   * this instance's releases carried along.
   */
  private async leaseBatch(items: readonly LeaseItem[]): Promise<Array<BatchAnswer<LeaseAnswer>>> {
    const releasing = this.released;
    this.released = [];
    let rows: Array<{ n: number; admitted: number }>;
    try {
      rows = (await this.db.exec(
        "SELECT n, admitted FROM sigil_lease_batch($1::text[], $2::text[], $3::int, $4::bigint, $5::text[])",
        [items.map((i) => i.accountId), items.map((i) => i.leaseId), this.cap, this.leaseMs, releasing],
        { prepared: true },
      )) as Array<{ n: number; admitted: number }>;
    } catch (err) {
      this.queueRelease(releasing); // not applied: they go out on their own
      throw err;
    }
    return items.map((_, i) => {
      const r = rows[i];
      if (!r) return { ok: false, error: new Error("sigil_lease_batch did not answer this admission") };
      return { ok: true, value: { running: Number(r.n), admitted: Number(r.admitted) === 1 } };
    });
  }

  /**
   * One round trip, one prepared statement: `sigil_lease` (migration 20) takes the account's admission
   * lock (held to the end of the transaction, so one account's admissions take turns across
   * instances; other accounts are not held up), deletes this instance's released leases and the
   * account's expired ones, then counts the live leases and inserts ours if there is room. Each of the
   * function's statements sees what committed before it started, so the count sees every lease
   * admitted before the lock was ours.
   */
  async enter(accountId: string): Promise<() => void> {
    if (this.batcher) {
      checkAccountId(accountId);
      const leaseId = randomUUID();
      const { running, admitted } = await this.batcher.submit({ accountId, leaseId });
      if (!admitted) throw tooManyConcurrent(accountId, running, this.cap);
      return this.releaser(leaseId);
    }
    const lease = this.leaseAlong(accountId);
    const { from, params } = lease.call("true", 1);
    let row: Record<string, unknown>;
    try {
      [row] = (await this.db.exec(`SELECT * FROM ${from}`, params, { prepared: true })) as Array<
        Record<string, unknown>
      >;
    } catch (err) {
      lease.abandon();
      throw err;
    }
    if (!lease.ran(row, true)) throw lease.refusal();
    return lease.release!;
  }

  /**
   * The same admission as a function call for another admission's statement (the run's reservation):
   * the lock and the count-and-insert only where `hostAdmitted` holds; this instance's releases are
   * carried either way. Lock order: the host's lock, then this one; nothing takes them the other
   * way round, so two such statements never deadlock.
   */
  leaseAlong(accountId: string): RidingLease {
    checkAccountId(accountId);
    const leaseId = randomUUID();
    let releasing: string[] = [];
    let running = 0;
    let release: (() => void) | null = null;
    // This instance's releases go with the statement that carries this lease, alone or in a batch.
    const lease = (): BatchedLease => {
      releasing = this.released;
      this.released = [];
      return { accountId, leaseId, cap: this.cap, leaseMs: this.leaseMs, releases: releasing };
    };
    return {
      db: this.db,
      call: (hostAdmitted, first) => {
        const l = lease();
        const p = (i: number) => `$${first + i}`;
        return {
          from: `sigil_lease(${p(0)}::text, ${p(1)}::text, ${p(2)}::int, ${p(3)}::bigint, ${p(4)}::text[], ${hostAdmitted}) AS lease(lease_running, lease_admitted)`,
          params: [l.accountId, l.leaseId, l.cap, l.leaseMs, l.releases],
        };
      },
      batchLease: lease,
      admitted: "lease.lease_admitted = 1",
      ran: (row) => {
        running = Number(row.lease_running);
        if (Number(row.lease_admitted) !== 1) return false;
        release = this.releaser(leaseId);
        return true;
      },
      refusal: () => tooManyConcurrent(accountId, running, this.cap),
      abandon: () => this.queueRelease(releasing), // not applied: they go out on their own
      get release() {
        return release;
      },
    };
  }

  /** Gives the lease back, once. */
  private releaser(leaseId: string): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      // Not awaited: the answer does not wait for the bookkeeping. A lease that cannot be deleted
      // expires on its own.
      this.queueRelease([leaseId]);
    };
  }

  private queueRelease(ids: readonly string[]): void {
    if (!ids.length) return;
    this.released.push(...ids.filter((id) => UUID.test(id)));
    this.flushTimer ??= setTimeout(() => this.flush(), RELEASE_FLUSH_MS);
  }

  private flush(): void {
    this.flushTimer = null;
    const ids = this.released;
    this.released = [];
    if (!ids.length) return;
    this.db
      .exec("DELETE FROM execution_leases WHERE lease_id = ANY($1::text[])", [ids], { prepared: true })
      .catch(() => undefined);
  }
}

interface LeaseItem {
  accountId: string;
  leaseId: string;
}
interface LeaseAnswer {
  running: number;
  admitted: boolean;
}

/** Account ids are digits (a caller passing anything else has a bug, caught here, before the database). */
function checkAccountId(accountId: string): void {
  if (!/^[0-9]{1,30}$/.test(accountId)) throw new Error(`not an account id: ${accountId}`);
}
