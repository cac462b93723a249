/**
 * Signed-request nonces shared by every instance through PostgreSQL: a signed request captured in
 * flight and replayed to another instance within the timestamp window is refused there too
 * (signature_replayed). One row per (key address, nonce), kept until the request's timestamp has left
 * the window. Claims and sweeps: SpentNonces (relayer/db/spentNonces.ts).
 *
 * Without PostgreSQL (one process) the verifier keeps nonces in memory (relayer/http/signedRequest.ts).
 */
import type { DataLayer } from "../db";
import { SpentNonces } from "../db/spentNonces";

export class SharedNonceStore extends SpentNonces {
  constructor(db: DataLayer, onSweepError: (err: Error) => void = () => undefined) {
    super(
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
}
