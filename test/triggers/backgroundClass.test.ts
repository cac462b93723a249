/**
 * The background class of triggered runs (relayer/triggers/backgroundGate.ts): while this instance
 * serves an interactive run, at most one triggered run is in flight and a trigger's runs are spaced by
 * its own `runs_per_minute`; without interactive load they run in parallel again. The rules on their
 * own (a driven clock), then on a real stack with a real interactive run in flight.
 */
import { expect } from "chai";
import { InteractiveLoad } from "../../relayer/execution/interactiveLoad";
import { BackgroundGate } from "../../relayer/triggers/backgroundGate";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger, waitForRun } from "./helpers";

describe("triggers: the background class", function () {
  this.timeout(120_000);

  describe("the rules", () => {
    let now = 0;
    const clock = () => now;

    it("an interactive run counts while in flight and for the linger after it ends", () => {
      now = 1_000;
      const load = new InteractiveLoad(250, clock);
      expect(load.present()).to.equal(false);
      const end = load.begin();
      now += 10_000;
      expect(load.present()).to.equal(true);
      end();
      end(); // once only: a second call does not end another run
      now += 249;
      expect(load.present()).to.equal(true);
      now += 2;
      expect(load.present()).to.equal(false);
      const a = load.begin();
      const b = load.begin();
      a();
      now += 1_000;
      expect(load.present(), "one of two still in flight").to.equal(true);
      b();
    });

    it("one slot and the trigger's own spacing with interactive load, every worker and none without", () => {
      now = 0;
      let interactive = false;
      const gate = new BackgroundGate({ present: () => interactive }, 4, clock);
      expect(gate.slots()).to.equal(4);
      gate.runStarted("t1", 60); // one a second
      gate.runStarted("t2", 600); // one every 100 ms
      expect(gate.held()).to.deep.equal({ triggerIds: [], waitMs: null });
      interactive = true;
      expect(gate.slots()).to.equal(1);
      now = 40;
      expect(gate.held()).to.deep.equal({ triggerIds: ["t1", "t2"], waitMs: 60 });
      now = 100;
      expect(gate.held()).to.deep.equal({ triggerIds: ["t1"], waitMs: 900 });
      now = 1_000;
      expect(gate.held()).to.deep.equal({ triggerIds: [], waitMs: null });
      interactive = false;
      expect(gate.slots()).to.equal(4);
    });
  });

  describe("on a real stack", () => {
    let s: Stack;
    let other: Awaited<ReturnType<typeof accountWithKey>>;
    let a: Awaited<ReturnType<typeof accountWithKey>>;

    before(async () => {
      s = await startStack({
        triggers: { workers: 4, pollMs: 20, hookPerIpPerMinute: 100_000, hookPerTriggerPerMinute: 100_000 },
      });
      // Another account's interactive run: it lasts as long as its caller says.
      other = await accountWithKey(
        s,
        "async function main(p) { await new Promise((r) => setTimeout(r, p.ms)); return 1; }",
      );
      a = await accountWithKey(
        s,
        "async function main(p) { await new Promise((r) => setTimeout(r, p.ms ?? 0)); return 2; }",
      );
    });
    after(async () => {
      await s?.close();
    });

    /** Another account's svc_action lasting `ms`; resolves with when it was answered. */
    async function interactiveRun(ms: number): Promise<number> {
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: other.accountKey,
        body: { cid: other.cid, pkp_id: other.pkpId, js_params: { ms } },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
      return Date.now();
    }

    /** Fires `n` deliveries of a trigger and waits for their runs: each run's start and end (ms). */
    async function fire(t: { id: string; webhook: { url: string } }, n: number, tag: string) {
      const runIds: string[] = [];
      for (let i = 0; i < n; i++) {
        const r = await fetch(t.webhook.url, {
          method: "POST",
          headers: { "content-type": "application/json", "x-github-delivery": `${tag}-${i}` },
          body: "{}",
        });
        expect(r.status).to.equal(202);
        runIds.push(((await r.json()) as { run_id: string }).run_id);
      }
      const runs = [];
      for (const id of runIds) {
        const run = await waitForRun(s, a.accountKey, t.id, id);
        expect(run.status, JSON.stringify(run)).to.equal("succeeded");
        runs.push({ start: Date.parse(run.started_at), end: Date.parse(run.finished_at) });
      }
      return runs.sort((x, y) => x.start - y.start);
    }

    /** The most runs in flight at one moment. */
    function mostAtOnce(runs: Array<{ start: number; end: number }>): number {
      let most = 0;
      for (const r of runs)
        most = Math.max(most, runs.filter((o) => o.start <= r.start && r.start < o.end).length);
      return most;
    }

    it("one triggered run at a time while another account's run is in flight, in parallel without", async () => {
      const t = await createTrigger(s, a, {
        kind: "webhook",
        js_params: { ms: 400 },
        limits: { concurrency: "parallel", runs_per_minute: 600, max_queued_runs: 20 },
      });
      const busyUntil = interactiveRun(5_000);
      await new Promise((r) => setTimeout(r, 300)); // the interactive run has begun
      const during = await fire(t, 3, "during");
      const answered = await busyUntil;
      expect(during[2].end, "the three runs ended while the interactive run was in flight").to.be.below(
        answered,
      );
      expect(mostAtOnce(during), JSON.stringify(during)).to.equal(1);

      await new Promise((r) => setTimeout(r, 400)); // past the linger
      const after = await fire(t, 3, "after");
      expect(mostAtOnce(after), JSON.stringify(after)).to.be.at.least(2);
    });

    it("with interactive load a trigger's runs start no closer than its runs_per_minute allows", async () => {
      const t = await createTrigger(s, a, {
        kind: "webhook",
        limits: { concurrency: "parallel", runs_per_minute: 60, max_queued_runs: 20 },
      });
      const busyUntil = interactiveRun(4_500);
      await new Promise((r) => setTimeout(r, 300));
      const paced = await fire(t, 3, "paced");
      const answered = await busyUntil;
      expect(paced[2].start).to.be.below(answered);
      for (let i = 1; i < paced.length; i++)
        expect(paced[i].start - paced[i - 1].start, JSON.stringify(paced)).to.be.at.least(990);
    });
  });
});
