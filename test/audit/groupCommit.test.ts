/**
 * The audit log's group commit (relayer/audit/store.ts, docs/audit-log.md "What it costs"): while runs
 * are still in the executor (`moreSoon`), an entry waits up to `groupCommitMs` for others to share its
 * transaction; with nothing else running it goes at once; a group that waited is written as one
 * transaction, in the order recorded; the wait is bounded even when more keeps coming; and stopping
 * the log writes what was waiting. On SQLite in a file (the writer thread) and in memory (the main
 * connection, as PostgreSQL's path); and in a running service, one request at a time never waits.
 */
import { expect } from "chai";
import { openDataLayer } from "../../relayer/db";
import { AuditLog } from "../../relayer/audit/log";
import { auditFileFixture, refusalEntry } from "../helpers/auditEntries";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

const ACCOUNT = "12";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("audit log: group commit", function () {
  this.timeout(60_000);
  const f = auditFileFixture("group");

  function openLog(groupCommitMs: number, moreSoon: () => boolean, on = f.db): AuditLog {
    return f.openLog(
      { groupCommitMs, checkpointMs: 3_600_000, sweepMs: 3_600_000, chainAfterMs: 0 },
      { moreSoon },
      on,
    );
  }
  /** What another connection (a restarted process) finds committed: the request ids, in chain order. */
  function committed(): string[] {
    return f
      .peek<{ data: string }>("SELECT data FROM audit_entries WHERE account_id = ? ORDER BY seq", [ACCOUNT])
      .map((r) => (JSON.parse(r.data) as { request_id: string }).request_id);
  }
  /** Resolves to the time (performance.now()) the entry's record answered. */
  const answeredAt = (p: Promise<void>) => p.then(() => performance.now());

  it("while runs are in progress, entries recorded apart share one transaction, committed in order", async () => {
    const log = openLog(1_000, () => true);
    const t0 = performance.now();
    const first = answeredAt(log.record(refusalEntry(0, ACCOUNT)));
    await sleep(50);
    // Not written yet: it waits for the others (a request answers only once its entry is committed).
    expect(committed()).to.deep.equal([]);
    const rest = [1, 2].map((i) => answeredAt(log.record(refusalEntry(i, ACCOUNT))));
    const times = await Promise.all([first, ...rest]);
    // One transaction: all three answered at once, at the window's end (a second after the first).
    expect(Math.min(...times) - t0).to.be.at.least(900);
    expect(Math.max(...times) - Math.min(...times)).to.be.below(50);
    expect(committed()).to.deep.equal(["r0", "r1", "r2"]);
  });

  it("with nothing else running an entry goes at once; a group goes once it is large, without waiting out the window", async () => {
    let running = false;
    const log = openLog(10_000, () => running);
    const t0 = performance.now();
    await log.record(refusalEntry(0, ACCOUNT));
    expect(performance.now() - t0).to.be.below(2_000);
    expect(committed()).to.deep.equal(["r0"]);
    // Runs in progress, and fifty entries: the group is full, it goes now.
    running = true;
    const t1 = performance.now();
    const group = Array.from({ length: 50 }, (_, i) => log.record(refusalEntry(1 + i, ACCOUNT)));
    await Promise.all(group);
    expect(performance.now() - t1).to.be.below(2_000);
    expect(committed()).to.have.length(51);
  });

  it("the wait is bounded while more keeps coming, and stopping the log writes what still waits", async () => {
    const log = openLog(200, () => true);
    const answered: Array<Promise<number>> = [];
    // One entry every 25 ms for about 1.5 s (longer on a busy machine): each waits at most its window
    // (200 ms), never for the stream to end. The bound is the stream's end, not a number of
    // milliseconds, so a machine slow to start the writer thread cannot fail it.
    for (let i = 0; i < 60; i++) {
      answered.push(answeredAt(log.record(refusalEntry(i, ACCOUNT))));
      await sleep(25);
    }
    const lastRecordedAt = performance.now();
    const firstAnswered = await answered[0];
    expect(firstAnswered).to.be.below(lastRecordedAt);
    await Promise.all(answered);
    expect(committed()).to.deep.equal(Array.from({ length: 60 }, (_, i) => `r${i}`));
    // A long window, and the log stops: the waiting entry is written before the thread ends.
    const slow = openLog(60_000, () => true);
    const waiting = slow.record(refusalEntry(60, ACCOUNT));
    await sleep(20);
    const t1 = performance.now();
    await slow.stop();
    await waiting;
    expect(performance.now() - t1).to.be.below(5_000);
    expect(committed()).to.include("r60");
  });

  it("in memory (the main connection writes, as on PostgreSQL) entries wait and go together too", async () => {
    const memory = await openDataLayer({ sqlitePath: ":memory:" });
    try {
      const log = openLog(300, () => true, memory);
      const t0 = performance.now();
      const first = answeredAt(log.record(refusalEntry(0, ACCOUNT)));
      await sleep(30);
      const second = answeredAt(log.record(refusalEntry(1, ACCOUNT)));
      const [a, b] = await Promise.all([first, second]);
      expect(a - t0).to.be.at.least(250);
      expect(Math.abs(a - b)).to.be.below(50);
      await log.flush();
      const rows = (await memory.exec("SELECT seq FROM audit_entries WHERE account_id = ? ORDER BY seq", [
        ACCOUNT,
      ])) as Array<{ seq: number }>;
      expect(rows.map((r) => Number(r.seq))).to.deep.equal([1, 2]);
      await log.stop();
    } finally {
      f.logs.splice(f.logs.length - 1, 1);
      await memory.close();
    }
  });
});

describe("audit log: group commit in a running service", function () {
  this.timeout(180_000);
  let s: Stack;

  before(async () => {
    // A window no request could miss: an execution that waited for it would take over 3 seconds.
    s = await startStack({ executor: { poolSize: 2 }, audit: { groupCommitMs: 3_000 } });
  });
  after(async () => {
    await s?.close();
  });

  it("one request at a time never waits for the window: the executor has no other run", async () => {
    const a = await setupAccount(s, "async function main() { return 1; }");
    const u = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "runner", execute_in_groups: [a.groupId] },
    });
    expect(u.status, JSON.stringify(u.body)).to.equal(201);
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const run = await s.api("POST", "/core/v1/svc_action", {
        key: u.body.usage_api_key,
        body: { cid: a.cid, js_params: {} },
      });
      expect(run.status, JSON.stringify(run.body)).to.equal(200);
      expect(performance.now() - t0).to.be.below(2_500);
    }
    const listed = await fetch(`${s.url}/core/v1/audit?type=execution`, {
      headers: { "x-api-key": a.accountKey },
    }).then((r) => r.json() as Promise<{ items: unknown[] }>);
    expect(listed.items).to.have.length(3);
  });
});
