import { expect } from "chai";
import BetterSqlite3 from "better-sqlite3";
import { join } from "node:path";
import { MIGRATIONS, SimulatedProcessor, createBilling, migrate, readVersion } from "../../relayer/billing";
import { openDatabase } from "../../relayer/billing/index";
import { forwardRequest, principalFor, tempDir } from "./harness";

describe("billing: schema migrations", function () {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => (tmp = tempDir()));
  afterEach(() => tmp.cleanup());

  const latest = Math.max(...MIGRATIONS.map((m) => m.version));

  it("apply on an empty file, in WAL mode, up to the latest version", function () {
    const db = openDatabase(join(tmp.dir, "sub", "billing.sqlite"));
    expect(readVersion(db)).to.equal(latest);
    expect(db.pragma("journal_mode", { simple: true })).to.equal("wal");
    const tables = (
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{
        name: string;
      }>
    ).map((t) => t.name);
    expect(tables).to.include.members([
      "accounts",
      "ledger_entries",
      "payment_intents",
      "webhook_events",
      "key_spend",
      "sim_intents",
      "schema_version",
    ]);
    db.close();
  });

  it("are idempotent on reopen: same version, same ledger id, data kept", function () {
    const path = join(tmp.dir, "billing.sqlite");
    const b1 = createBilling({ dbPath: path, processor: new SimulatedProcessor(), signupCreditCents: 50 });
    b1.onAccountCreated("9");
    b1.chargeWrite(principalFor("9"), "add_group", forwardRequest("0xabc"));
    const id = b1.ledgerId;
    b1.close();
    const b2 = createBilling({ dbPath: path, processor: new SimulatedProcessor() });
    expect(b2.ledgerId).to.equal(id);
    expect(b2.audit("9")).to.deep.equal({ balance_cents: 49, ledger_sum_cents: 49 });
    b2.close();
    const db = new BetterSqlite3(path);
    expect(readVersion(db)).to.equal(latest);
    expect((db.prepare("SELECT COUNT(*) AS n FROM schema_version").get() as { n: number }).n).to.equal(1);
    expect((db.prepare("SELECT COUNT(*) AS n FROM ledger_meta").get() as { n: number }).n).to.equal(1);
    db.close();
  });

  it("a ledger holding tx-hash write references (before per-request references) opens and keeps charging", function () {
    const path = join(tmp.dir, "billing.sqlite");
    const old = createBilling({ dbPath: path, processor: new SimulatedProcessor(), signupCreditCents: 50 });
    old.onAccountCreated("9");
    old.close();
    // The row an older build wrote for a write: reference `write:<transaction hash>`.
    const legacyRef = "write:0x" + "ab".repeat(32);
    const raw = new BetterSqlite3(path);
    raw
      .prepare(
        `INSERT INTO ledger_entries (account_id, kind, amount_cents, balance_after_cents, reference, key_address, operation, created_at)
         VALUES ('9', 'debit', 1, 49, ?, NULL, 'create_pkp', 0)`,
      )
      .run(legacyRef);
    raw.prepare("UPDATE accounts SET balance_cents = 49 WHERE account_id = '9'").run();
    raw.close();
    const b = createBilling({ dbPath: path, processor: new SimulatedProcessor() });
    expect(b.chargeWrite(principalFor("9"), "create_pkp", forwardRequest("after upgrade")).applied).to.equal(
      true,
    );
    expect(b.audit("9")).to.deep.equal({ balance_cents: 48, ledger_sum_cents: 48 });
    expect(b.history("9", 0, 10).items.map((i) => i.reference)).to.include(legacyRef);
    b.close();
  });

  it("a newer migration appended to the list is applied once, on the next open", function () {
    const db = openDatabase(join(tmp.dir, "billing.sqlite"));
    let runs = 0;
    const next = [
      ...MIGRATIONS,
      {
        version: latest + 1,
        description: "test column",
        up: (d: typeof db) => {
          runs++;
          d.exec("ALTER TABLE accounts ADD COLUMN note TEXT");
        },
      },
    ];
    expect(migrate(db, next)).to.equal(latest + 1);
    expect(migrate(db, next)).to.equal(latest + 1);
    expect(runs).to.equal(1);
    db.close();
  });

  it("a file written by a newer version is refused, not used with an older schema", function () {
    const path = join(tmp.dir, "billing.sqlite");
    const db = openDatabase(path);
    db.prepare("UPDATE schema_version SET version = ?").run(latest + 1);
    db.close();
    expect(() => createBilling({ dbPath: path, processor: new SimulatedProcessor() })).to.throw(
      `billing database is at schema version ${latest + 1}, newer than this code knows (${latest})`,
    );
    const again = new BetterSqlite3(path);
    expect(readVersion(again)).to.equal(latest + 1);
    again.close();
  });

  it("a migration that fails rolls back completely and leaves the version unchanged", function () {
    const db = openDatabase(join(tmp.dir, "billing.sqlite"));
    const broken = [
      ...MIGRATIONS,
      {
        version: latest + 1,
        description: "half-done",
        up: (d: typeof db) => {
          d.exec("CREATE TABLE half_done (x INTEGER)");
          throw new Error("boom");
        },
      },
    ];
    expect(() => migrate(db, broken)).to.throw("boom");
    expect(readVersion(db)).to.equal(latest);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'half_done'").get()).to.equal(undefined);
    db.close();
  });
});
