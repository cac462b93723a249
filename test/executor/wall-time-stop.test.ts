/**
 * A run stopped at its wall-time limit is reported at warn level with where it was (pool.ts,
 * WallTimeStop): whether its worker had started it, whether it was queued behind another run, and the
 * key operations it was waiting on. Never its parameters or code.
 */
import { expect } from "chai";
import { ActionExecutor, type ExecutorLogger } from "../../enclave/executor";
import { makeKeys, makeRunner } from "./helpers";

describe("executor: where a run stopped at its wall-time limit was", function () {
  this.timeout(30_000);
  const keys = makeKeys();

  function capture(): {
    logger: ExecutorLogger;
    lines: Array<{ fields: Record<string, unknown>; message: string }>;
  } {
    const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
    return { lines, logger: { warn: (fields, message) => lines.push({ fields, message }) } };
  }

  it("a run busy in its own code: started in the worker, no key operation pending", async function () {
    const { logger, lines } = capture();
    const ex = new ActionExecutor({ keys, poolSize: 1, limits: { wallTimeMs: 300 }, logger });
    try {
      await ex.ready();
      const run = makeRunner(ex, keys);
      const r = await run(`for (;;) {}`, { jsParams: { secretish: "do-not-log-me" } });
      expect(r.error?.code).to.equal("timeout");
      expect(lines).to.have.length(1);
      expect(lines[0].message).to.match(/wall-time limit/);
      const where = lines[0].fields.executorStop as Record<string, unknown>;
      expect(where).to.include({
        startedInWorker: true,
        pipelined: false,
        releaseAsked: false,
        signerThread: 0,
      });
      expect(where.wallTimeMs).to.equal(300);
      expect(where.keyOps).to.deep.equal({
        asked: 0,
        waitingForTurn: 0,
        serving: 0,
        cryptoThread: 0,
        cryptoWaiting: 0,
      });
      expect(JSON.stringify(lines)).not.to.contain("do-not-log-me").and.not.to.contain("for (;;)");
    } finally {
      await ex.close();
    }
  });

  it("a run waiting on a key operation the main thread is serving says so", async function () {
    const { logger, lines } = capture();
    const ex = new ActionExecutor({ keys, poolSize: 1, limits: { wallTimeMs: 400 }, logger });
    try {
      await ex.ready();
      // An authorization that never answers: the key operation stays on the main thread.
      const r = await ex.run({
        code: `await Actions.getPublicKey({ pkpId: "0x01" }); return 1;`,
        cid: "QmStallDiagnosis",
        authorizePkp: () => new Promise<string>(() => {}),
      });
      expect(r.error?.code).to.equal("timeout");
      const where = lines[0].fields.executorStop as {
        startedInWorker: boolean;
        keyOps: Record<string, number>;
      };
      expect(where.startedInWorker).to.equal(true);
      expect(where.keyOps).to.include({ asked: 1, serving: 1, waitingForTurn: 0 });
    } finally {
      await ex.close();
    }
  });
});
