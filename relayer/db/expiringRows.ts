/**
 * Rows that guard something until an expiry (spent nonces, signed-out sessions) and are then deleted:
 * one claim statement and one sweep for every such table, on both engines.
 *
 * A claim inserts the row unless a live one holds the key; an expired row not yet swept is taken over
 * in the same statement, so whether sweeping has run never changes an answer. Sweeping is housekeeping:
 * it runs off the request's path, at most once per `sweepEveryMs` per process (SweepThrottle), and
 * deletes at most `batch` rows at a time, so a backlog never turns into one long statement.
 */
import type { DataLayer } from "./engine";

/**
 * Runs `sweep` at most once per `everyMs` (this process's clock), in the background, when poked with the
 * time the sweep is to judge expiry by; failures go to `onError`.
 */
export class SweepThrottle<T = void> {
  private lastMs: number;

  constructor(
    private readonly everyMs: number,
    private readonly sweep: (at: T) => Promise<unknown>,
    private readonly onError: (err: Error) => void = () => undefined,
    /** `true`: the first poke may sweep at once; `false`: the first sweep waits a whole period. */
    sweepAtFirstPoke = true,
  ) {
    this.lastMs = sweepAtFirstPoke ? Number.NEGATIVE_INFINITY : Date.now();
  }

  poke(at: T): void {
    const nowMs = Date.now();
    if (nowMs - this.lastMs < this.everyMs) return;
    this.lastMs = nowMs;
    this.sweep(at).catch((err: Error) => this.onError(err));
  }
}

export interface ExpiringTable {
  table: "signed_nonces" | "siwe_nonces" | "siwe_revocations";
  /** The key columns (the table's primary key), in the order `claim` takes their values. */
  key: readonly string[];
  /** The expiry column (unix seconds). */
  expiry: "expires_s";
  /**
   * Whether a row still guards at its expiry second (`expires_s = now`): true where the thing it guards
   * is still accepted at that second (a signed request's timestamp window is inclusive), false where it
   * is refused from then on (a sign-in message's Expiration Time).
   */
  liveAtExpiry: boolean;
  /** Rows one sweep deletes at most. */
  batch: number;
  /** How often (per process) a sweep may run. */
  sweepEveryMs: number;
}

/** Identifiers come from the ExpiringTable literals above, never from a request. */
export class ExpiringRows {
  private readonly claimSql: string;
  private readonly sweepSql: string;
  private readonly throttle: SweepThrottle<number>;

  constructor(
    private readonly db: DataLayer,
    t: ExpiringTable,
    onSweepError: (err: Error) => void = () => undefined,
  ) {
    const pg = db.kind === "postgres";
    const p = (i: number) => (pg ? `$${i}` : "?");
    const big = (i: number) => (pg ? `$${i}::bigint` : "?");
    const n = t.key.length;
    const keys = t.key.join(", ");
    const values = [...t.key.map((_, i) => p(i + 1)), big(n + 1)].join(", ");
    // Expired: no longer guarding at `now` (the last parameter).
    const expired = (col: string, i: number) => `${col} ${t.liveAtExpiry ? "<" : "<="} ${big(i)}`;
    this.claimSql = `INSERT INTO ${t.table} (${keys}, ${t.expiry}) VALUES (${values})
       ON CONFLICT (${keys}) DO UPDATE SET ${t.expiry} = ${pg ? "EXCLUDED" : "excluded"}.${t.expiry}
         WHERE ${expired(`${t.table}.${t.expiry}`, n + 2)}
       RETURNING 1 AS claimed`;
    // The batch bound: ctid on PostgreSQL, rowid on SQLite (both tables are ordinary rowid tables).
    const rowId = pg ? "ctid" : "rowid";
    this.sweepSql = `DELETE FROM ${t.table} WHERE ${rowId} IN (
         SELECT ${rowId} FROM ${t.table} WHERE ${expired(t.expiry, 1)} LIMIT ${t.batch})
       RETURNING 1`;
    this.throttle = new SweepThrottle(t.sweepEveryMs, (now: number) => this.sweep(now), onSweepError);
  }

  /**
   * Records the key until unix second `expiresAt`; false if a live row holds it (a replay). `now` is
   * unix seconds. Pokes the sweep.
   */
  async claim(key: readonly unknown[], expiresAt: number, now: number): Promise<boolean> {
    const rows = await this.db.exec(this.claimSql, [...key, expiresAt, now], { prepared: true });
    this.throttle.poke(now);
    return rows.length === 1;
  }

  /** Deletes up to one batch of rows expired at unix second `now`; returns how many. */
  async sweep(now: number): Promise<number> {
    return (await this.db.exec(this.sweepSql, [now])).length;
  }

  /** Sweeps rows expired at unix second `now` if none was swept lately (for writes that are not claims). */
  pokeSweep(now: number): void {
    this.throttle.poke(now);
  }
}
