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
 * reservation (`leaseAlong`), and releases ride along with the next admission or go out in batches. Both tables are UNLOGGED (migration 8): no WAL flush per request; a crash of
 * the database server empties them (docs/consistency.md).
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
import { type DataLayer, isPostgresLayer } from "./engine";
import { SweepThrottle } from "./expiringRows";

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

/** Rows one sweep deletes at most, and how often (per limit and instance) a sweep may run. */
const SWEEP_BATCH = 1_000;
const SWEEP_EVERY_MS = 60_000;

export class SharedTokenBuckets implements RateLimiter {
  private readonly refillPerMs: number;
  /** At most once per SWEEP_EVERY_MS per limit and instance, off the request's path; best effort. */
  private readonly sweeps = new SweepThrottle(
    SWEEP_EVERY_MS,
    () => this.sweep(),
    () => undefined,
    false,
  );

  /** `capacity` requests per `windowMs`, refilled continuously; `name` separates this limit's rows. */
  constructor(
    private readonly db: DataLayer,
    private readonly name: string,
    private readonly capacity: number,
    windowMs: number,
  ) {
    this.refillPerMs = capacity / windowMs;
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
    const params: unknown[] = [];
    for (const t of takes) {
      const l = t.limiter as SharedTokenBuckets;
      params.push(l.bucketOf(t.key), l.capacity, l.refillPerMs);
    }
    const [row] = (await this.db.exec(takeStatementFor(takes.length), params, { prepared: true })) as Array<
      Record<string, number>
    >;
    for (const t of takes) (t.limiter as SharedTokenBuckets).sweeps.poke();
    const refused = takes.findIndex((_, i) => row[`t${i}`] !== 1);
    if (refused >= 0) {
      const t = takes[refused];
      await (t.limiter as SharedTokenBuckets).refuse(t.key, t.what);
    }
  }

  private bucketOf(key: string): string {
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

  constructor(
    private readonly db: DataLayer,
    private readonly cap: number,
    /** How long a lease counts if its instance never releases it (crash). */
    private readonly leaseMs = 10 * 60 * 1000,
  ) {
    if (!isPostgresLayer(db)) throw new Error("SharedConcurrencyCap needs PostgreSQL");
    if (!Number.isSafeInteger(cap) || !Number.isSafeInteger(leaseMs))
      throw new Error("cap and leaseMs must be integers");
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
    // Account ids are digits (a caller passing anything else has a bug, caught here, before the database).
    if (!/^[0-9]{1,30}$/.test(accountId)) throw new Error(`not an account id: ${accountId}`);
    const leaseId = randomUUID();
    let releasing: string[] = [];
    let running = 0;
    let release: (() => void) | null = null;
    return {
      db: this.db,
      call: (hostAdmitted, first) => {
        releasing = this.released;
        this.released = [];
        const p = (i: number) => `$${first + i}`;
        return {
          from: `sigil_lease(${p(0)}::text, ${p(1)}::text, ${p(2)}::int, ${p(3)}::bigint, ${p(4)}::text[], ${hostAdmitted}) AS lease(lease_running, lease_admitted)`,
          params: [accountId, leaseId, this.cap, this.leaseMs, releasing],
        };
      },
      admitted: "lease.lease_admitted = 1",
      ran: (row) => {
        running = Number(row.lease_running);
        if (Number(row.lease_admitted) !== 1) return false;
        let done = false;
        release = () => {
          if (done) return;
          done = true;
          // Not awaited: the answer does not wait for the bookkeeping. A lease that cannot be deleted
          // expires on its own.
          this.queueRelease([leaseId]);
        };
        return true;
      },
      refusal: () => tooManyConcurrent(accountId, running, this.cap),
      abandon: () => this.queueRelease(releasing), // not applied: they go out on their own
      get release() {
        return release;
      },
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
