/**
 * The audit log's SQLite writer thread (relayer/audit/sqliteWriter.ts): entries recorded together are
 * written in batches (one transaction each) by a thread with its own connection, and chained there. A
 * batch keeps the order entries were recorded in, and its chain and checkpoints are the ones the main
 * thread would write; an entry is committed (readable by another connection) when its `record` returns,
 * so a crash right after leaves it pending for the next start; a batch that fails is written not at
 * all, each of its callers is told, and nothing of it is lost or written twice.
 */
import { expect } from "chai";
import { openDataLayer } from "../../relayer/db";
import { AuditLog } from "../../relayer/audit/log";
import { exportLines } from "../../relayer/audit/export";
import { entryHash, GENESIS_HASH } from "../../relayer/audit/format";
import type { AuditKind, PendingEntry } from "../../relayer/audit/entries";
import { auditFileFixture, refusalEntry } from "../helpers/auditEntries";
import { verifyAuditExport } from "../../sdk/index";

const ACCOUNT = "11";

const refusal = (i: number, account = ACCOUNT): PendingEntry => refusalEntry(i, account);

interface Row {
  seq: number;
  prev_hash: string;
  hash: string;
  kind: string;
  time_ms: number;
  data: string;
}

describe("audit log: the SQLite writer thread", function () {
  this.timeout(60_000);
  const f = auditFileFixture("writer");
  const identity = f.identity;
  const peek = f.peek.bind(f);

  function openLog(opts: { chainAfterMs?: number; checkpointEvery?: number } = {}, on = f.db): AuditLog {
    return f.openLog(
      { checkpointEvery: opts.checkpointEvery ?? 50, checkpointMs: 3_600_000, sweepMs: 3_600_000, ...opts },
      undefined,
      on,
    );
  }
  const chainOf = (account = ACCOUNT) =>
    peek<Row>(
      "SELECT seq, prev_hash, hash, kind, time_ms, data FROM audit_entries WHERE account_id = ? ORDER BY seq",
      [account],
    );
  async function exportText(log: AuditLog): Promise<string> {
    let out = "";
    for await (const l of exportLines(log.store, ACCOUNT, identity(), {}, Date.now())) out += l;
    return out;
  }

  it("entries recorded together keep their order in the chain; its hashes and checkpoints are the format's", async () => {
    const log = openLog({ chainAfterMs: 0 });
    // 230 requests finishing at once, then 70 more while the first batches are on their way.
    const first = Array.from({ length: 230 }, (_, i) => log.record(refusal(i)));
    await new Promise((r) => setImmediate(r));
    const second = Array.from({ length: 70 }, (_, i) => log.record(refusal(230 + i)));
    await Promise.all([...first, ...second]);
    await log.flush();
    const chain = chainOf();
    expect(chain.map((r) => r.seq)).to.deep.equal(Array.from({ length: 300 }, (_, i) => i + 1));
    expect(chain.map((r) => (JSON.parse(r.data) as { request_id: string }).request_id)).to.deep.equal(
      Array.from({ length: 300 }, (_, i) => `r${i}`),
    );
    let prev = GENESIS_HASH;
    for (const r of chain) {
      expect(r.prev_hash).to.equal(prev);
      const fields = { account: ACCOUNT, seq: r.seq, prev_hash: r.prev_hash, kind: r.kind as AuditKind };
      expect(entryHash({ ...fields, time_ms: r.time_ms, data: JSON.parse(r.data) })).to.equal(r.hash);
      prev = r.hash;
    }
    // Exactly every 50 entries, though one batch chains 230: the 70 are chained before the heads the 230
    // made due are signed and stored (the thread counts from the heads it reported due; without that,
    // 231 and 281).
    const cps = peek<{ seq: number; head_hash: string }>(
      "SELECT seq, head_hash FROM audit_checkpoints WHERE account_id = ? ORDER BY seq",
      [ACCOUNT],
    );
    expect(cps.map((c) => c.seq)).to.deep.equal([50, 100, 150, 200, 250, 300]);
    for (const c of cps) expect(c.head_hash).to.equal(chain[c.seq - 1].hash);
    expect(peek<{ n: number }>("SELECT COUNT(*) AS n FROM audit_pending")[0].n).to.equal(0);
    const v = verifyAuditExport(await exportText(log), { identity: identity() });
    expect(v.ok, JSON.stringify(v.break)).to.equal(true);
    expect(v.signedThrough).to.equal(300);
  });

  it("an entry is committed and chained when record returns: a crash right after loses nothing, a restart adds nothing", async () => {
    const log = openLog({ chainAfterMs: 3_600_000 });
    await Promise.all(Array.from({ length: 20 }, (_, i) => log.record(refusal(i))));
    // What another process finds right now, as after a kill -9 of this one: every entry, chained.
    expect(peek<{ n: number }>("SELECT COUNT(*) AS n FROM audit_pending")[0].n).to.equal(0);
    expect(chainOf().map((r) => (JSON.parse(r.data) as { request_id: string }).request_id)).to.deep.equal(
      Array.from({ length: 20 }, (_, i) => `r${i}`),
    );
    // The restarted process: another data layer on the file; its first sweep finds nothing to add.
    const db2 = await openDataLayer({ sqlitePath: f.file });
    try {
      const restarted = openLog({}, db2);
      await restarted.sweep();
      await log.flush();
      expect(chainOf()).to.have.length(20);
      await restarted.stop();
    } finally {
      await db2.close();
    }
  });

  it("entries left pending (a restart's leftovers, path-B writes) are chained before the ones recorded after them, once each", async () => {
    const log = openLog({ chainAfterMs: 3_600_000 });
    await Promise.all([0, 1].map((i) => log.record(refusal(i))));
    // Written to audit_pending on the main connection, as the chain follower's transaction writes
    // path-B entries, or as a process of the earlier design left them when it was killed.
    for (const i of [2, 3, 4]) await f.db.transaction((tx) => log.store.enqueue(refusal(i), tx));
    await Promise.all([5, 6].map((i) => log.record(refusal(i))));
    await log.sweep();
    const chain = chainOf();
    expect(chain.map((r) => (JSON.parse(r.data) as { request_id: string }).request_id)).to.deep.equal(
      Array.from({ length: 7 }, (_, i) => `r${i}`),
    );
    expect(chain.map((r) => r.seq)).to.deep.equal([1, 2, 3, 4, 5, 6, 7]);
    expect(peek<{ n: number }>("SELECT COUNT(*) AS n FROM audit_pending")[0].n).to.equal(0);
    const v = verifyAuditExport(await exportText(log), { identity: identity() });
    expect(v.ok, JSON.stringify(v.break)).to.equal(true);
  });

  it("a batch that fails is written not at all, its callers are told, and nothing is lost or written twice", async () => {
    const log = openLog({ chainAfterMs: 0 });
    await Promise.all([0, 1].map((i) => log.record(refusal(i))));
    // r2 goes alone; the three recorded while it is on its way go together in the next batch, with one
    // entry the table refuses (no kind: NOT NULL) among them.
    const lead = log.record(refusal(2));
    await new Promise((r) => setImmediate(r)); // r2's batch (one turn's entries) is on its way
    const broken = { ...refusal(99), kind: null as unknown as "refusal" };
    const batch = [log.record(refusal(3)), log.record(broken), log.record(refusal(4))];
    await lead;
    const outcomes = await Promise.allSettled(batch);
    expect(outcomes.map((o) => o.status)).to.deep.equal(["rejected", "rejected", "rejected"]);
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).to.match(/NOT NULL/);
    await log.flush();
    const ids = () => chainOf().map((r) => (JSON.parse(r.data) as { request_id: string }).request_id);
    expect(ids()).to.deep.equal(["r0", "r1", "r2"]);
    expect(peek<{ n: number }>("SELECT COUNT(*) AS n FROM audit_pending")[0].n).to.equal(0);
    // The callers retry what they were refused (a request that failed is answered as failed, not lost).
    await Promise.all([3, 4, 5].map((i) => log.record(refusal(i))));
    await log.flush();
    expect(ids()).to.deep.equal(["r0", "r1", "r2", "r3", "r4", "r5"]);
    const v = verifyAuditExport(await exportText(log), { identity: identity() });
    expect(v.ok, JSON.stringify(v.break)).to.equal(true);
  });

  it("writes from its own thread only for a database in a file: in memory, the main connection writes", async () => {
    const mem = await openDataLayer({ sqlitePath: ":memory:" });
    try {
      const log = openLog({ chainAfterMs: 0 }, mem);
      await Promise.all([0, 1, 2].map((i) => log.record(refusal(i))));
      await log.flush();
      const rows = (await mem.exec("SELECT seq FROM audit_entries ORDER BY seq")) as Array<{ seq: number }>;
      expect(rows.map((r) => r.seq)).to.deep.equal([1, 2, 3]);
      await log.stop();
    } finally {
      await mem.close();
    }
  });
});
