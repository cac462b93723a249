/**
 * The relayer's own small SQLite database under dataDir (billing keeps its ledger separately): idempotency
 * records and the off-chain account profile (description, e-mail: personal data stays off chain).
 */
import Database from "better-sqlite3";
import * as path from "node:path";

export type Db = Database.Database;

export function openRelayerDb(dataDir: string): Db {
  const db = new Database(path.join(dataDir, "relayer.sqlite"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec(`
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
  `);
  return db;
}

export interface AccountProfile {
  description: string;
  email: string | null;
  createdMs: number;
}

export class ProfileStore {
  private readonly insert;
  private readonly select;

  constructor(db: Db) {
    this.insert = db.prepare(
      "INSERT OR REPLACE INTO account_profile (account_id, description, email, created_ms) VALUES (?, ?, ?, ?)",
    );
    this.select = db.prepare(
      "SELECT description, email, created_ms AS createdMs FROM account_profile WHERE account_id = ?",
    );
  }

  put(accountId: string, p: AccountProfile): void {
    this.insert.run(accountId, p.description, p.email, p.createdMs);
  }

  get(accountId: string): AccountProfile | undefined {
    return this.select.get(accountId) as AccountProfile | undefined;
  }
}
