/**
 * Lays a relayer's rows out as the release before the one database kept them, for the upgrade tests:
 *  - an unversioned `relayer.sqlite` in the relayer's data folder, created with that release's own
 *    statements (its relayer/store.ts, ensureSqliteClaimColumns, ensureSqlitePinsTable and
 *    ensureSqliteSiweTables, copied below word for word): idempotency records, account profiles, pins,
 *    spent sign-in nonces, signed-out sessions;
 *  - without billing, the webhooks in a `webhooks.sqlite` of their own, at schema version 11;
 *  - the bytes of pinned code only in `actions/` (that release had no `pinned_code`).
 * The rows are taken from (and removed from) the database a current relayer wrote, `oneFile`.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { MIGRATIONS, migrate, openEngine } from "../../relayer/db";

export const RELAYER_FILE_TABLES = [
  "idempotency",
  "account_profile",
  "pins",
  "siwe_nonces",
  "siwe_revocations",
] as const;
export const WEBHOOK_FILE_TABLES = [
  "webhook_endpoints",
  "webhook_outbox_events",
  "webhook_deliveries",
  "webhook_cursors",
  "webhook_cids",
] as const;
type Row = Record<string, unknown>;
export type PreviousReleaseRows = Record<
  (typeof RELAYER_FILE_TABLES)[number] | (typeof WEBHOOK_FILE_TABLES)[number],
  Row[]
>;

/** The previous release's relayer.sqlite, as its code created it. */
const PREVIOUS_RELAYER_SCHEMA = `
    CREATE TABLE IF NOT EXISTS idempotency (
      scope TEXT NOT NULL,
      key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      status INTEGER NOT NULL,
      body TEXT NOT NULL,
      created_ms INTEGER NOT NULL,
      PRIMARY KEY (scope, key)
    );
    CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency(created_ms);
    CREATE TABLE IF NOT EXISTS account_profile (
      account_id TEXT PRIMARY KEY,
      description TEXT NOT NULL,
      email TEXT,
      created_ms INTEGER NOT NULL
    );
    ALTER TABLE idempotency ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE idempotency ADD COLUMN heartbeat_ms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE idempotency ADD COLUMN writes TEXT NOT NULL DEFAULT '';
    CREATE TABLE IF NOT EXISTS pins (
      account_id TEXT NOT NULL,
      cid TEXT NOT NULL,
      bytes INTEGER NOT NULL,
      created_ms INTEGER NOT NULL,
      PRIMARY KEY (account_id, cid)
    );
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
`;

const removeDatabase = (file: string) => {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) fs.rmSync(f, { force: true });
};

function insertAll(db: BetterSqlite3.Database, table: string, rows: Row[]): void {
  for (const row of rows) {
    const cols = Object.keys(row);
    db.prepare(`INSERT INTO ${table} (${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`).run(
      ...cols.map((c) => row[c]),
    );
  }
}

/**
 * Moves the rows out of `oneFile` (the relayer is stopped) into the previous release's files under
 * `relayerDir`; returns them as they were. `webhooksInOwnFile`: that release ran without billing.
 */
export async function layOutAsPreviousRelease(o: {
  relayerDir: string;
  oneFile: string;
  webhooksInOwnFile: boolean;
}): Promise<PreviousReleaseRows> {
  const rows = {} as PreviousReleaseRows;
  const current = new BetterSqlite3(o.oneFile);
  try {
    const moved = [...RELAYER_FILE_TABLES, ...(o.webhooksInOwnFile ? WEBHOOK_FILE_TABLES : [])];
    for (const t of [...RELAYER_FILE_TABLES, ...WEBHOOK_FILE_TABLES])
      rows[t] = current.prepare(`SELECT * FROM ${t}`).all() as Row[];
    for (const t of [...moved, "pinned_code"]) current.prepare(`DELETE FROM ${t}`).run();
    current.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    current.close();
  }
  const relayerFile = path.join(o.relayerDir, "relayer.sqlite");
  if (path.resolve(o.oneFile) === path.resolve(relayerFile)) removeDatabase(relayerFile);

  const old = new BetterSqlite3(relayerFile);
  try {
    old.pragma("journal_mode = WAL");
    old.exec(PREVIOUS_RELAYER_SCHEMA);
    for (const t of RELAYER_FILE_TABLES) insertAll(old, t, rows[t]);
  } finally {
    old.close();
  }
  if (o.webhooksInOwnFile) {
    const webhooks = openEngine({ sqlitePath: path.join(o.relayerDir, "webhooks.sqlite") });
    try {
      await migrate(
        webhooks,
        MIGRATIONS.filter((m) => m.version <= 11),
      );
      for (const t of WEBHOOK_FILE_TABLES) insertAll(webhooks.sqlite!, t, rows[t]);
    } finally {
      await webhooks.close();
    }
  }
  return rows;
}
