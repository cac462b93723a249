/** Audit-log entries for tests of the log's store and chain (test/audit/*). */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import pino from "pino";
import { Enclave } from "../../enclave";
import type { PendingEntry } from "../../relayer/audit/entries";
import { AuditLog, type AuditOptions } from "../../relayer/audit/log";
import { openDataLayer, type DataLayer } from "../../relayer/db";

/** The i-th refusal entry of `account`: a usage key refused a scope, at a time that orders by i. */
export function refusalEntry(i: number, account: string): PendingEntry {
  return {
    account,
    kind: "refusal",
    timeMs: 1_700_000_000_000 + i,
    data: {
      request_id: `r${i}`,
      method: "POST",
      route: "/core/v1/groups",
      key_hash_prefix: "0x12345678",
      principal: { kind: "usage_key", address: "0x" + "ab".repeat(20) },
      code: "scope_denied",
      suppressed: 0,
    },
    principal: "0x" + "ab".repeat(20),
    cid: null,
    pkps: [],
    outcome: "refused",
  };
}

/**
 * A file-backed SQLite audit log per test (the writer thread's case): a fresh data layer and enclave
 * before each test, every log opened through `openLog` stopped and the folder removed after it.
 * `peek` reads through another connection: what a restarted process would find committed.
 */
export interface AuditFileFixture {
  dir: string;
  file: string;
  db: DataLayer;
  enclave: Enclave;
  logs: AuditLog[];
  identity(): string;
  openLog(options: AuditOptions, extra?: AuditStoreHooks, on?: DataLayer): AuditLog;
  peek<T>(sqlText: string, params?: unknown[]): T[];
}

type AuditStoreHooks = ConstructorParameters<typeof AuditLog>[5];

export function auditFileFixture(tag: string): AuditFileFixture {
  const f: AuditFileFixture = {
    dir: "",
    file: "",
    db: undefined as unknown as DataLayer,
    enclave: undefined as unknown as Enclave,
    logs: [] as AuditLog[],
    identity: () => f.enclave.attestationIdentity().address,
    openLog(options, extra, on = f.db) {
      const log = new AuditLog(
        on,
        { address: f.identity(), sign: (d) => f.enclave.signAuditCheckpoint(d) },
        "test",
        options,
        pino({ level: "silent" }),
        extra,
      );
      f.logs.push(log);
      return log;
    },
    peek<T>(sqlText: string, params: unknown[] = []): T[] {
      const other = new BetterSqlite3(f.file, { readonly: true });
      try {
        return other.prepare(sqlText).all(...params) as T[];
      } finally {
        other.close();
      }
    },
  };
  beforeEach(async () => {
    f.dir = fs.mkdtempSync(path.join(os.tmpdir(), `sigil-audit-${tag}-`));
    f.file = path.join(f.dir, "relayer.sqlite");
    f.db = await openDataLayer({ sqlitePath: f.file });
    f.enclave = Enclave.fromRootKey(crypto.randomBytes(32));
  });
  afterEach(async () => {
    for (const l of f.logs.splice(0)) await l.stop();
    await f.db.close();
    fs.rmSync(f.dir, { recursive: true, force: true });
  });
  return f;
}
