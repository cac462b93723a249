/**
 * Admission of runs that name their own PKP (enclave/executor/index.ts, run): the executor awaits the
 * relayer's authorizePkp before it queues the job. Whatever happens during that wait (the executor
 * closes, other runs fill the queue), the run must end as if it had been admitted at that moment.
 */
import { expect } from "chai";
import { ActionExecutor, ExecutorBusyError, ExecutorClosedError } from "../../enclave/executor";
import { makeAuthorizer, makeKeys, pkpIds, TEST_CID } from "./helpers";

describe("executor: admitting a run with its own PKP", function () {
  this.timeout(30_000);
  const keys = makeKeys();
  const { allowed } = pkpIds();

  /** An authorizer that answers only when the test says so. */
  function gatedAuthorizer() {
    const gates: Array<() => void> = [];
    const authorizePkp = (ref: string) =>
      new Promise<string>((resolve) => gates.push(() => resolve(ref.toLowerCase())));
    const open = () => {
      for (const g of gates.splice(0)) g();
    };
    return { authorizePkp, open, waiting: () => gates.length };
  }

  it("close() while the run's PKP is being authorized rejects the run instead of leaving it pending", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1 });
    await ex.ready();
    const gate = gatedAuthorizer();
    const outcome = ex
      .run({
        code: `return 1;`,
        cid: TEST_CID,
        authorizePkp: gate.authorizePkp,
        runPkp: { ref: allowed, scope: 1 },
      })
      .then(
        (r) => ({ resolved: r }),
        (e: unknown) => ({ rejected: e }),
      );
    await new Promise((r) => setTimeout(r, 20));
    expect(gate.waiting()).to.equal(1);
    await ex.close();
    gate.open();
    const settled = await Promise.race([
      outcome,
      new Promise((r) => setTimeout(() => r("still pending after 2 s"), 2_000)),
    ]);
    expect(settled).to.have.property("rejected").that.is.instanceOf(ExecutorClosedError);
  });

  it("maxQueue holds for runs admitted while their PKP was being authorized", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1, maxQueue: 2 });
    try {
      await ex.ready();
      // Occupy the only worker so that nothing can start.
      const blocker = ex.run({
        code: `await sleep(1500); return 0;`,
        cid: TEST_CID,
        authorizePkp: async () => "",
      });
      await new Promise((r) => setTimeout(r, 20));
      const gate = gatedAuthorizer();
      const runs = Array.from({ length: 6 }, () =>
        ex
          .run({
            code: `return 1;`,
            cid: TEST_CID,
            authorizePkp: gate.authorizePkp,
            runPkp: { ref: allowed, scope: 1 },
          })
          .then(
            () => "ran",
            (e: unknown) => (e instanceof ExecutorBusyError ? "busy" : String(e)),
          ),
      );
      await new Promise((r) => setTimeout(r, 20));
      gate.open();
      await new Promise((r) => setTimeout(r, 20));
      // One waits behind the blocker in its worker, one in the queue: never more than maxQueue.
      expect(ex.stats().queued).to.be.at.most(2);
      const outcomes = await Promise.all(runs);
      expect(outcomes.filter((o) => o === "ran")).to.have.length(2);
      expect(outcomes.filter((o) => o === "busy")).to.have.length(4);
      await blocker;
    } finally {
      await ex.close();
    }
  });
  it("runPkp.authorize decides until when the grant holds (the expiry that check saw)", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1 });
    try {
      await ex.ready();
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      const code = `async function main(p) { return await Actions.signMessage({ pkpId: p.ref, message: "m" }); }`;
      const run = (notAfterMs: number) =>
        ex.run({
          code,
          cid: TEST_CID,
          jsParams: { ref: allowed },
          authorizePkp,
          runPkp: { ref: allowed, scope: 7, authorize: async (ref) => ({ pkpId: ref, notAfterMs }) },
        });
      const live = await run(Date.now() + 60_000);
      expect(live.has_error, JSON.stringify(live.error)).to.equal(false);
      expect(calls).to.have.length(0); // served in the worker
      const past = await run(Date.now() - 1);
      expect(past.response).to.equal(live.response);
      expect(calls).to.have.length(1); // the grant had expired: asked per operation
    } finally {
      await ex.close();
    }
  });
});
