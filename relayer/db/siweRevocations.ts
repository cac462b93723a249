/**
 * Signed-out wallet sessions (POST /core/v1/auth/siwe/sign_out). A session is identified by its session
 * key: the page makes a fresh one per sign-in, and only whoever holds it can sign the session's requests,
 * so revoking the key ends exactly that sign-in (and any other message naming the same key). One row per
 * session key, kept until the session's Expiration Time; after that the message is refused as
 * siwe_expired anyway and the row is swept.
 *
 * The check runs on every request a session signs, so it must stay cheap:
 *  - SQLite (the embedded default, one process): one primary-key lookup in the embedded database file per
 *    request (a few microseconds; docs/performance.md). Nothing cached: sign-out is seen at once.
 *  - PostgreSQL (several instances): each instance keeps the live revocations in memory and re-reads
 *    what changed when its copy is older than `stalenessMs` (default 1 s), on the request that finds it
 *    stale. So a session signed out on one instance is refused by every other instance at most
 *    `stalenessMs` later, and at once by the instance that signed it out. If the re-read fails the
 *    request fails too (503 database_unavailable): a stale copy is never trusted past the bound.
 *    The re-read asks for rows revoked since the previous one, by the database's own clock, with an
 *    overlap of OVERLAP_MS for an INSERT that took its timestamp before one re-read and committed after.
 */
import type { DataLayer } from "./engine";
import { ExpiringRows } from "./expiringRows";
import { prepare } from "./prepared";

/** How old the in-memory copy may be before a request re-reads it (PostgreSQL). */
export const REVOCATION_STALENESS_MS = 1_000;
const OVERLAP_MS = 10_000;

export interface SessionRevocations {
  /** Records the session key as signed out until unix second `expiresAt`; false if it already was. */
  revoke(sessionKey: string, expiresAt: number, now: number): Promise<boolean>;
  /** Whether the session key was signed out (and its record still live at unix second `now`). */
  isRevoked(sessionKey: string, now: number): Promise<boolean>;
}

const DB_NOW_MS = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint";
// A second sign-out of the same session changes nothing (no row back: "already signed out"); a row
// that expired before it was swept, or a later expiry for the same key, is taken over.
const REVOKE = {
  postgres: `INSERT INTO siwe_revocations (session_key, expires_s, revoked_ms) VALUES ($1, $2::bigint, ${DB_NOW_MS})
     ON CONFLICT (session_key) DO UPDATE SET expires_s = EXCLUDED.expires_s, revoked_ms = EXCLUDED.revoked_ms
       WHERE siwe_revocations.expires_s < EXCLUDED.expires_s
     RETURNING 1 AS revoked`,
  sqlite: `INSERT INTO siwe_revocations (session_key, expires_s, revoked_ms) VALUES (?, ?, ?)
     ON CONFLICT (session_key) DO UPDATE SET expires_s = excluded.expires_s, revoked_ms = excluded.revoked_ms
       WHERE siwe_revocations.expires_s < excluded.expires_s
     RETURNING 1 AS revoked`,
} as const;
/** Compiled once and kept as a prepared statement: this runs on every request of a session (SQLite). */
const IS_REVOKED = prepare("siwe.isRevoked", (db, a) =>
  db
    .selectFrom("siwe_revocations")
    .select("session_key")
    .where("session_key", "=", a(0))
    .where("expires_s", ">", a(1)),
);
/** One row always: the database's clock, and the live rows revoked since $1 (its clock, ms). */
const CHANGED_SINCE_POSTGRES = `SELECT ${DB_NOW_MS} AS db_now_ms,
  COALESCE((SELECT json_agg(json_build_array(session_key, expires_s)) FROM siwe_revocations
            WHERE revoked_ms >= $1::bigint AND expires_s > $2::bigint), '[]'::json) AS changed`;

/** The store for this data layer: queried directly on SQLite, cached with a staleness bound on PostgreSQL. */
export function sessionRevocationsFor(
  db: DataLayer,
  opts: { stalenessMs?: number; onSweepError?: (err: Error) => void } = {},
): SessionRevocations & { sweep(now: number): Promise<number> } {
  return db.kind === "postgres" ? new CachedRevocations(db, opts) : new SqliteRevocations(db, opts);
}

