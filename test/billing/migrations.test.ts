import { expect } from "chai";
import BetterSqlite3 from "better-sqlite3";
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { SimulatedProcessor, createBilling } from "../../relayer/billing";
import {
  type DataLayer,
  MIGRATIONS,
  type Migration,
  migrate,
  openEngine,
  readVersion,
} from "../../relayer/db";
import { ENGINES, describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { forwardRequest, principalFor, tempDir } from "./harness";

const latest = Math.max(...MIGRATIONS.map((m) => m.version));

for (const engine of ENGINES)
  describe(`data layer: schema migrations (${engine})`, function () {
    this.timeout(60_000);
    let tmp: ReturnType<typeof tempDir>;
    let url: string | undefined;
    const opened: DataLayer[] = [];
    beforeEach(async () => {
      tmp = tempDir();
      url = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    });
    afterEach(async () => {
      for (const d of opened.splice(0)) await d.close();
      tmp.cleanup();
    });
    const open = () => {
      const d = openEngine({ databaseUrl: url, sqlitePath: join(tmp.dir, "sub", "billing.sqlite") });
      opened.push(d);
      return d;
    };
    const billingAt = (extra: { signupCreditCents?: number } = {}) =>
      createBilling({
        dbPath: join(tmp.dir, "sub", "billing.sqlite"),
        databaseUrl: url,
        processor: new SimulatedProcessor(),
        chargeFlushMs: 0,
        ...extra,
      });

    it("apply on an empty database up to the latest version, every table present", async function () {
      const d = open();
      expect(await migrate(d)).to.equal(latest);
      const tables = (
        (await d.exec(
          engine === "sqlite"
            ? "SELECT name FROM sqlite_master WHERE type = 'table'"
            : "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
        )) as Array<{ name: string }>
      ).map((t) => t.name);
      expect(tables).to.include.members([
        "accounts",
        "ledger_entries",
        "payment_intents",
        "webhook_events",
        "key_spend",
        "sim_intents",
        "sim_idempotency",
        "idempotency",
        "rate_buckets",
        "execution_leases",
        "account_profile",
        "pinned_code",
        "audit_pending",
        "audit_entries",
        "audit_heads",
        "audit_checkpoints",
        "audit_chain_cursor",
        "policy_windows",
        "trigger_chain_cursors",
        "schema_version",
      ]);
    });

    it("are idempotent on reopen: same version, same ledger id, data kept", async function () {
      const b1 = await billingAt({ signupCreditCents: 50 });
      await b1.onAccountCreated("9");
      await b1.chargeWrite(principalFor("9"), "add_group", forwardRequest("0xabc"));
      const id = b1.ledgerId;
      await b1.close();
      const b2 = await billingAt();
      expect(b2.ledgerId).to.equal(id);
      expect(await b2.audit("9")).to.deep.equal({ balance_cents: 49, ledger_sum_cents: 49 });
      expect(await readVersion(b2.db)).to.equal(latest);
      expect(await b2.db.exec("SELECT COUNT(*) AS n FROM schema_version")).to.deep.equal([{ n: 1 }]);
      await b2.close();
    });

    it("a migration appended to the list is applied once, on the next open", async function () {
      const d = open();
      await migrate(d);
      let runs = 0;
      const next: Migration[] = [
        ...MIGRATIONS,
        {
          version: latest + 1,
          description: "test column",
          async up(m) {
            runs++;
            await m.run(m.db.schema.alterTable("accounts").addColumn("note", "text"));
          },
        },
      ];
      expect(await migrate(d, next)).to.equal(latest + 1);
      expect(await migrate(d, next)).to.equal(latest + 1);
      expect(runs).to.equal(1);
    });

    it("a database written by a newer version is refused, not used with an older schema", async function () {
      const d = open();
      await migrate(d);
      await d.exec(`UPDATE schema_version SET version = ${latest + 1}`);
      let message = "";
      await billingAt().then(
        () => undefined,
        (e: Error) => (message = e.message),
      );
      expect(message).to.equal(
        `billing database is at schema version ${latest + 1}, newer than this code knows (${latest}); run a newer build`,
      );
      expect(await readVersion(d)).to.equal(latest + 1);
    });

    it("a migration that fails rolls back completely and leaves the version unchanged", async function () {
      const d = open();
      await migrate(d);
      const broken: Migration[] = [
        ...MIGRATIONS,
        {
          version: latest + 1,
          description: "half-done",
          async up(m) {
            await m.run(m.db.schema.createTable("half_done").addColumn("x", "integer"));
            throw new Error("boom");
          },
        },
      ];
      let message = "";
      await migrate(d, broken).catch((e: Error) => (message = e.message));
      expect(message).to.equal("boom");
      expect(await readVersion(d)).to.equal(latest);
      const left = await d.exec(
        engine === "sqlite"
          ? "SELECT name FROM sqlite_master WHERE name = 'half_done'"
          : "SELECT table_name FROM information_schema.tables WHERE table_name = 'half_done'",
      );
      expect(left).to.deep.equal([]);
    });
  });

describe("data layer: upgrading a SQLite ledger written by the previous build", function () {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => (tmp = tempDir()));
  afterEach(() => tmp.cleanup());

  it("opens at version 1, migrates to the latest, keeps balances, spend, caps and charge references", async function () {
    const path = join(tmp.dir, "ledger.sqlite");
    // Written by the better-sqlite3-only code before the data layer (schema version 1).
    copyFileSync(join(__dirname, "fixtures", "ledger-v1.sqlite"), path);
    const raw = new BetterSqlite3(path);
    expect(raw.prepare("SELECT MAX(version) AS v FROM schema_version").get()).to.deep.equal({ v: 1 });
    raw.close();
    const b = await createBilling({ dbPath: path, processor: new SimulatedProcessor(), chargeFlushMs: 0 });
    expect(await readVersion(b.db)).to.equal(latest);
    const key = "0x00000000000000000000000000000000000000aa";
    expect(await b.audit("7")).to.deep.equal({ balance_cents: 97, ledger_sum_cents: 97 });
    expect(await b.keySpend(key)).to.deep.equal({ spent_cents: 3, cap_cents: 500 });
    const p = principalFor("7", "usage", key);
    // The execution charged before the upgrade is not charged again; a new one is.
    expect(await b.chargeExecution(p, 1500, "req-1")).to.deep.equal({ charged_cents: 0, applied: false });
    expect(await b.chargeExecution(p, 10, "req-2")).to.deep.equal({ charged_cents: 1, applied: true });
    expect(await b.audit("7")).to.deep.equal({ balance_cents: 96, ledger_sum_cents: 96 });
    await b.close();
  });
});

describeOnPostgres(
  "data layer: migrations on PostgreSQL with several instances starting at once",
  function () {
    this.timeout(60_000);

    it("eight concurrent migrators apply each migration exactly once (advisory lock)", async function () {
      const url = await freshDatabaseUrl();
      const layers = Array.from({ length: 8 }, () => openEngine({ databaseUrl: url, sqlitePath: "" }));
      try {
        let runs = 0;
        const counted: Migration[] = [
          ...MIGRATIONS,
          {
            version: latest + 1,
            description: "counts its runs",
            async up(m) {
              runs++;
              // Long enough that the migrators overlap: without the lock several would be in here.
              await m.run("SELECT pg_sleep(0.2)");
              await m.run(m.db.schema.createTable("once_only").addColumn("x", "integer"));
            },
          },
        ];
        const versions = await Promise.all(layers.map((l) => migrate(l, counted)));
        expect(versions).to.deep.equal(Array(8).fill(latest + 1));
        expect(runs).to.equal(1);
        expect(await layers[0].exec("SELECT COUNT(*) AS n FROM ledger_meta")).to.deep.equal([{ n: 1 }]);
      } finally {
        for (const l of layers) await l.close();
      }
    });
  },
);
