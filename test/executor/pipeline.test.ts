/**
 * Pipelining (enclave/executor/pool.ts, dispatch): when every worker is busy, a job is posted to a
 * worker behind its run and starts as soon as that run is done. A queued job must never be lost or
 * stuck: it goes back to the executor if its worker dies, and is taken back from behind a long run when
 * another worker is free.
 */
import { expect } from "chai";
import { ActionExecutor } from "../../enclave/executor";
import { expectHealthy, makeKeys, makeRunner } from "./helpers";

describe("executor: pipelining", function () {
  this.timeout(30_000);
  const keys = makeKeys();

  it("a run queued behind one that times out still runs, on the replacement worker", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1, limits: { wallTimeMs: 300 } });
    try {
      await ex.ready();
      const run = makeRunner(ex, keys);
      const stuck = run(`for (;;) {}`);
      await new Promise((r) => setTimeout(r, 20)); // the loop is running: the next job goes behind it
      const queued = run(`return "after";`);
      expect(ex.stats()).to.include({ busy: 1, queued: 1 });
      expect((await stuck).error?.code).to.equal("timeout");
      const r = await queued;
      expect(r.has_error, JSON.stringify(r.error)).to.equal(false);
      expect(r.response).to.equal("after");
      await expectHealthy(ex, run);
    } finally {
      await ex.close();
    }
  });

  it("a run queued behind one whose worker crashes is handed back and runs", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1 });
    try {
      await ex.ready();
      const run = makeRunner(ex, keys);
      const crashing = run(`await sleep(200); return 1;`);
      await new Promise((r) => setTimeout(r, 20));
      const queued = run(`return "survived";`);
      expect(ex.crashBusyWorkers()).to.equal(1);
      expect((await crashing).error?.code).to.equal("worker_crashed");
      expect((await queued).response).to.equal("survived");
      await expectHealthy(ex, run);
    } finally {
      await ex.close();
    }
  });

  it("a run queued behind a long asynchronous run is taken back when another worker is free", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 2 });
    try {
      await ex.ready();
      const run = makeRunner(ex, keys);
      const short = run(`await sleep(100); return "short";`);
      await new Promise((r) => setTimeout(r, 10));
      const long = run(`await sleep(1500); return "long";`);
      await new Promise((r) => setTimeout(r, 10));
      // Both workers are busy; this goes behind the run that started last (the long one).
      const started = performance.now();
      const waiting = run(`return "waiting";`);
      expect(ex.stats()).to.include({ busy: 2, queued: 1 });
      const r = await waiting;
      expect(r.response).to.equal("waiting");
      // Released when the short run's worker became free, instead of waiting the 1.5 s out.
      expect(performance.now() - started).to.be.below(1_000);
      expect((await short).response).to.equal("short");
      expect((await long).response).to.equal("long");
    } finally {
      await ex.close();
    }
  });

  it("runs queued behind one another on one worker finish in order, each with its own result", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1 });
    try {
      await ex.ready();
      const run = makeRunner(ex, keys);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          run(`async function main(p) { return p.i * 2; }`, { jsParams: { i } }),
        ),
      );
      expect(results.map((r) => r.response)).to.deep.equal(Array.from({ length: 20 }, (_, i) => i * 2));
    } finally {
      await ex.close();
    }
  });
});