abstract class RevocationTable {
  private readonly expiring: ExpiringRows;

  constructor(
    protected readonly db: DataLayer,
    opts: { onSweepError?: (err: Error) => void },
  ) {
    this.expiring = new ExpiringRows(
      db,
      // Rows are only added by sign-outs, so whoever signs out sweeps (at most once a minute, off the path).
      {
        table: "siwe_revocations",
        key: ["session_key"],
        expiry: "expires_s",
        liveAtExpiry: false,
        batch: 1_000,
        sweepEveryMs: 60_000,
      },
      opts.onSweepError,
    );
  }

  protected async insert(sessionKey: string, expiresAt: number): Promise<boolean> {
    const params =
      this.db.kind === "postgres" ? [sessionKey, expiresAt] : [sessionKey, expiresAt, Date.now()];
    const rows = await this.db.exec(REVOKE[this.db.kind], params);
    return rows.length === 1;
  }

  /** Deletes (a batch of) the rows expired at unix second `now`; returns how many. */
  sweep(now: number): Promise<number> {
    return this.expiring.sweep(now);
  }

  protected maybeSweep(now: number): void {
    this.expiring.pokeSweep(now);
  }
}

class SqliteRevocations extends RevocationTable implements SessionRevocations {
  async revoke(sessionKey: string, expiresAt: number, now: number): Promise<boolean> {
    const fresh = await this.insert(sessionKey, expiresAt);
    this.maybeSweep(now);
    return fresh;
  }

  async isRevoked(sessionKey: string, now: number): Promise<boolean> {
    return (await this.db.first(IS_REVOKED, [sessionKey, now])) !== undefined;
  }
}

class CachedRevocations extends RevocationTable implements SessionRevocations {
  /** Session key → expiry (unix seconds) of every live revocation this instance has read. */
  private readonly known = new Map<string, number>();
  private readonly stalenessMs: number;
  /** Local time the last successful re-read was sent: rows committed before it are in `known`. */
  private readAtMs = Number.NEGATIVE_INFINITY;
  /** The database's clock (ms) when the last re-read ran; the next asks for rows revoked since. */
  private dbNowMs = 0;
  private inflight: Promise<void> | null = null;

  constructor(db: DataLayer, opts: { stalenessMs?: number; onSweepError?: (err: Error) => void }) {
    super(db, opts);
    this.stalenessMs = opts.stalenessMs ?? REVOCATION_STALENESS_MS;
  }

  async revoke(sessionKey: string, expiresAt: number, now: number): Promise<boolean> {
    const fresh = await this.insert(sessionKey, expiresAt);
    // This instance refuses the session at once, whatever its copy's age.
    this.known.set(sessionKey, Math.max(expiresAt, this.known.get(sessionKey) ?? 0));
    this.maybeSweep(now);
    return fresh;
  }

  async isRevoked(sessionKey: string, now: number): Promise<boolean> {
    if (Date.now() - this.readAtMs >= this.stalenessMs) await this.reread(now);
    const until = this.known.get(sessionKey);
    return until !== undefined && until > now;
  }

  /** One re-read at a time: requests finding the copy stale wait for the same one. */
  private reread(now: number): Promise<void> {
    this.inflight ??= this.readChanges(now).finally(() => (this.inflight = null));
    return this.inflight;
  }

  private async readChanges(now: number): Promise<void> {
    const sentAtMs = Date.now();
    const [row] = (await this.db.exec(CHANGED_SINCE_POSTGRES, [this.dbNowMs - OVERLAP_MS, now])) as Array<{
      db_now_ms: number | string;
      changed: Array<[string, number | string]>;
    }>;
    for (const [key, until] of row.changed)
      this.known.set(key, Math.max(Number(until), this.known.get(key) ?? 0));
    for (const [key, until] of this.known) if (until <= now) this.known.delete(key);
    this.dbNowMs = Number(row.db_now_ms);
    this.readAtMs = sentAtMs;
  }
}
