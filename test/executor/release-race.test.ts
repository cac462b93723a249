/**
 * Pipelining and a release crossing the run ahead's end (enclave/executor/pool.ts, releaseStuck and
 * the "released" message): the main thread asks back a job queued behind a run while that run is, as
 * far as it knows, still going; the worker has in fact just posted the run's "done" and takes the job
 * back before starting it. The main thread reads "done" first, makes the queued job the worker's
 * current run, then reads "released" for that very job. That job must go back to the executor and
 * run; before the fix the answer was ignored and the job waited out its whole wall time ("timeout":
 * the 30 s stall of trivial runs on a loaded machine).
 *
 * The interleaving is made deterministic with real workers: the run ahead blocks its worker in the
 * serialisation of its response (a toJSON busy loop), which the worker does right before posting
 * "done", so the release asked meanwhile is read by the worker after its "done" and before it starts
 * the queued job.
 */
import { expect } from "chai";
import { ActionExecutor } from "../../enclave/executor";
import { DEFAULT_LIMITS } from "../../enclave/executor/limits";
import { WorkerPool, type PoolJob, type RunOutcome } from "../../enclave/executor/pool";
import { TEST_CID, expectHealthy, makeKeys, makeRunner } from "./helpers";

describe("executor: a release crossing the end of the run ahead", function () {
  this.timeout(30_000);
  const keys = makeKeys();

  it("the job released just after the run ahead's done runs at once, not at its wall-time limit", async function () {
    // Before the fix the stop was logged as: pipelined, release asked, never started in the worker.
    const stops: unknown[] = [];
    const logger = { warn: (fields: Record<string, unknown>) => stops.push(fields.executorStop) };
    const ex = new ActionExecutor({ keys, poolSize: 2, limits: { wallTimeMs: 3_000 }, logger });
    try {
      await ex.ready();
      const run = makeRunner(ex, keys);
      // Frees the other worker while the run ahead is still serialising: the release is asked then.
      const short = run(`await sleep(100); return "short";`);
      await new Promise((r) => setTimeout(r, 10));
      const ahead = run(
        `return { toJSON() { const t = Date.now(); while (Date.now() - t < 400) {} return "ahead"; } };`,
      );
      await new Promise((r) => setTimeout(r, 10));
      // Both workers busy: queued behind the run that started last (the run ahead).
      const started = performance.now();
      const queued = run(`return "queued";`);
      expect(ex.stats()).to.include({ busy: 2, queued: 1 });
      const q = await queued;
      expect(q.error, JSON.stringify({ error: q.error, stops })).to.equal(undefined);
      expect(q.response).to.equal("queued");
      expect(performance.now() - started).to.be.below(2_000);
      expect((await ahead).response).to.equal("ahead");
      expect((await short).response).to.equal("short");
      expect(stops).to.deep.equal([]);
      await expectHealthy(ex, run);
    } finally {
      await ex.close();
    }
  });
});

describe("pool: a release crossing the end of the run ahead, with a job pipelined behind the released one", function () {
  this.timeout(30_000);
  const keys = makeKeys();

  /**
   * One try at the interleaving. On a loaded machine the worker can answer the release before the run
   * ahead's "done" (the main thread then never makes the released job the worker's run, and there is
   * nothing to pipeline behind it): that try did not reproduce the race and says so, instead of waiting
   * for a job that is never sent.
   */
  async function attempt(): Promise<"missed" | { requeued: string[]; behind: RunOutcome }> {
    const pool = new WorkerPool({
      keys,
      poolSize: 2,
      heapMb: DEFAULT_LIMITS.heapMb,
      epochs: new Int32Array(new SharedArrayBuffer(16)),
    });
    const outcomes = new Map<string, Promise<RunOutcome>>();
    const finished = new Set<string>();
    const job = (name: string, code: string, wallTimeMs: number): PoolJob => {
      let resolve!: (o: RunOutcome) => void;
      outcomes.set(name, new Promise<RunOutcome>((r) => (resolve = r)));
      return {
        account: "",
        priority: "interactive",
        code,
        cid: TEST_CID,
        paramsJson: "{}",
        limits: { ...DEFAULT_LIMITS, wallTimeMs },
        fetchPolicy: null,
        lenientRejections: false,
        requestHeaders: {},
        authorizePkp: () => Promise.reject(new Error("no key operations here")),
        runKey: null,
        finish: (o) => {
          finished.add(name);
          resolve(o);
        },
      };
    };
    const requeued: string[] = [];
    try {
      await pool.ready();
      const ahead = job(
        "ahead",
        `return { toJSON() { const t = Date.now(); while (Date.now() - t < 400) {} return "ahead"; } };`,
        10_000,
      );
      const released = job("released", `return "released";`, 2_000);
      const behind = job("behind", `return "behind";`, 2_000);
      pool.onRequeue = (j) => requeued.push(j === released ? "released" : j === behind ? "behind" : "?");
      // The executor's reaction to the run ahead's "done": the worker looks busy with the released job
      // (it is its current run here by then), so the next job is pipelined behind it.
      let missed!: () => void;
      const wasMissed = new Promise<"missed">((r) => (missed = () => r("missed")));
      let decided = false;
      pool.onIdle = () => {
        if (decided || !finished.has("ahead")) return;
        decided = true;
        if (pool.canPipeline()) pool.pipeline(behind);
        else missed();
      };
      pool.start(ahead);
      pool.pipeline(released); // the other worker stays idle: the watchdog asks this job back at once
      const a = await outcomes.get("ahead")!;
      expect(a.responseJson).to.equal('"ahead"');
      const b = await Promise.race([outcomes.get("behind")!, wasMissed]);
      return b === "missed" ? "missed" : { requeued, behind: b };
    } finally {
      await pool.close({ code: "executor_closed", message: "test over" });
    }
  }

  it("the released job is handed back and the job behind it becomes the worker's run and finishes", async function () {
    for (let tries = 0; tries < 5; tries++) {
      const result = await attempt();
      if (result === "missed") continue;
      expect(result.behind.error, JSON.stringify(result.behind.error)).to.equal(null);
      expect(result.behind.responseJson).to.equal('"behind"');
      expect(result.requeued).to.deep.equal(["released"]);
      return;
    }
    // Five tries in a row on a machine too loaded to order the two answers as the race needs: nothing
    // was shown either way (the executor-level test above covers the same fix end to end).
    this.skip();
  });
});
