/**
 * Migration 24 (docs/audit-log.md, "What it costs"): on PostgreSQL `audit_pending` keeps one index,
 * (account_id, id), which serves every query of the queue; its primary key's index on id alone was a
 * second index entry written, deleted and vacuumed for every entry. The chaining pass's DELETE names
 * the account, so the one index finds its rows (no scan of the queue's dead rows).
 */
import { expect } from "chai";
import { Client } from "pg";
import { openDataLayer, type DataLayer } from "../../relayer/db";
import { AuditStore } from "../../relayer/audit/store";
import type { PendingEntry } from "../../relayer/audit/entries";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

describeOnPostgres("audit log: audit_pending's one index (postgres)", function () {
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
});
