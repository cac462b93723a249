/**
 * Pipelining and the run ahead's end racing its wall-time kill (enclave/executor/pool.ts): the worker
 * starts the job queued behind a run as soon as that run is done, without asking the main thread. If
 * the main thread then kills the worker for the run ahead (its timer fired before its "done" was read),
 * the queued job may already have run in part, with effects outside (fetch): it must not run again.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { ActionExecutor } from "../../enclave/executor";
import { expectHealthy, makeKeys, makeRunner } from "./helpers";

describe("executor: pipelining, the run ahead ending at its wall-time limit", function () {
  this.timeout(30_000);
  const keys = makeKeys();
  let server: http.Server;
  let hits = 0;
  let host = "";

  before(async function () {
    server = http.createServer((_req, res) => {
      hits++;
      res.end("ok");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(function () {
    server.close();
  });

  it("a queued job that started in the killed worker is not run a second time", async function () {
    const ex = new ActionExecutor({ keys, poolSize: 1, limits: { wallTimeMs: 400 } });
    try {
      await ex.ready();
      const run = makeRunner(ex, keys);
      hits = 0;
      const started = Date.now();
      const ahead = run(`const t = Date.now(); while (Date.now() - t < 250) {} return "ahead";`);
      await new Promise((r) => setTimeout(r, 20));
      const queued = run(`await fetch("http://${host}/once"); return "queued";`, {
        fetch: { allowHosts: [host], allowAddresses: ["127.0.0.1"] },
      });
      // The main thread is busy past the run ahead's end and its wall-time limit: when it looks again,
      // its timer and the worker's "done" are both waiting, and timers come first.
      await new Promise<void>((resolve) =>
        setImmediate(() => {
          while (Date.now() - started < 600) {
            // busy
          }
          resolve();
        }),
      );
      const [a, q] = await Promise.all([ahead, queued]);
      await new Promise((r) => setTimeout(r, 200));
      // Whatever the answers, the queued action's request went out at most once.
      expect(hits, `ahead: ${JSON.stringify(a.error)}, queued: ${JSON.stringify(q)}`).to.equal(1);
      await expectHealthy(ex, run);
    } finally {
      await ex.close();
    }
  });
});
