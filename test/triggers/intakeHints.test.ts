/**
 * The intake's in-memory hints (relayer/triggers/intakeHints.ts): a flooded trigger is refused without
 * a database transaction, yet never more than max_queued_runs are queued, a run claimed on this
 * instance lets the next firing in at once, a hook's trigger (or that it has none) is read once a
 * second, a re-delivery still answers its run, and a trigger changed behind this instance's back (its
 * remembered row stale) stores nothing the database would refuse.
 */
import { expect } from "chai";
import type { DataLayer } from "../../relayer/db";
import type { TriggerService } from "../../relayer/triggers/service";
import { HookLookups, QueueFullHints } from "../../relayer/triggers/intakeHints";
import type { StoredTrigger } from "../../relayer/triggers/store";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger } from "./helpers";

describe("triggers: the intake's in-memory hints", function () {
  this.timeout(180_000);

  describe("QueueFullHints and HookLookups alone", () => {
    it("a full queue is remembered until a change or its time runs out; each claimed run admits one firing", () => {
      const h = new QueueFullHints(1_000);
      expect(h.refusalIf("t1", 0)).to.equal(null);
      h.markFull("t1", "queue_full", 20, 0);
      expect(h.refusalIf("t1", 999)).to.deep.equal({ reason: "queue_full", limit: 20 });
      expect(h.admit("t1", 999)).to.deep.equal({ reason: "queue_full", limit: 20 });
      expect(h.refusalIf("t2", 999)).to.equal(null);
      expect(h.refusalIf("t1", 1_000)).to.equal(null);
      // Two runs claimed: two firings go to the database (refusalIf takes nothing), the third does not.
      h.markFull("t1", "queue_full", 20, 0);
      h.room("t1");
      h.room("t1");
      expect(h.refusalIf("t1", 1)).to.equal(null);
      expect(h.refusalIf("t1", 1)).to.equal(null);
      expect(h.admit("t1", 1)).to.equal(null);
      expect(h.admit("t1", 1)).to.equal(null);
      expect(h.admit("t1", 1)).to.deep.equal({ reason: "queue_full", limit: 20 });
      expect(h.refusalIf("t1", 1)).to.deep.equal({ reason: "queue_full", limit: 20 });
      // Room never exceeds the queue, and a new refusal from the database takes what room there was.
      for (let i = 0; i < 30; i++) h.room("t1");
      for (let i = 0; i < 20; i++) expect(h.admit("t1", 1)).to.equal(null);
      expect(h.admit("t1", 1)).to.not.equal(null);
      h.room("t1");
      h.markFull("t1", "queue_full", 20, 2);
      expect(h.admit("t1", 2)).to.not.equal(null);
      // A claim frees nothing of the minute's runs.
      h.markFull("t3", "rate", 5, 0);
      h.room("t3");
      expect(h.admit("t3", 1)).to.deep.equal({ reason: "rate", limit: 5 });
      h.room("t4"); // not known full: nothing is remembered
      expect(h.refusalIf("t4", 1)).to.equal(null);
      h.markFull("t1", "queue_full", 20, 0);
      h.clear();
      expect(h.refusalIf("t1", 1)).to.equal(null);
      expect(h.refusalIf("t3", 1)).to.equal(null);
    });

    it("a hook's trigger, or that it has none, is read once while fresh", async () => {
      const lookups = new HookLookups(1_000);
      const row = { id: "trg_1" } as StoredTrigger;
      let reads = 0;
      const load = (id: string) => {
        reads++;
        return Promise.resolve(id === "hk_known" ? row : null);
      };
      expect(await lookups.get("hk_known", 0, load)).to.equal(row);
      expect(await lookups.get("hk_known", 999, load)).to.equal(row);
      expect(reads).to.equal(1);
      expect(await lookups.get("hk_known", 1_000, load)).to.equal(row);
      expect(reads).to.equal(2);
      expect(lookups.peek("hk_unknown", 0)).to.equal(undefined);
      expect(await lookups.get("hk_unknown", 0, load)).to.equal(null);
      expect(await lookups.get("hk_unknown", 999, load)).to.equal(null);
      expect(lookups.peek("hk_unknown", 999)).to.equal(null);
      expect(lookups.peek("hk_known", 1_999)).to.equal(row);
      expect(reads).to.equal(3);
      expect(await lookups.get("hk_unknown", 1_000, load)).to.equal(null);
      expect(reads).to.equal(4);
      lookups.clear();
      expect(lookups.peek("hk_known", 1_001)).to.equal(undefined);
      await lookups.get("hk_known", 1_001, load);
      expect(reads).to.equal(5);
    });
  });

  describe("on a stack that stores firings and runs them only when told", () => {
    let s: Stack;
    let a: Awaited<ReturnType<typeof accountWithKey>>;
    let service: TriggerService;
    let transactions = 0;

    before(async () => {
      s = await startStack({
        // Nothing in the background uses the data layer during a counted window (the webhook
        // deliverer's and the poller's timers share it: under load one landed in the window).
        webhooks: { deliveryPollMs: 600_000 },
        pollIntervalMs: 600_000,
        triggers: {
          run: false,
          hookPerIpPerMinute: 100_000,
          hookPerTriggerPerMinute: 100_000,
          // A counted window must not outlive the memory it tests (under load, calls can be a second apart).
          intakeHintMs: 60_000,
        },
      });
      a = await accountWithKey(s, "async function main() { return 1; }");
      service = s.relayer.triggers as TriggerService;
      // Counts the store's transactions (the real data layer underneath; nothing is replaced).
      const db: DataLayer = service.store.db;
      const transaction = db.transaction.bind(db);
      db.transaction = ((fn: never, opts?: never) => {
        transactions++;
        return transaction(fn, opts);
      }) as DataLayer["transaction"];
    });
    after(async () => {
      await s?.close();
    });

    const hook = (url: string, headers: Record<string, string> = {}) =>
      fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{}" });
    const queued = async (id: string) =>
      Number(
        (await s.api("GET", `/core/v1/triggers/${id}/runs?status=queued`, { key: a.accountKey })).body.total,
      );

    it("queues at most max_queued_runs; once full, refusals take no transaction; a re-delivery answers its run", async () => {
      const t = await createTrigger(s, a, {
        kind: "webhook",
        limits: { max_queued_runs: 3, runs_per_minute: 600, concurrency: "parallel" },
      });
      const first = await hook(t.webhook.url, { "x-request-id": "delivery-1" });
      expect(first.status).to.equal(202);
      const firstRun = ((await first.json()) as { run_id: string }).run_id;
      const rs = await Promise.all(Array.from({ length: 40 }, () => hook(t.webhook.url)));
      expect(rs.filter((r) => r.status === 202).length).to.equal(2);
      expect(rs.filter((r) => r.status === 429).length).to.equal(38);
      expect(await queued(t.id)).to.equal(3);

      const before = transactions;
      const refused = await Promise.all(Array.from({ length: 20 }, () => hook(t.webhook.url)));
      expect(refused.map((r) => r.status)).to.deep.equal(Array(20).fill(429));
      const body = (await refused[0].json()) as { error: { code: string; details: unknown } };
      expect(body.error.code).to.equal("trigger_queue_full");
      expect(body.error.details).to.deep.equal({ reason: "queue_full", limit: 3 });
      expect(refused[0].headers.get("retry-after")).to.equal("5");
      expect(transactions - before, "refusals of a known-full queue").to.equal(0);

      const again = await hook(t.webhook.url, { "x-request-id": "delivery-1" });
      expect(again.status).to.equal(202);
      expect(((await again.json()) as { run_id: string }).run_id).to.equal(firstRun);
      expect(await queued(t.id)).to.equal(3);
    });

    it("never refuses once this instance has run the queue: the next call is accepted at once", async () => {
      const t = await createTrigger(s, a, {
        kind: "webhook",
        limits: { max_queued_runs: 2, runs_per_minute: 600, concurrency: "parallel" },
      });
      for (let i = 0; i < 2; i++) expect((await hook(t.webhook.url)).status).to.equal(202);
      expect((await hook(t.webhook.url)).status).to.equal(429);
      expect((await hook(t.webhook.url)).status).to.equal(429);
      // The other trigger's runs from the test before are queued too: drain runs them all.
      expect(await service.runner.drain()).to.be.at.least(2);
      expect(await queued(t.id)).to.equal(0);
      const after = await Promise.all(Array.from({ length: 5 }, () => hook(t.webhook.url)));
      expect(after.map((r) => r.status).sort()).to.deep.equal([202, 202, 429, 429, 429]);
      expect(await queued(t.id)).to.equal(2);
    });

    it("after a full queue's runs are claimed here, only as many calls as runs claimed take a transaction", async () => {
      const t = await createTrigger(s, a, {
        kind: "webhook",
        limits: { max_queued_runs: 2, runs_per_minute: 600, concurrency: "parallel" },
      });
      for (let i = 0; i < 2; i++) expect((await hook(t.webhook.url)).status).to.equal(202);
      expect((await hook(t.webhook.url)).status).to.equal(429);
      expect(await service.runner.drain()).to.be.at.least(2);
      const before = transactions;
      const rs = await Promise.all(Array.from({ length: 20 }, () => hook(t.webhook.url)));
      expect(rs.filter((r) => r.status === 202).length).to.equal(2);
      expect(rs.filter((r) => r.status === 429).length).to.equal(18);
      // Two firings stored; the other 18 calls of the burst refused from memory, not by the database.
      expect(transactions - before, "transactions of the burst after two claims").to.equal(2);
      expect(await queued(t.id)).to.equal(2);
    });

    it("past the minute's runs, refusals take no transaction either (the database's answer, remembered)", async () => {
      const t = await createTrigger(s, a, {
        kind: "webhook",
        limits: { max_queued_runs: 10, runs_per_minute: 2, concurrency: "parallel" },
      });
      for (let i = 0; i < 2; i++) expect((await hook(t.webhook.url)).status).to.equal(202);
      const first = await hook(t.webhook.url);
      expect(first.status).to.equal(429);
      const firstBody = await first.text();
      const before = transactions;
      const refused = await Promise.all(Array.from({ length: 20 }, () => hook(t.webhook.url)));
      expect(refused.map((r) => r.status)).to.deep.equal(Array(20).fill(429));
      expect(transactions - before, "refusals past the minute's runs").to.equal(0);
      const body = (await refused[0].json()) as {
        error: { code: string; message: string; details: unknown };
      };
      const dbBody = JSON.parse(firstBody) as { error: { code: string; message: string; details: unknown } };
      expect(body.error).to.deep.equal(dbBody.error);
      expect(body.error.code).to.equal("trigger_queue_full");
      expect(body.error.details).to.deep.equal({ reason: "rate", limit: 2 });
      expect(refused[0].headers.get("retry-after")).to.equal("60");
      expect(await queued(t.id)).to.equal(2);
    });

    it("a trigger disabled behind this instance's back stores nothing, though its row is remembered", async () => {
      const t = await createTrigger(s, a, { kind: "webhook" });
      expect((await hook(t.webhook.url)).status).to.equal(202);
      // As another instance would: the row changes without this instance's service hearing of it.
      const row = await service.store.byId(t.id);
      expect(await service.store.update({ ...row!, enabled: false })).to.equal(true);
      const r = await hook(t.webhook.url);
      expect(r.status).to.equal(404);
      expect(((await r.json()) as { error: { code: string } }).error.code).to.equal("trigger_not_found");
      expect(await queued(t.id)).to.equal(1);
    });
  });
});
