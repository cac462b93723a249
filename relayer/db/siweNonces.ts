/**
 * Sign-in nonces (POST /core/v1/auth/siwe) spent in the data layer, so a sign-in message is accepted
 * once in all: on PostgreSQL across every instance, on the embedded SQLite file across restarts. One row
 * per (owner, nonce), kept until the message's Expiration Time (after which the message is refused as
 * siwe_expired anyway, so the row has nothing left to guard). Claims and sweeps: SpentNonces.
 */
import type { DataLayer } from "./engine";
import { SpentNonces } from "./spentNonces";

/** What the SIWE verifier needs: spend a nonce once. */
export interface SignInNonces {
  /** Records `nonce` for `owner` until unix second `expiresAt`; false if a live record holds it (a replay). */
  claim(owner: string, nonce: string, expiresAt: number, now: number): Promise<boolean>;
}

export class SharedSignInNonces extends SpentNonces implements SignInNonces {
  constructor(db: DataLayer, onSweepError: (err: Error) => void = () => undefined) {
    super(
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
}
