/**
 * Rate limits and the per-account concurrency cap shared by every instance through PostgreSQL (used
 * only when SIGIL_DATABASE_URL is set; the embedded default keeps them in memory).
 *
 * Accuracy: a token bucket is one row, read-refilled-decremented by one UPDATE under its row lock,
 * with the database's clock, so N instances together admit exactly `capacity` requests per window
 * (no per-instance share, no clock skew between instances). The cost is one or two round trips per
 * request and limit. Executions hold a lease row each; a lease of an instance that died is counted
 * until it expires (`leaseMs`), so after a crash an account may briefly see fewer free slots, never more.
 */
import { randomUUID } from "node:crypto";
import { type ExecutionCap, type RateLimiter, rateLimited, tooManyConcurrent } from "../rateLimit";
import type { DataLayer } from "./engine";

const DB_NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

export class SharedTokenBuckets implements RateLimiter {
  private readonly refillPerMs: number;

  /** `capacity` requests per `windowMs`, refilled continuously; `name` separates this limit's rows. */
  constructor(
    private readonly db: DataLayer,
    private readonly name: string,
    private readonly capacity: number,
    windowMs: number,
  ) {
    this.refillPerMs = capacity / windowMs;
  }

  async take(key: string, what: string): Promise<void> {
    const bucket = `${this.name}:${key}`;
    // A bucket seen for the first time starts full (the insert is a no-op when the row exists).
    await this.db.exec(
      `INSERT INTO rate_buckets (bucket, tokens, updated_ms) VALUES ($1, $2, ${DB_NOW_MS}) ON CONFLICT (bucket) DO NOTHING`,
      [bucket, this.capacity],
    );
    const taken = await this.db.exec(
      `UPDATE rate_buckets SET tokens = LEAST($2::float8, tokens + (${DB_NOW_MS} - updated_ms) * $3::float8) - 1,
              updated_ms = ${DB_NOW_MS}
        WHERE bucket = $1 AND LEAST($2::float8, tokens + (${DB_NOW_MS} - updated_ms) * $3::float8) >= 1
        RETURNING tokens`,
      [bucket, this.capacity, this.refillPerMs],
    );
    if (taken.length === 1) return;
    const rows = (await this.db.exec(
      `SELECT LEAST($2::float8, tokens + (${DB_NOW_MS} - updated_ms) * $3::float8) AS tokens FROM rate_buckets WHERE bucket = $1`,
      [bucket, this.capacity, this.refillPerMs],
    )) as Array<{ tokens: number }>;
    const tokens = rows[0]?.tokens ?? 0;
    throw rateLimited(this.capacity, what, Math.max(1, Math.ceil((1 - tokens) / this.refillPerMs / 1000)));
  }

  /** Drops buckets that have refilled completely (they are equivalent to no row). */
  async sweep(): Promise<number> {
    const rows = await this.db.exec(
      `DELETE FROM rate_buckets WHERE bucket LIKE $1 AND tokens + (${DB_NOW_MS} - updated_ms) * $2::float8 >= $3::float8 RETURNING bucket`,
      [`${this.name}:%`, this.refillPerMs, this.capacity],
    );
    return rows.length;
  }
}

export class SharedConcurrencyCap implements ExecutionCap {
  constructor(
    private readonly db: DataLayer,
    private readonly cap: number,
    /** How long a lease counts if its instance never releases it (crash). */
    private readonly leaseMs = 10 * 60 * 1000,
  ) {}

  async enter(accountId: string): Promise<() => void> {
    const leaseId = randomUUID();
    await this.db.transaction(async (tx) => {
      // One account's admissions take turns (a lock on the account, held to the end of this short
      // transaction); other accounts are not held up.
      await tx.exec("SELECT pg_advisory_xact_lock(hashtext('sigil:executions:' || $1))", [accountId]);
      await tx.exec(`DELETE FROM execution_leases WHERE account_id = $1 AND expires_ms < ${DB_NOW_MS}`, [
        accountId,
      ]);
      const [{ n }] = (await tx.exec(
        "SELECT COUNT(*)::int AS n FROM execution_leases WHERE account_id = $1",
        [accountId],
      )) as Array<{ n: number }>;
      if (n >= this.cap) throw tooManyConcurrent(accountId, n, this.cap);
      await tx.exec(
        `INSERT INTO execution_leases (lease_id, account_id, expires_ms) VALUES ($1, $2, ${DB_NOW_MS} + $3::bigint)`,
        [leaseId, accountId, this.leaseMs],
      );
    });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // Not awaited: the answer does not wait for the bookkeeping. A lease that cannot be deleted now
      // expires on its own.
      this.db.exec("DELETE FROM execution_leases WHERE lease_id = $1", [leaseId]).catch(() => undefined);
    };
  }
}
