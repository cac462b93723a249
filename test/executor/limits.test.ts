/** Input limits, per-run overrides, the bounded queue, close(), and the policy-enforcing fetch. */
import { expect } from "chai";
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  ActionExecutor,
  DEFAULT_LIMITS,
  ExecutorBusyError,
  ExecutorClosedError,
  type RunResult,
} from "../../enclave/executor";
import { expectHealthy, makeKeys, makeRunner, type Runner } from "./helpers";

describe("executor: limits, queue and fetch", function () {
  this.timeout(30_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;

  before(async function () {
    executor = new ActionExecutor({ keys, poolSize: 2 });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async function () {
    await executor.close();
  });

  function expectError(r: RunResult, code: string, message?: string): void {
    expect(r.has_error, JSON.stringify(r)).to.equal(true);
    expect(r.error?.code).to.equal(code);
    if (message !== undefined) expect(r.error?.message).to.equal(message);
  }

  describe("limits", function () {
    it("has the documented defaults", function () {
      expect(DEFAULT_LIMITS).to.include({
        wallTimeMs: 30_000,
        heapMb: 128,
        maxCodeBytes: 256 * 1024,
        maxParamsBytes: 64 * 1024,
        maxResponseBytes: 1024 * 1024,
        maxLogBytes: 100 * 1024,
        maxFetches: 10,
      });
    });

    it("refuses code over maxCodeBytes without starting a worker", async function () {
      const code = "// " + "x".repeat(256 * 1024);
      const r = await run(code);
      expectError(r, "code_too_large", `the code is ${Buffer.byteLength(code)} bytes; the limit is 262144`);
      expect(r.execution_ms).to.equal(0);
    });

    it("refuses js_params over maxParamsBytes", async function () {
      const r = await run(`return 1;`, { jsParams: { big: "x".repeat(64 * 1024) } });
      expectError(r, "params_too_large");
    });

    it("refuses js_params that are not JSON", async function () {
      const r = await run(`return 1;`, { jsParams: { n: 1n } });
      expectError(r, "params_not_json", "js_params must be JSON-serializable");
    });

    it("applies per-run overrides", async function () {
      const r = await run(`return "x".repeat(200);`, { limits: { maxResponseBytes: 100 } });
      expectError(r, "response_too_large", "the response is over 100 bytes");
    });

    it("accepts a response exactly at maxResponseBytes", async function () {
      const r = await run(`return "x".repeat(98);`, { limits: { maxResponseBytes: 100 } });
      expect(r.has_error).to.equal(false);
    });

    it("rejects a malformed request with a TypeError (a caller bug, not an action failure)", async function () {
      const e = await executor
        .run({
          code: "return 1;",
          cid: "QmX",
          authorizePkp: async (p: string) => p,
          fetch: { allowHosts: [5 as unknown as string] },
        })
        .then(
          () => null,
          (x: unknown) => x,
        );
      expect(e).to.be.instanceOf(TypeError);
      expect((e as Error).message).to.equal("run(req): fetch.allowHosts must be an array of host names");
    });

    it("rejects invalid limits at construction", function () {
      expect(() => new ActionExecutor({ keys, poolSize: 1, limits: { wallTimeMs: -1 } })).to.throw(
        RangeError,
        "executor limit wallTimeMs must be a positive number",
      );
    });
  });

  describe("queue and lifecycle", function () {
    it("answers ExecutorBusyError when the queue is full, and serves the queued runs", async function () {
      const small = new ActionExecutor({ keys, poolSize: 1, maxQueue: 1 });
      try {
        await small.ready();
        const r = makeRunner(small, keys);
        const first = r(`await sleep(200); return 1;`);
        const second = r(`return 2;`);
        expect(small.stats()).to.include({ busy: 1, queued: 1 });
        const third = r(`return 3;`);
        const err = await third.then(
          () => null,
          (e) => e,
        );
        expect(err).to.be.instanceOf(ExecutorBusyError);
        expect(err.code).to.equal("executor_busy");
        expect(err.retryAfterSeconds).to.be.at.least(1);
        expect((await first).response).to.equal(1);
        expect((await second).response).to.equal(2);
      } finally {
        await small.close();
      }
    });

    it("close() rejects queued and running runs and later calls with ExecutorClosedError", async function () {
      const small = new ActionExecutor({ keys, poolSize: 1 });
      await small.ready();
      const r = makeRunner(small, keys);
      const settle = (p: Promise<RunResult>) =>
        p.then(
          () => null,
          (x: unknown) => x,
        );
      const running = settle(r(`await sleep(1000);`));
      const queued = settle(r(`return 1;`));
      await new Promise((res) => setTimeout(res, 50));
      await small.close();
      for (const e of [await running, await queued, await settle(r(`return 2;`))]) {
        expect(e).to.be.instanceOf(ExecutorClosedError);
      }
      expect(small.stats()).to.include({ alive: 0, busy: 0, queued: 0 });
    });

    it("reports pool statistics", async function () {
      expect(executor.stats()).to.include({ poolSize: 2, alive: 2, busy: 0, queued: 0 });
    });

    it("runs concurrent actions on all workers", async function () {
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => run(`await sleep(50); return ${i};`)),
      );
      expect(results.map((x) => x.response)).to.deep.equal([0, 1, 2, 3, 4, 5]);
    });
  });

  describe("fetch", function () {
    let server: http.Server;
    let host: string;
    let hits: Array<{ method?: string; url?: string; body: string; header?: string }>;

    before(async function () {
      hits = [];
      server = http.createServer((req, res) => {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
          hits.push({
            method: req.method,
            url: req.url,
            body,
            header: req.headers["x-test"] as string | undefined,
          });
          if (req.url === "/json")
            return res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
          if (req.url === "/redirect")
            return res.writeHead(302, { location: "http://example.invalid/" }).end();
          if (req.url === "/slow") return setTimeout(() => res.end("late"), 2_000);
          if (req.url === "/big") return res.end("x".repeat(300_000));
          res.end("echo:" + body);
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    after(async function () {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    afterEach(async function () {
      await expectHealthy(executor, run);
    });

    // The test server is on loopback, which fetch refuses unless the operator allows it.
    const enabled = () => ({ fetch: { allowHosts: [host], allowAddresses: ["127.0.0.1"] } });

    it("fetches from an allowed host and parses JSON", async function () {
      const r = await run(
        `const res = await fetch("http://" + params.host + "/json"); return { status: res.status, ok: res.ok, body: await res.json(), type: res.headers["content-type"] };`,
        {
          ...enabled(),
          jsParams: { host },
        },
      );
      expect(r.response).to.deep.equal({
        status: 200,
        ok: true,
        body: { ok: true },
        type: "application/json",
      });
      expect(r.fetches).to.equal(1);
    });

    it("sends the method, headers and body", async function () {
      hits = [];
      const r = await run(
        `const res = await fetch("http://" + params.host + "/echo", { method: "POST", headers: { "x-test": "yes" }, body: "payload" }); return await res.text();`,
        {
          ...enabled(),
          jsParams: { host },
        },
      );
      expect(r.response).to.equal("echo:payload");
      expect(hits).to.deep.equal([{ method: "POST", url: "/echo", body: "payload", header: "yes" }]);
    });

    it("refuses a host that is not in the allow-list", async function () {
      hits = [];
      const port = host.split(":")[1];
      const r = await run(`await fetch("http://localhost:${port}/json");`, enabled());
      expectError(
        r,
        "fetch_host_not_allowed",
        `host localhost:${port} is not in this run's fetch allow-list`,
      );
      expect(hits).to.deep.equal([]);
    });

    it("refuses non-http schemes", async function () {
      const r = await run(`await fetch("file:///etc/passwd");`, enabled());
      expectError(r, "invalid_argument", "fetch(url): only http and https URLs");
    });

    it("counts fetches and ends the run at maxFetches even if the action catches the error", async function () {
      const r = await run(
        `for (let i = 0; i < 5; i++) { try { await fetch("http://" + params.host + "/json"); } catch {} } return "swallowed";`,
        {
          ...enabled(),
          jsParams: { host },
          limits: { maxFetches: 3 },
        },
      );
      expectError(r, "fetch_limit", "more than 3 fetches in one run");
      expect(r.fetches).to.equal(3);
    });

    it("times out a slow answer with fetch_timeout", async function () {
      const r = await run(`await fetch("http://" + params.host + "/slow");`, {
        ...enabled(),
        jsParams: { host },
        limits: { fetchTimeoutMs: 200 },
      });
      expectError(r, "fetch_timeout", "no complete answer within 200 ms");
    });

    it("does not follow redirects: the 3xx goes back to the action", async function () {
      const r = await run(
        `const res = await fetch("http://" + params.host + "/redirect"); return [res.status, res.headers.location];`,
        {
          ...enabled(),
          jsParams: { host },
        },
      );
      expect(r.response).to.deep.equal([302, "http://example.invalid/"]);
    });

    it("refuses a loopback address the operator did not allow with fetch_address_refused", async function () {
      hits = [];
      const r = await run(`await fetch("http://" + params.host + "/json");`, {
        fetch: {},
        jsParams: { host },
      });
      expectError(
        r,
        "fetch_address_refused",
        `${host} resolves to 127.0.0.1, a loopback address, which this service does not connect to`,
      );
      expect(hits).to.deep.equal([]);
    });

    it("admits a host-only allow-list entry on the default port only", async function () {
      const r = await run(`await fetch("http://" + params.host + "/json");`, {
        fetch: { allowHosts: ["127.0.0.1"], allowAddresses: ["127.0.0.1"] },
        jsParams: { host },
      });
      expectError(r, "fetch_host_not_allowed", `host ${host} is not in this run's fetch allow-list`);
    });

    it("reports a refused connection as fetch_failed", async function () {
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((r) => closed.close(r));
      const r = await run(`await fetch("http://127.0.0.1:${port}/");`, {
        fetch: { allowAddresses: ["127.0.0.1"] },
      });
      expectError(r, "fetch_failed", `request to 127.0.0.1:${port} failed`);
    });

    it("caps the answer's body size", async function () {
      const r = await run(`await fetch("http://" + params.host + "/big");`, {
        ...enabled(),
        jsParams: { host },
        limits: { maxFetchBodyBytes: 100_000 },
      });
      expectError(r, "fetch_response_too_large", "response body over 100000 bytes");
    });
  });
});
