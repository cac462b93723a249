/**
 * The hot tables' periodic vacuum (relayer/db/hotTableVacuum.ts): on PostgreSQL the dead versions that
 * every request's insert-then-delete leaves behind are cleared within a period, not at autovacuum's
 * next visit; on SQLite it does nothing.
 */
import { expect } from "chai";
import pino from "pino";
import { type DataLayer, openDataLayer } from "../../relayer/db";
import { HOT_TABLES, startHotTableVacuum } from "../../relayer/db/hotTableVacuum";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

const quiet = pino({ level: "silent" });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The table's dead versions and manual vacuums, as the server's statistics say now. */
async function tableStats(db: DataLayer, table: string): Promise<{ dead: number; vacuums: number }> {
  await db.exec("SELECT pg_stat_force_next_flush()");
  const [row] = (await db.exec(
    "SELECT n_dead_tup::int AS dead, vacuum_count::int AS vacuums FROM pg_stat_user_tables WHERE relname = $1",
    [table],
  )) as Array<{ dead: number; vacuums: number }>;
  return row;
}

/** Leases admitted and ended, as runs leave them: each a row inserted, then deleted. */
async function churnLeases(db: DataLayer, n: number): Promise<void> {
  for (let i = 0; i < n; i += 100) {
    const ids = Array.from({ length: 100 }, (_, k) => `lease-${i + k}`);
    await db.exec(
      "INSERT INTO execution_leases (lease_id, account_id, expires_ms) SELECT id, 'acct', 0 FROM unnest($1::text[]) AS id",
      [ids],
    );
    await db.exec("DELETE FROM execution_leases WHERE lease_id = ANY($1::text[])", [ids]);
  }
}

describeOnPostgres("data layer: the hot tables' vacuum (postgres)", function () {
  this.timeout(60_000);
  let db: DataLayer;

  before(async () => {
    db = await openDataLayer({ databaseUrl: await freshDatabaseUrl(), sqlitePath: "" });
  });
  after(async () => {
    await db?.close();
  });

  it("names only tables the migrations create", async () => {
    const rows = (await db.exec(
      "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY($1::text[])",
      [[...HOT_TABLES]],
    )) as Array<{ tablename: string }>;
    expect(rows.map((r) => r.tablename).sort()).to.deep.equal([...HOT_TABLES].sort());
  });

  it("clears the dead rows a churn of leases left within a period", async () => {
    await churnLeases(db, 2_000);
    const before = await tableStats(db, "execution_leases");
    expect(before.dead).to.be.greaterThan(1_000);
    const stop = startHotTableVacuum(db, 100, quiet);
    try {
      let after = before;
      for (let i = 0; i < 50 && (after.vacuums === before.vacuums || after.dead > 0); i++) {
        await sleep(100);
        after = await tableStats(db, "execution_leases");
      }
      expect(after.vacuums).to.be.greaterThan(before.vacuums);
      expect(after.dead).to.equal(0);
    } finally {
      await stop();
    }
  });

  it("does nothing once stopped", async () => {
    const stop = startHotTableVacuum(db, 100, quiet);
    await stop();
    const stopped = await tableStats(db, "execution_leases");
    await churnLeases(db, 500);
    await sleep(400);
    const later = await tableStats(db, "execution_leases");
    // vacuum_count counts vacuums run as statements, not autovacuum's visits.
    expect(later.vacuums).to.equal(stopped.vacuums);
  });

  it("is off with a period of 0", async () => {
    const before = await tableStats(db, "execution_leases");
    const stop = startHotTableVacuum(db, 0, quiet);
    await sleep(300);
    await stop();
    expect((await tableStats(db, "execution_leases")).vacuums).to.equal(before.vacuums);
  });
});
