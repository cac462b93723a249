/**
 * The trigger store and the scheduler on both engines, with a driven clock: a firing is stored once,
 * the queue bound holds, a run is claimed by one instance, an expired lease is taken over, a serial
 * trigger runs one at a time, a schedule fires at its minutes, once across two instances, and after
 * downtime skips or runs once as the trigger says.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import pino from "pino";
import { openDataLayer, type DataLayer } from "../../relayer/db";
import type { Firing, FireOutcome, TriggerIntake } from "../../relayer/triggers/model";
import { dueFiring, Scheduler, scheduleFiringId, validateCron } from "../../relayer/triggers/schedule";
import { TriggerStore, type StoredTrigger } from "../../relayer/triggers/store";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";

const T0 = Date.parse("2026-03-01T10:00:30Z");
const MIN = 60_000;

function trigger(over: Partial<StoredTrigger> = {}): StoredTrigger {
  return {
    id: "trg_" + Math.random().toString(16).slice(2).padEnd(32, "0").slice(0, 32),
    accountId: "1",
    name: "t",
    kind: "schedule",
    enabled: true,
    paused: null,
    cid: "QmTest",
    pkpIds: [],
    jsParams: {},
    runAsKeyAddress: "0x" + "11".repeat(20),
    schedule: { cron: "*/5 * * * *", missed: "skip" },
    webhook: null,
    chainEvent: null,
    limits: { runsPerMinute: 60, maxQueuedRuns: 100, concurrency: "parallel" },
    retry: { maxAttempts: 3, backoffMs: 1000 },
    createdAt: T0,
    updatedAt: T0,
    hmacSecretSealed: null,
    lastFiredMs: null,
    ...over,
  };
}

/** The intake rule without the relayer: what TriggerService.fire does with the store. */
function intakeOf(store: TriggerStore, now: () => number): TriggerIntake {
  return {
    async fire(f: Firing): Promise<FireOutcome> {
      const r = await store.fire(
        {
          triggerId: f.triggerId,
          firingId: f.firingId,
          firedMs: f.firedAt,
          input: JSON.stringify(f.input),
          inputSummary: "",
        },
        now(),
      );
      if (!("runId" in r)) throw new Error(JSON.stringify(r));
      return r;
    },
  };
}

const run = (triggerId: string, firingId: string) => ({
  triggerId,
  firingId,
  firedMs: T0,
  input: JSON.stringify({ kind: "manual" }),
  inputSummary: "manual",
});

describe("triggers: cron expressions", () => {
  it("accepts five fields and refuses six (no seconds: one minute is the shortest interval)", () => {
    expect(validateCron(" */5  * * * * ")).to.equal("*/5 * * * *");
    expect(() => validateCron("* * * * * *")).to.throw(/exactly five fields/);
    expect(() => validateCron("61 * * * *")).to.throw(/does not parse/);
    expect(() => validateCron("@hourly")).to.throw(/exactly five fields/);
  });

  it("names a firing by its minute", () => {
    expect(scheduleFiringId(Date.parse("2026-03-01T10:05:00Z"))).to.equal("schedule:2026-03-01T10:05Z");
  });

  it("fires the minute that is on time; after downtime skip drops the missed ones, run_once runs the latest", () => {
    const t = trigger();
    expect(dueFiring(t, T0 + 2 * MIN)).to.deep.equal({ fire: null, advanceTo: null });
    const at = Date.parse("2026-03-01T10:05:00Z");
    expect(dueFiring(t, at + 10_000)).to.deep.equal({ fire: at, advanceTo: at });
    const late = Date.parse("2026-03-01T10:32:00Z");
    const latest = Date.parse("2026-03-01T10:30:00Z");
    expect(dueFiring(t, late)).to.deep.equal({ fire: null, advanceTo: latest });
    const once = trigger({ schedule: { cron: "*/5 * * * *", missed: "run_once" } });
    expect(dueFiring(once, late)).to.deep.equal({ fire: latest, advanceTo: latest });
  });
});

