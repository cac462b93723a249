/**
 * The embedded default (no PostgreSQL) keeps wallet sign-in state in the relayer's own SQLite file,
 * with the same tables the data layer's migration 9 creates (relayer/db/migrations.ts): so sign-in
 * nonces stay spent and signed-out sessions stay refused across a restart too.
 */
import type { Db } from "../store";

export function ensureSqliteSiweTables(db: Db): void {
  db.exec(`
    CREATE TABLE IF NOT EXISTS siwe_nonces (
      owner TEXT NOT NULL,
      nonce TEXT NOT NULL,
      expires_s INTEGER NOT NULL,
      PRIMARY KEY (owner, nonce)
    );
    CREATE INDEX IF NOT EXISTS siwe_nonces_expiry ON siwe_nonces (expires_s);
    CREATE TABLE IF NOT EXISTS siwe_revocations (
      session_key TEXT NOT NULL PRIMARY KEY,
      expires_s INTEGER NOT NULL,
      revoked_ms INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS siwe_revocations_expiry ON siwe_revocations (expires_s);
    CREATE INDEX IF NOT EXISTS siwe_revocations_changed ON siwe_revocations (revoked_ms);
  `);
}
