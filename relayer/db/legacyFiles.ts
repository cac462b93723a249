/**
 * The upgrade of a data folder written by a release before migration 12, on its first start: that
 * release kept, beside the versioned database (the billing ledger, or PostgreSQL), an unversioned
 * `relayer.sqlite` (idempotency records, account profiles, pins, sign-in nonces, signed-out sessions)
 * and, without billing and PostgreSQL, the webhooks in a `webhooks.sqlite` of their own; the bytes of
 * pinned code were only in the `actions/` folder. Now every table is in the one database the relayer
 * opens (relayer/index.ts), so their rows are copied into it, and the old files removed.
 *
 * Crash safety: the old relayer file is first set aside under a name no release opens (so the one
 * database may take its name), each file is copied in one transaction, and removed only after that
 * commit. A crash before the commit leaves the file to be copied on the next start; a crash after it,
 * before the removal, copies the same rows again on the next start, which changes nothing (rows that
 * are already there are kept: ON CONFLICT DO NOTHING), since nothing was served in between.
 */
import BetterSqlite3 from "better-sqlite3";
import * as fs from "node:fs";
import * as path from "node:path";
import { computeCid } from "../../enclave";
import type { DataLayer, Sql } from "./engine";

/**
 * The relayer's own database file when it has no other (relayer/relayerDatabase.ts), and the name of
 * the unversioned file earlier releases kept; the name that one is set aside under until copied.
 */
export const RELAYER_SQLITE_FILE = "relayer.sqlite";
const SET_ASIDE = "relayer.sqlite.pre-upgrade";
const LEGACY_WEBHOOKS_FILE = "webhooks.sqlite";

/** The tables each old file holds rows of that the one database must keep. */
const RELAYER_TABLES = ["idempotency", "account_profile", "pins", "siwe_nonces", "siwe_revocations"];
const WEBHOOK_TABLES = [
  "webhook_endpoints",
  "webhook_outbox_events",
  "webhook_deliveries",
  "webhook_cursors",
  "webhook_cids",
];

export interface UpgradeReport {
  /** Rows copied per table. */
  rows: Record<string, number>;
  /** Pinned code files copied from `actions/`. */
  pinnedCode: number;
  /** The old files removed. */
  files: string[];
}

const exists = (file: string) => fs.existsSync(file);
const removeDatabaseFiles = (file: string) => {
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) fs.rmSync(f, { force: true });
};

/**
 * Sets an old-release `relayer.sqlite` (one without `schema_version`) aside, so the one database may
 * be opened under that name. Its WAL is folded into it first, so the file set aside is complete alone.
 * Run before the one database is opened; does nothing on a folder already upgraded.
 */
export function setAsideLegacyRelayerFile(dataDir: string): void {
  const file = path.join(dataDir, RELAYER_SQLITE_FILE);
  if (!exists(file)) return;
  const db = new BetterSqlite3(file);
  let legacy: boolean;
  try {
    legacy = !db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
      .get();
    if (legacy) {
      db.pragma("wal_checkpoint(TRUNCATE)");
      db.pragma("journal_mode = DELETE");
    }
  } finally {
    db.close();
  }
  if (!legacy) return;
  fs.renameSync(file, path.join(dataDir, SET_ASIDE));
  removeDatabaseFiles(file);
}

/**
 * Copies what the old files of `dataDir` hold into `target` and removes them; returns what it did
 * (nothing on a folder already upgraded). `setAsideLegacyRelayerFile` must have run first.
 */
export async function importLegacyFiles(dataDir: string, target: DataLayer): Promise<UpgradeReport> {
  const report: UpgradeReport = { rows: {}, pinnedCode: 0, files: [] };
  const relayerFile = path.join(dataDir, SET_ASIDE);
  if (exists(relayerFile)) {
    await copyTables(relayerFile, RELAYER_TABLES, target, report, (tx) =>
      copyPinnedCode(path.join(dataDir, "actions"), tx, report),
    );
    report.files.push(RELAYER_SQLITE_FILE);
  }
  const webhooksFile = path.join(dataDir, LEGACY_WEBHOOKS_FILE);
  if (exists(webhooksFile)) {
    await copyTables(webhooksFile, WEBHOOK_TABLES, target, report);
    report.files.push(LEGACY_WEBHOOKS_FILE);
  }
  return report;
}

/** Copies `tables` (those the file has) in one transaction, then removes the file. */
async function copyTables(
  file: string,
  tables: readonly string[],
  target: DataLayer,
  report: UpgradeReport,
  alsoInTransaction?: (tx: Sql) => Promise<void>,
): Promise<void> {
  const source = new BetterSqlite3(file, { readonly: true, fileMustExist: true });
  try {
    await target.transaction(async (tx) => {
      for (const table of tables) {
        if (!source.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table))
          continue;
        const columns = (source.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).map(
          (c) => c.name,
        );
        const slots = columns.map((_, i) => (tx.kind === "postgres" ? `$${i + 1}` : "?")).join(", ");
        const insert = `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${slots}) ON CONFLICT DO NOTHING`;
        let n = 0;
        for (const row of source
          .prepare(`SELECT ${columns.join(", ")} FROM ${table}`)
          .raw()
          .iterate())
          n += (await tx.exec(`${insert} RETURNING 1`, row as unknown[])).length;
        report.rows[table] = (report.rows[table] ?? 0) + n;
      }
      await alsoInTransaction?.(tx);
    });
  } finally {
    source.close();
  }
  removeDatabaseFiles(file);
}

/** Every file of the old content store whose bytes hash to its name, into `pinned_code`. */
async function copyPinnedCode(dir: string, tx: Sql, report: UpgradeReport): Promise<void> {
  if (!exists(dir)) return;
  const insert =
    tx.kind === "postgres"
      ? "INSERT INTO pinned_code (cid, code, created_ms) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1"
      : "INSERT INTO pinned_code (cid, code, created_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1";
  for (const name of fs.readdirSync(dir)) {
    if (name.startsWith(".")) continue; // a temporary file of an interrupted write
    const bytes = fs.readFileSync(path.join(dir, name));
    // A file altered on disk is left out: it would never be served anyway.
    if ((await computeCid(new Uint8Array(bytes)).catch(() => null)) !== name) continue;
    const { mtimeMs } = fs.statSync(path.join(dir, name));
    report.pinnedCode += (await tx.exec(insert, [name, bytes, Math.floor(mtimeMs)])).length;
  }
}
