/**
 * Sign-in nonces (POST /core/v1/auth/siwe) spent in the data layer, so a sign-in message is accepted
 * once in all: on PostgreSQL across every instance, on the embedded SQLite file across restarts. One row
 * per (owner, nonce), kept until the message's Expiration Time (after which the message is refused as
 * siwe_expired anyway, so the row has nothing left to guard). Claims and sweeps: ExpiringRows.
 */
import type { DataLayer } from "./engine";
import { ExpiringRows } from "./expiringRows";

/** What the SIWE verifier needs: spend a nonce once. */
export interface SignInNonces {
  /** Records `nonce` for `owner` until unix second `expiresAt`; false if a live record holds it (a replay). */
  claim(owner: string, nonce: string, expiresAt: number, now: number): Promise<boolean>;
}

export class SharedSignInNonces implements SignInNonces {
  private readonly rows: ExpiringRows;

  constructor(db: DataLayer, onSweepError: (err: Error) => void = () => undefined) {
    this.rows = new ExpiringRows(
      db,
      // At its Expiration Time a message is refused: the row guards nothing from that second on.
      {
        table: "siwe_nonces",
        key: ["owner", "nonce"],
        expiry: "expires_s",
        liveAtExpiry: false,
        batch: 1_000,
        sweepEveryMs: 60_000,
      },
      onSweepError,
    );
  }

  claim(owner: string, nonce: string, expiresAt: number, now: number): Promise<boolean> {
    return this.rows.claim([owner, nonce], expiresAt, now);
  }

  /** Deletes (a batch of) the rows expired at unix second `now`; returns how many. */
  sweep(now: number): Promise<number> {
    return this.rows.sweep(now);
  }
}
