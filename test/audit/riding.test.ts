/**
 * The audit log's entries riding on the admission statements (relayer/db/passengers.ts,
 * docs/audit-log.md "What it costs"), on PostgreSQL: an entry waiting for its group is written by the
 * next batched token take or lease this instance sends, and answered only once that statement
 * committed; a carrier rolled back hands its entries back, which are then written once, by their own
 * INSERT, while the carrier's own work runs again alone; entries that make the carrier fail do not
 * fail it. (Two instances making one gap-free chain with riding on: test/audit/instances.test.ts.)
 */
import * as crypto from "node:crypto";
import { expect } from "chai";
import { Client } from "pg";
import pino from "pino";
import { Enclave } from "../../enclave";
import { AuditLog } from "../../relayer/audit/log";
import { openDataLayer, SharedConcurrencyCap, SharedTokenBuckets, type DataLayer } from "../../relayer/db";
import { execCarrying } from "../../relayer/db/passengers";
import { refusalEntry } from "../helpers/auditEntries";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";

const ACCOUNT = "31";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeOnPostgres("audit log: entries riding on the admission statements (postgres)", function () {
  this.timeout(60_000);
  let url: string;
  let db: DataLayer;
  let peek: Client;
  const logs: AuditLog[] = [];
  const enclave = Enclave.fromRootKey(crypto.randomBytes(32));

  before(async () => {
    url = await freshDatabaseUrl();
    db = await openDataLayer({ databaseUrl: url, sqlitePath: "" });
    peek = new Client({ connectionString: url });
    await peek.connect();
  });
  afterEach(async () => {
    for (const l of logs.splice(0)) await l.stop();
    await peek.query("DELETE FROM audit_pending");
    await peek.query("DELETE FROM audit_entries");
    await peek.query("DELETE FROM audit_heads");
  });
  after(async () => {
    await peek?.end();
    await db?.close();
  });

  /** A log whose entries wait up to `groupCommitMs` for others (runs always "in the executor"). */
  function openLog(groupCommitMs: number, rideOnAdmissions = true): AuditLog {
    const log = new AuditLog(
      db,
      { address: enclave.attestationIdentity().address, sign: (d) => enclave.signAuditCheckpoint(d) },
      "test",
      { groupCommitMs, rideOnAdmissions, chainAfterMs: 3_600_000, sweepMs: 3_600_000 },
      pino({ level: "silent" }),
      { moreSoon: () => true },
    );
    logs.push(log);
    return log;
  }
  /** The request ids committed to audit_pending, as another connection sees them, in id order. */
  async function pending(): Promise<string[]> {
    const r = await peek.query<{ data: string }>("SELECT data FROM audit_pending ORDER BY id");
    return r.rows.map((x) => (JSON.parse(x.data) as { request_id: string }).request_id);
  }

  it("an entry waiting for its group is committed by the next token take, before it answers", async () => {
    const log = openLog(20_000);
    const t0 = performance.now();
    let answered = false;
    const recorded = log.record(refusalEntry(0, ACCOUNT)).then(() => (answered = true));
    await sleep(100);
    expect(answered).to.equal(false);
    expect(await pending()).to.deep.equal([]);
    await new SharedTokenBuckets(db, "ride", 1_000, 60_000).take("k", "test takes");
    await recorded;
    // Answered with the take, not at the end of its 20-second window; committed when it answered.
    expect(performance.now() - t0).to.be.below(10_000);
    expect(await pending()).to.deep.equal(["r0"]);
    expect(log.store.writes).to.deep.include({ rides: 1, rode: 1, inserts: 0 });
  });

  it("entries ride on a batch of leases too, several in one statement", async () => {
    const log = openLog(20_000);
    const recorded = [1, 2, 3].map((i) => log.record(refusalEntry(i, ACCOUNT)));
    await sleep(50);
    const release = await new SharedConcurrencyCap(db, 10).enter(ACCOUNT);
    release();
    await Promise.all(recorded);
    expect(await pending()).to.deep.equal(["r1", "r2", "r3"]);
    expect(log.store.writes).to.deep.include({ rides: 1, rode: 3, inserts: 0 });
  });

  it("a carrier rolled back hands its entries back: written once, by their own INSERT; the carrier runs again alone", async () => {
    const log = openLog(20_000);
    const recorded = [4, 5].map((i) => log.record(refusalEntry(i, ACCOUNT)));
    await sleep(50);
    // The carrier's own statement fails on the server (division by zero: rolled back, nothing applied).
    const err = await execCarrying(db, "SELECT 1 / 0 AS x", []).then(
      () => null,
      (e: unknown) => e as { code?: string },
    );
    expect(err?.code).to.equal("22012");
    await Promise.all(recorded);
    expect(await pending()).to.deep.equal(["r4", "r5"]);
    expect(log.store.writes).to.deep.include({ rides: 0, inserts: 1, inserted: 2 });
    // And a carrier that succeeds alone is answered though its passengers were handed back.
    const more = log.record(refusalEntry(6, ACCOUNT));
    await sleep(20);
    expect(await execCarrying(db, "SELECT 7 AS x", [])).to.deep.equal([{ x: 7 }]);
    await more;
    expect(await pending()).to.deep.equal(["r4", "r5", "r6"]);
  });

  it("an entry the database refuses does not fail the admission it boarded; it fails alone", async () => {
    const log = openLog(20_000);
    // A NUL character is not valid in PostgreSQL text: the INSERT of this entry fails wherever it runs.
    const bad = { ...refusalEntry(7, ACCOUNT), principal: "0x\u0000" };
    const failed = log.record(bad).then(
      () => null,
      (e: unknown) => e as { code?: string },
    );
    await sleep(50);
    await new SharedTokenBuckets(db, "ride", 1_000, 60_000).take("k2", "test takes");
    expect((await failed)?.code).to.match(/^22/);
    expect(await pending()).to.deep.equal([]);
    // The next entry is written as usual.
    const good = log.record(refusalEntry(8, ACCOUNT));
    await sleep(20);
    await new SharedTokenBuckets(db, "ride", 1_000, 60_000).take("k3", "test takes");
    await good;
    expect(await pending()).to.deep.equal(["r8"]);
  });

  it("with riding off, the admissions carry nothing", async () => {
    const log = openLog(300, false);
    const recorded = log.record(refusalEntry(9, ACCOUNT));
    await sleep(20);
    await new SharedTokenBuckets(db, "ride", 1_000, 60_000).take("k4", "test takes");
    await recorded;
    expect(log.store.writes).to.deep.include({ rides: 0, inserts: 1 });
  });
});
