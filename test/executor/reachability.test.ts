/**
 * Nothing an action can reach is shared with another run while writable (docs/actions.md, "Runs cannot
 * leak into each other"). The walk (reachability/walk.action) is itself an action: it walks the
 * compartment's globals and what every endowed API returns or throws, and tags every object that is not
 * frozen with its run's nonce. Its second run on the same worker (a pool of one) must find no object
 * tagged by the first, and neither run may find an object it can neither prove frozen nor tag.
 * WALK_TRACE=count prints how many objects each run walked; WALK_TRACE=paths logs every path walked.
 */
import { expect } from "chai";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { ActionExecutor } from "../../enclave/executor";
import { makeKeys, makeRunner, pkpIds, type Runner } from "./helpers";

const WALK = fs.readFileSync(path.join(__dirname, "reachability", "walk.action"), "utf8");

interface WalkResult {
  objects: number;
  problems: Array<{ path: string; problem: "shared" | "untaggable"; kind: string }>;
}

describe("executor: reachability walk", function () {
  this.timeout(180_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;
  let server: http.Server;
  let url: string;

  before(async function () {
    // Answers any request like a JSON-RPC node would, so providers' calls and fetch have values to walk.
    server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: "0x1" }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    executor = new ActionExecutor({ keys, poolSize: 1, limits: { wallTimeMs: 120_000 } });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async function () {
    await executor.close();
    await new Promise((r) => server.close(r));
  });

  async function walk(nonce: string): Promise<WalkResult> {
    const r = await run(WALK, {
      jsParams: {
        nonce,
        trace: process.env.WALK_TRACE === "paths",
        fixture: { url, pkpId: pkpIds().allowed },
      },
      fetch: { allowAddresses: ["127.0.0.1"] },
      unhandledRejections: "lenient",
      limits: { maxFetches: 10_000, maxLogBytes: 1024 * 1024, maxResponseBytes: 10 * 1024 * 1024 },
    });
    expect(r.has_error, JSON.stringify(r.error) + r.logs.slice(-3000)).to.equal(false);
    return r.response as WalkResult;
  }

  it("finds no writable object shared by two runs on one worker, nor one it cannot prove per-run", async function () {
    const first = await walk("first");
    const second = await walk("second");
    const paths = (w: WalkResult) => w.problems.map((p) => `${p.problem} ${p.kind} ${p.path}`);
    expect(first.objects, `${first.objects} objects walked`).to.be.greaterThan(2000);
    if (process.env.WALK_TRACE === "count")
      console.log(`      walked ${first.objects} and ${second.objects} objects`);
    const found = [...paths(first), ...paths(second)];
    expect(found, `${found.length} paths:\n${found.join("\n")}`).to.deep.equal([]);
  });
});
