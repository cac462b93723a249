/**
 * Signed-request nonces shared by every instance through PostgreSQL: a signed request captured in
 * flight and replayed to another instance within the timestamp window is refused there too
 * (signature_replayed). One row per (key address, nonce), kept until the request's timestamp has left
 * the window; a claim is one INSERT that succeeds only if no live row holds the pair (an expired row
 * not yet swept is taken over). Sweeping is bounded: at most SWEEP_BATCH expired rows, at most once per
 * SWEEP_EVERY_MS per instance, off the request's path.
 *
 * Without PostgreSQL (one process) the verifier keeps nonces in memory (relayer/http/signedRequest.ts).
 */
import type { DataLayer } from "../db";

const SWEEP_BATCH = 1_000;
const SWEEP_EVERY_MS = 10_000;

export class SharedNonceStore {
  private lastSweepMs = 0;

  constructor(
    private readonly db: DataLayer,
    private readonly onSweepError: (err: Error) => void = () => undefined,
  ) {}

  /**
   * Records `nonce` for `address` until unix second `expiresAt`; false if a live record already holds
   * it (a replay). `now` is unix seconds.
   */
  async claim(address: string, nonce: string, expiresAt: number, now: number): Promise<boolean> {
    const rows = await this.db.exec(
      `INSERT INTO signed_nonces (key_address, nonce, expires_s) VALUES ($1, $2, $3::bigint)
       ON CONFLICT (key_address, nonce) DO UPDATE SET expires_s = EXCLUDED.expires_s
         WHERE signed_nonces.expires_s < $4::bigint
       RETURNING 1 AS claimed`,
      [address, nonce, expiresAt, now],
      { prepared: true },
    );
    this.maybeSweep(now);
    return rows.length === 1;
  }

  /** Deletes up to SWEEP_BATCH expired rows; returns how many. */
  async sweep(now: number): Promise<number> {
    const rows = await this.db.exec(
      `DELETE FROM signed_nonces WHERE ctid IN (
         SELECT ctid FROM signed_nonces WHERE expires_s < $1::bigint LIMIT ${SWEEP_BATCH})
       RETURNING 1`,
      [now],
    );
    return rows.length;
  }

  private maybeSweep(now: number): void {
    const nowMs = Date.now();
    if (nowMs - this.lastSweepMs < SWEEP_EVERY_MS) return;
    this.lastSweepMs = nowMs;
    this.sweep(now).catch((err: Error) => this.onSweepError(err));
  }
}