describeOnEngines("triggers: the store and the scheduler", (engine) => {
  let dir: string;
  let dbs: DataLayer[];
  let url: string | undefined;
  const open = async () => {
    const db = await openDataLayer({ databaseUrl: url, sqlitePath: path.join(dir, "t.sqlite") });
    dbs.push(db);
    return db;
  };

  beforeEach(async function () {
    this.timeout(60_000);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-triggers-"));
    dbs = [];
    url = engine === "postgres" ? await freshDatabaseUrl() : undefined;
  });
  afterEach(async () => {
    for (const db of dbs) await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A store on a fresh database, holding `triggers`. */
  const storeWith = async (...triggers: StoredTrigger[]) => {
    const store = new TriggerStore(await open());
    for (const t of triggers) await store.insert(t);
    return store;
  };
  /** Two instances' stores on one database (SQLite: one file, so one connection serves both). */
  const twoInstances = async (): Promise<[TriggerStore, TriggerStore]> => {
    const s1 = new TriggerStore(await open());
    return [s1, new TriggerStore(engine === "postgres" ? await open() : s1.db)];
  };
  /** A scheduler on `store` whose clock is `clock.now`, firing through the store's intake rule. */
  const clocked = (store: TriggerStore, clock: { now: number }) =>
    new Scheduler(
      store,
      intakeOf(store, () => clock.now),
      () => clock.now,
      pino({ level: "silent" }),
    );
  const runsOf = (store: TriggerStore, id: string) => store.runs(id, { limit: 100, offset: 0 });

  it("stores a firing once: the same firing id answers the first run with created false", async () => {
    const t = trigger();
    const store = await storeWith(t);
    const a = await store.fire(run(t.id, "manual:1"), T0);
    const b = await store.fire(run(t.id, "manual:1"), T0);
    expect(a).to.have.property("created", true);
    expect(b).to.deep.equal({ runId: (a as { runId: string }).runId, created: false });
  });

  it("reads the row under the lock: a disabled trigger's firing is missing, a paused one answers why", async () => {
    // What a caller read before (another instance's stale copy) does not matter: the row decides.
    const t = trigger();
    const store = await storeWith(t);
    await store.update({ ...t, enabled: false });
    expect(await store.fire(run(t.id, "m:1"), T0)).to.deep.equal({ missing: true });
    await store.update({ ...t, enabled: true });
    await store.setPaused(t.accountId, "insufficient_credits", T0);
    expect(await store.fire(run(t.id, "m:2"), T0)).to.deep.equal({ paused: "insufficient_credits" });
    await store.setPaused(t.accountId, null, T0);
    expect(await store.fire(run(t.id, "m:3"), T0)).to.have.property("created", true);
    expect((await runsOf(store, t.id)).total).to.equal(1);
  });

  it("refuses past max_queued_runs, and past runs_per_minute", async () => {
    const t = trigger({ limits: { runsPerMinute: 5, maxQueuedRuns: 3, concurrency: "parallel" } });
    const store = await storeWith(t);
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, (_, i) => store.fire(run(t.id, `m:${i}`), T0)),
    );
    expect(outcomes.filter((o) => "runId" in o).length).to.equal(3);
    expect(outcomes.find((o) => "refused" in o)).to.deep.equal({ refused: "queue_full", limit: 3 });
    // Two of them end; two more fit the queue, but the minute's budget (5) stops the second.
    for (let i = 0; i < 3; i++) {
      const c = await store.claim("i1", T0, 10_000);
      await store.finish(c!.run_id, "i1", { status: "succeeded", nowMs: T0 });
    }
    expect(await store.fire(run(t.id, "m:a"), T0)).to.have.property("created", true);
    expect(await store.fire(run(t.id, "m:b"), T0)).to.have.property("created", true);
    expect(await store.fire(run(t.id, "m:c"), T0)).to.deep.equal({ refused: "rate", limit: 5 });
    expect(await store.fire(run(t.id, "m:c"), T0 + MIN + 1)).to.have.property("created", true);
  });

  it("a run is claimed by one of two instances; after its lease expires the other takes it over", async () => {
    const [s1, s2] = await twoInstances();
    const t = trigger();
    await s1.insert(t);
    await s1.fire(run(t.id, "m:1"), T0);
    const [c1, c2] = await Promise.all([s1.claim("i1", T0, 10_000), s2.claim("i2", T0, 10_000)]);
    expect([c1, c2].filter((c) => c !== null).length).to.equal(1);
    expect(await s2.claim("i2", T0 + 5_000, 10_000)).to.equal(null);
    const taken = await s2.claim("i2", T0 + 10_001, 10_000);
    expect(taken?.lease_owner).to.equal("i2");
    expect(Number(taken?.attempt)).to.equal(2);
    // The first instance, back from the dead, can no longer end the run.
    const first = (c1 ?? c2)!;
    expect(await s1.finish(first.run_id, first.lease_owner!, { status: "succeeded", nowMs: T0 })).to.equal(
      first.lease_owner === "i2",
    );
  });

  it("a serial trigger's runs are claimed one at a time", async () => {
    const t = trigger({ limits: { runsPerMinute: 60, maxQueuedRuns: 10, concurrency: "serial" } });
    const store = await storeWith(t);
    await store.fire(run(t.id, "m:1"), T0);
    await store.fire(run(t.id, "m:2"), T0);
    const first = await store.claim("i1", T0, 10_000);
    expect(first).to.not.equal(null);
    expect(await store.claim("i1", T0, 10_000)).to.equal(null);
    await store.finish(first!.run_id, "i1", { status: "succeeded", nowMs: T0 });
    expect(await store.claim("i1", T0, 10_000)).to.not.equal(null);
  });

  it("a schedule fires at its minutes, driven by the clock", async () => {
    const t = trigger();
    const store = await storeWith(t);
    const clock = { now: T0 };
    const scheduler = clocked(store, clock);
    for (let m = 0; m <= 16; m++) {
      clock.now = T0 + m * MIN;
      await scheduler.tick();
    }
    const { items } = await runsOf(store, t.id);
    expect(items.map((r) => r.firing_id).sort()).to.deep.equal([
      "schedule:2026-03-01T10:05Z",
      "schedule:2026-03-01T10:10Z",
      "schedule:2026-03-01T10:15Z",
    ]);
  });

  it("two instances ticking the same minutes fire each minute once", async () => {
    const [s1, s2] = await twoInstances();
    const clock = { now: T0 };
    const [a, b] = [clocked(s1, clock), clocked(s2, clock)];
    const t = trigger({ schedule: { cron: "* * * * *", missed: "skip" } });
    await s1.insert(t);
    for (let m = 1; m <= 5; m++) {
      clock.now = T0 + m * MIN;
      await Promise.all([a.tick(), b.tick()]);
    }
    const { items, total } = await runsOf(s1, t.id);
    expect(total).to.equal(5);
    expect(new Set(items.map((r) => r.firing_id)).size).to.equal(5);
  });

  it("after downtime, skip fires nothing late and run_once fires the latest missed minute once", async () => {
    const skip = trigger();
    const once = trigger({ schedule: { cron: "*/5 * * * *", missed: "run_once" } });
    const store = await storeWith(skip, once);
    const clock = { now: T0 + 42 * MIN }; // down from 10:00 to 10:42: 10:05 … 10:40 were missed
    const scheduler = clocked(store, clock);
    await scheduler.tick();
    await scheduler.tick();
    expect((await runsOf(store, skip.id)).total).to.equal(0);
    const ran = await runsOf(store, once.id);
    expect(ran.items.map((r) => r.firing_id)).to.deep.equal(["schedule:2026-03-01T10:40Z"]);
    // Both are on schedule again from the next minute on.
    clock.now = Date.parse("2026-03-01T10:45:10Z");
    await scheduler.tick();
    expect((await runsOf(store, skip.id)).total).to.equal(1);
    expect((await runsOf(store, once.id)).total).to.equal(2);
  });
});
