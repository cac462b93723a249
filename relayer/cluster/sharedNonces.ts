/**
 * Signed-request nonces shared by every instance through PostgreSQL: a signed request captured in
 * flight and replayed to another instance within the timestamp window is refused there too
 * (signature_replayed). One row per (key address, nonce), kept until the request's timestamp has left
 * the window. Claims and sweeps: ExpiringRows (relayer/db/expiringRows.ts).
 *
 * Without PostgreSQL (one process) the verifier keeps nonces in memory (relayer/http/signedRequest.ts).
 */
import { type DataLayer, ExpiringRows } from "../db";

export class SharedNonceStore {
  private readonly rows: ExpiringRows;

  constructor(db: DataLayer, onSweepError: (err: Error) => void = () => undefined) {
    this.rows = new ExpiringRows(
      db,
      // The timestamp window is inclusive: at `expires_s` itself the request is still accepted.
      {
        table: "signed_nonces",
        key: ["key_address", "nonce"],
        expiry: "expires_s",
        liveAtExpiry: true,
        batch: 1_000,
        sweepEveryMs: 10_000,
      },
      onSweepError,
    );
  }

  /**
   * Records `nonce` for `address` until unix second `expiresAt`; false if a live record already holds
   * it (a replay). `now` is unix seconds.
   */
  claim(address: string, nonce: string, expiresAt: number, now: number): Promise<boolean> {
    return this.rows.claim([address, nonce], expiresAt, now);
  }

  /** Deletes up to one batch of expired rows; returns how many. */
  sweep(now: number): Promise<number> {
    return this.rows.sweep(now);
  }
}
