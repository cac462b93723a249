/**
 * Nonces spent once per (signer, nonce) until an expiry, in the data layer: the signed requests' nonces
 * (relayer/cluster/sharedNonces.ts) and the sign-in messages' (siweNonces.ts). Claims and sweeps are
 * ExpiringRows'; each table says whether its rows still guard at their expiry second.
 */
import type { DataLayer } from "./engine";
import { ExpiringRows, type ExpiringTable } from "./expiringRows";

export class SpentNonces {
  private readonly rows: ExpiringRows;

  constructor(db: DataLayer, table: ExpiringTable, onSweepError: (err: Error) => void = () => undefined) {
    this.rows = new ExpiringRows(db, table, onSweepError);
  }

  /**
   * Records `nonce` for `signer` until unix second `expiresAt`; false if a live record already holds it
   * (a replay). `now` is unix seconds.
   */
  claim(signer: string, nonce: string, expiresAt: number, now: number): Promise<boolean> {
    return this.rows.claim([signer, nonce], expiresAt, now);
  }

  /** Deletes up to one batch of the rows expired at unix second `now`; returns how many. */
  sweep(now: number): Promise<number> {
    return this.rows.sweep(now);
  }
}
