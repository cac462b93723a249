/**
 * Timers that library code sets (ethers v5 calls the realm's setTimeout itself) belong to the run in
 * progress (worker/library-timers.js): an error their callback throws ends that run, not the worker.
 */
import { expect } from "chai";
import { ActionExecutor } from "../../enclave/executor";
import { expectHealthy, makeKeys, makeRunner, type Runner } from "./helpers";

describe("executor: library timers", function () {
  this.timeout(30_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;

  before(async function () {
    executor = new ActionExecutor({ keys, poolSize: 1, limits: { wallTimeMs: 2_000 } });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async function () {
    await executor.close();
  });

  it("a library timer callback that throws ends its run with action_threw and the worker lives on", async function () {
    const restarts = executor.stats().restarts;
    // v5's JsonRpcProvider called without `new` sets a host timer whose callback reads a property of
    // undefined (its receiver): an uncaught exception of the worker, before.
    const r = await run(`
      const Base = Object.getPrototypeOf(ethers.providers.JsonRpcProvider);
      try { Base(); } catch {}
      await sleep(50);
      return "not reached";`);
    expect(r.error).to.deep.equal({
      code: "action_threw",
      message:
        "a library timer callback threw: TypeError: Cannot read properties of undefined (reading 'detectNetwork')",
    });
    await expectHealthy(executor, run);
    expect(executor.stats().restarts).to.equal(restarts);
  });
});
