/**
 * `audit_pending` on PostgreSQL, the queue requests write their entries to before they answer
 * (docs/audit-log.md, "What it costs"):
 *  - migration 24: it keeps one index, (account_id, id), which serves every query of the queue; its
 *    primary key's index on id alone was a second index entry written, deleted and vacuumed for every
 *    entry. The chaining pass's DELETE names the account, so the one index finds its rows;
 *  - migration 23: VACUUM never truncates it (its end is empty after every chaining pass); a truncation
 *    took an exclusive lock the request path's INSERTs queued behind and made every backend process an
 *    invalidation.
 */
import { expect } from "chai";
import { Client } from "pg";
import { openDataLayer, type DataLayer } from "../../relayer/db";
import { AuditStore } from "../../relayer/audit/store";
import type { PendingEntry } from "../../relayer/audit/entries";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

describeOnPostgres("audit log: the audit_pending queue (postgres)", function () {
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

  it("has only the (account_id, id) index", async () => {
    const { rows } = await c.query<{ indexdef: string }>(
      "SELECT indexdef FROM pg_indexes WHERE tablename = 'audit_pending' ORDER BY indexname",
    );
    expect(rows.map((r) => r.indexdef.replace(/^.* USING /, ""))).to.deep.equal(["btree (account_id, id)"]);
  });

  it("chains each account's pending entries once, in order, and leaves the others pending", async () => {
    const store = new AuditStore(db, { address: "0x" + "11".repeat(20), sign: () => "0x" + "22".repeat(65) });
    for (let i = 0; i < 30; i++)
      await store.enqueue({
        account: String(1 + (i % 3)),
        kind: "refusal",
        timeMs: 1_000 + i,
        data: { n: i } as unknown as PendingEntry["data"],
        principal: null,
        cid: null,
        pkps: [],
        outcome: "refused",
      });
    expect(await store.chain("2")).to.equal(10);
    const left = await c.query<{ account_id: string; n: string }>(
      "SELECT account_id, COUNT(*) AS n FROM audit_pending GROUP BY account_id ORDER BY account_id",
    );
    expect(left.rows.map((r) => [r.account_id, Number(r.n)])).to.deep.equal([
      ["1", 10],
      ["3", 10],
    ]);
    const chained = await c.query<{ seq: string; time_ms: string }>(
      "SELECT seq, time_ms FROM audit_entries WHERE account_id = '2' ORDER BY seq",
    );
    expect(chained.rows.map((r) => Number(r.time_ms))).to.deep.equal(
      Array.from({ length: 10 }, (_, k) => 1_000 + 1 + 3 * k),
    );
    await store.close();
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
