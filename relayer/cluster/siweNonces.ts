/**
 * Sign-in nonces (POST /core/v1/auth/siwe) spent in the data layer, so a sign-in message is accepted
 * once in all: on PostgreSQL across every instance, on the embedded SQLite file across restarts. One row
 * per (owner, nonce), kept until the message's Expiration Time (after which the message is refused as
 * siwe_expired anyway, so the row has nothing left to guard). A claim is one INSERT that succeeds only
 * if no live row holds the pair; an expired row not yet swept is taken over.
 *
 * Sweeping deletes expired rows at most once per SWEEP_EVERY_MS per process, off the request's path.
 * The table holds one row per sign-in of the last hour at most: a plain DELETE is bounded by that.
 */
import type { DataLayer } from "../db";

const SWEEP_EVERY_MS = 60_000;

const CLAIM = {
  postgres: `INSERT INTO siwe_nonces (owner, nonce, expires_s) VALUES ($1, $2, $3::bigint)
     ON CONFLICT (owner, nonce) DO UPDATE SET expires_s = EXCLUDED.expires_s
       WHERE siwe_nonces.expires_s <= $4::bigint
     RETURNING 1 AS claimed`,
  sqlite: `INSERT INTO siwe_nonces (owner, nonce, expires_s) VALUES (?, ?, ?)
     ON CONFLICT (owner, nonce) DO UPDATE SET expires_s = excluded.expires_s
       WHERE siwe_nonces.expires_s <= ?
     RETURNING 1 AS claimed`,
} as const;
const SWEEP = {
  postgres: "DELETE FROM siwe_nonces WHERE expires_s <= $1::bigint",
  sqlite: "DELETE FROM siwe_nonces WHERE expires_s <= ?",
} as const;

/** What the SIWE verifier needs: spend a nonce once. */
export interface SignInNonces {
  /** Records `nonce` for `owner` until unix second `expiresAt`; false if a live record holds it (a replay). */
  claim(owner: string, nonce: string, expiresAt: number, now: number): Promise<boolean>;
}

export class SharedSignInNonces implements SignInNonces {
  private lastSweepMs = 0;

  constructor(
    private readonly db: DataLayer,
    private readonly onSweepError: (err: Error) => void = () => undefined,
  ) {}

  async claim(owner: string, nonce: string, expiresAt: number, now: number): Promise<boolean> {
    const rows = await this.db.exec(CLAIM[this.db.kind], [owner, nonce, expiresAt, now]);
    this.maybeSweep(now);
    return rows.length === 1;
  }

  /** Deletes the expired rows; returns how many. */
  async sweep(now: number): Promise<number> {
    const rows = await this.db.exec(`${SWEEP[this.db.kind]} RETURNING 1`, [now]);
    return rows.length;
  }

  private maybeSweep(now: number): void {
    const nowMs = Date.now();
    if (nowMs - this.lastSweepMs < SWEEP_EVERY_MS) return;
    this.lastSweepMs = nowMs;
    this.sweep(now).catch((err: Error) => this.onSweepError(err));
  }
}
