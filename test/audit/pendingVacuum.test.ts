/**
 * Migration 23 (docs/audit-log.md, "What it costs"): on PostgreSQL VACUUM never truncates
 * `audit_pending`, a queue whose end is empty after every chaining pass; a truncation took an exclusive
 * lock the request path's INSERTs queued behind and made every backend process an invalidation.
 */
import { expect } from "chai";
import { Client } from "pg";
import { openDataLayer, type DataLayer } from "../../relayer/db";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

describeOnPostgres("audit log: VACUUM keeps audit_pending's pages (postgres)", function () {
  this.timeout(60_000);
  let db: DataLayer;
  let c: Client;

  before(async () => {
    const url = await freshDatabaseUrl();
    db = await openDataLayer({ databaseUrl: url, sqlitePath: "" });
    c = new Client({ connectionString: url });
    await c.connect();
  });
  after(async () => {
    await c?.end();
    await db?.close();
  });

  it("a table emptied by chaining keeps its pages through VACUUM", async () => {
    await c.query(
      `INSERT INTO audit_pending (account_id, kind, time_ms, data, principal, cid, pkps, outcome)
       SELECT '1', 'refusal', g, repeat('x', 500), null, null, '', 'refused' FROM generate_series(1, 500) g`,
    );
    await c.query("DELETE FROM audit_pending");
    await c.query("VACUUM audit_pending");
    const size = async () =>
      Number((await c.query<{ n: string }>("SELECT pg_relation_size('audit_pending') AS n")).rows[0].n);
    expect(await size()).to.be.above(0);
    // What the setting prevents: the same VACUUM with truncation allowed gives the empty pages back.
    await c.query("ALTER TABLE audit_pending SET (vacuum_truncate = true)");
    await c.query("VACUUM audit_pending");
    expect(await size()).to.equal(0);
  });
});
