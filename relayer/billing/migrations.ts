import type { Database } from "better-sqlite3";
import { randomBytes } from "node:crypto";

/**
 * Versioned schema of the billing database. Each migration runs once, in order, inside one
 * transaction together with the bump of `schema_version`, so a crash mid-migration leaves the file
 * at the previous version. Append new migrations; never edit one that has shipped.
 */
export interface Migration {
  version: number;
  description: string;
  up(db: Database): void;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "accounts, ledger, payment intents, webhook events, per-key spend, simulated processor",
    up(db) {
      db.exec(`
        -- One row per database: ties Stripe intents to this ledger (metadata.ledger_id), so two
        -- deployments sharing a Stripe account never credit each other's payments.
        CREATE TABLE ledger_meta (
          ledger_id TEXT NOT NULL
        );
        CREATE TABLE accounts (
          account_id    TEXT PRIMARY KEY,
          balance_cents INTEGER NOT NULL DEFAULT 0,
          created_at    INTEGER NOT NULL
        );
        -- Every balance change is one row here, written in the same transaction as the balance.
        -- The UNIQUE reference is what makes crediting and charging idempotent.
        CREATE TABLE ledger_entries (
          id                  INTEGER PRIMARY KEY AUTOINCREMENT,
          account_id          TEXT NOT NULL REFERENCES accounts(account_id),
          kind                TEXT NOT NULL CHECK (kind IN ('credit', 'debit')),
          amount_cents        INTEGER NOT NULL CHECK (amount_cents > 0),
          balance_after_cents INTEGER NOT NULL,
          reference           TEXT NOT NULL UNIQUE,
          key_address         TEXT,
          operation           TEXT NOT NULL,
          created_at          INTEGER NOT NULL
        );
        CREATE INDEX ledger_entries_by_account ON ledger_entries(account_id, id);
        CREATE TABLE payment_intents (
          payment_intent_id TEXT PRIMARY KEY,
          account_id        TEXT NOT NULL,
          amount_cents      INTEGER NOT NULL,
          currency          TEXT NOT NULL,
          status            TEXT NOT NULL,
          last_error        TEXT,
          status_event_at   INTEGER NOT NULL DEFAULT 0,
          credited_cents    INTEGER,
          credited_at       INTEGER,
          created_at        INTEGER NOT NULL,
          updated_at        INTEGER NOT NULL
        );
        CREATE INDEX payment_intents_uncredited ON payment_intents(credited_at, status);
        CREATE TABLE webhook_events (
          event_id     TEXT PRIMARY KEY,
          type         TEXT NOT NULL,
          outcome      TEXT NOT NULL,
          received_at  INTEGER NOT NULL
        );
        CREATE TABLE key_spend (
          key_address TEXT PRIMARY KEY,
          account_id  TEXT NOT NULL,
          spent_cents INTEGER NOT NULL DEFAULT 0,
          cap_cents   INTEGER
        );
        -- The simulated processor's own state ("its Stripe"), kept in the same file so intents
        -- survive restarts of the embedded default.
        CREATE TABLE sim_intents (
          id            TEXT PRIMARY KEY,
          client_secret TEXT NOT NULL,
          amount_cents  INTEGER NOT NULL,
          currency      TEXT NOT NULL,
          status        TEXT NOT NULL,
          metadata      TEXT NOT NULL,
          last_error    TEXT,
          created_at    INTEGER NOT NULL
        );
        CREATE TABLE sim_idempotency (
          idempotency_key TEXT PRIMARY KEY,
          request_hash    TEXT NOT NULL,
          intent_id       TEXT NOT NULL
        );
      `);
      db.prepare("INSERT INTO ledger_meta (ledger_id) VALUES (?)").run(
        "ldg_" + randomBytes(12).toString("hex"),
      );
    },
  },
];

/** Applies every migration newer than the file's version. Safe to call on every open. */
export function migrate(db: Database, migrations: readonly Migration[] = MIGRATIONS): number {
  db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  // An older build opening a file migrated by a newer one would read and write a schema it does not
  // know (a rollback of the code must not silently corrupt balances): refuse instead.
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const found = readVersion(db);
  if (found > known)
    throw new Error(
      `billing database is at schema version ${found}, newer than this code knows (${known}); run a newer build`,
    );
  const apply = db.transaction((m: Migration) => {
    // Re-read inside the (immediate) transaction: two processes opening the same file at once
    // must not both apply the same migration.
    const current = readVersion(db);
    if (current >= m.version) return;
    m.up(db);
    db.prepare("DELETE FROM schema_version").run();
    db.prepare("INSERT INTO schema_version (version) VALUES (?)").run(m.version);
  });
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (readVersion(db) < m.version) apply.immediate(m);
  }
  return readVersion(db);
}

export function readVersion(db: Database): number {
  const row = db.prepare("SELECT MAX(version) AS v FROM schema_version").get() as { v: number | null };
  return row.v ?? 0;
}
