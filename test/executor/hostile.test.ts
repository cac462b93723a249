/**
 * Hostile actions. Each case asserts its exact outcome, then (afterEach) that the pool is back at full
 * strength and the next run in the same pool succeeds.
 */
import { expect } from "chai";
import { ActionExecutor, type RunResult } from "../../enclave/executor";
import { TEST_CID, expectHealthy, makeKeys, makeRunner, pkpIds, type Runner } from "./helpers";

describe("executor: hostile code", function () {
  this.timeout(60_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;

  before(async function () {
    executor = new ActionExecutor({
      keys,
      poolSize: 2,
      limits: { wallTimeMs: 2_000, heapMb: 96, offHeapMb: 64 },
    });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  afterEach(async function () {
    await expectHealthy(executor, run);
  });

  after(async function () {
    await executor.close();
  });

  function expectError(r: RunResult, code: string): void {
    expect(r.has_error, JSON.stringify(r)).to.equal(true);
    expect(r.error?.code, JSON.stringify(r.error)).to.equal(code);
    expect(r.response).to.equal(null);
  }

  function expectOk(r: RunResult): unknown {
    expect(r.has_error, JSON.stringify(r.error) + r.logs).to.equal(false);
    return r.response;
  }

  describe("resource exhaustion", function () {
    it("an infinite synchronous loop times out and keeps its logs", async function () {
      const r = await run(`console.log("before"); while (true) {}`, { limits: { wallTimeMs: 500 } });
      expectError(r, "timeout");
      expect(r.logs).to.equal("before\n");
      expect(r.execution_ms).to.be.within(500, 5000);
    });

    it("an infinite microtask loop times out", async function () {
      const r = await run(`const spin = () => Promise.resolve().then(spin); spin(); return "returned";`, {
        limits: { wallTimeMs: 500 },
      });
      expectError(r, "timeout");
    });

    it("an infinite async loop that awaits resolved promises times out", async function () {
      const r = await run(`async function main() { for (;;) await null; }`, { limits: { wallTimeMs: 500 } });
      expectError(r, "timeout");
    });

    it("deep recursion is a RangeError thrown by the action", async function () {
      const r = await run(`function f(n) { return f(n + 1) + 1; } f(0);`);
      expectError(r, "action_threw");
      expect(r.error?.message).to.equal("RangeError: Maximum call stack size exceeded");
    });

    it("a heap bomb hits the heap limit", async function () {
      const r = await run(`const keep = []; for (;;) keep.push({ a: Math.random(), b: [1, 2, 3] });`, {
        limits: { wallTimeMs: 20_000 },
      });
      expectError(r, "heap_limit");
    });

    it("a doubling string bomb stops at V8's string length limit", async function () {
      const r = await run(`let s = "x"; for (;;) s = s + s;`);
      expectError(r, "action_threw");
      expect(r.error?.message).to.equal("RangeError: Invalid string length");
    });

    it("a bomb of distinct flat strings hits the heap limit", async function () {
      const r = await run(`const keep = []; for (let i = 0; ; i++) keep.push(String(i).repeat(1 << 22));`, {
        limits: { wallTimeMs: 20_000 },
      });
      expectError(r, "heap_limit");
    });

    it("an ArrayBuffer bomb allocating between awaits hits the off-heap limit", async function () {
      const r = await run(
        `const keep = []; for (;;) { keep.push(new ArrayBuffer(8 * 1024 * 1024)); await sleep(1); }`,
        {
          limits: { wallTimeMs: 20_000 },
        },
      );
      expectError(r, "memory_limit");
    });

    it("a typed-array bomb in a synchronous loop hits the off-heap limit", async function () {
      const r = await run(`const keep = []; for (;;) keep.push(new Uint8Array(16 * 1024 * 1024).fill(1));`, {
        limits: { wallTimeMs: 20_000 },
      });
      expectError(r, "memory_limit");
    });

    it("a giant response is refused with response_too_large", async function () {
      const r = await run(`return "x".repeat(2 * 1024 * 1024);`);
      expectError(r, "response_too_large");
    });

    it("a log flood is truncated at the log limit and the run still succeeds", async function () {
      const r = await run(`for (let i = 0; i < 1e5; i++) console.log("line " + i); return "done";`, {
        limits: { maxLogBytes: 10_000 },
      });
      expect(expectOk(r)).to.equal("done");
      expect(Buffer.byteLength(r.logs)).to.be.lessThan(10_200);
      expect(r.logs).to.match(/\[sigil: log limit of 10000 bytes reached; further output dropped\]\n$/);
      expect(r.logs.startsWith("line 0\nline 1\n")).to.equal(true);
    });

    it("a sleep flood hits sleep_limit", async function () {
      const r = await run(`await Promise.all(Array.from({ length: 5000 }, () => sleep(10)));`);
      expectError(r, "sleep_limit");
    });

    it("a sleep longer than maxSleepMs is refused", async function () {
      const r = await run(`await sleep(1e9);`, { limits: { maxSleepMs: 100 } });
      expectError(r, "invalid_argument");
    });

    it("a key-operation flood hits key_ops_limit even if the action catches the error", async function () {
      const r = await run(
        `for (let i = 0; i < 20; i++) { try { await Actions.getAddress({ pkpId: params.pkpId }); } catch {} } return "swallowed";`,
        { jsParams: { pkpId: pkpIds().allowed }, limits: { maxKeyOps: 5 } },
      );
      expectError(r, "key_ops_limit");
      expect(r.key_ops).to.equal(5);
    });

    it("fetch is refused when not enabled, however often it is called", async function () {
      const r = await run(
        `
        let refused = 0;
        for (let i = 0; i < 100; i++) { try { await fetch("http://127.0.0.1:9/"); } catch (e) { if (e.code === "fetch_disabled") refused++; } }
        return refused;`,
        { fetch: false },
      );
      expect(expectOk(r)).to.equal(100);
      expect(r.fetches).to.equal(0);
    });
  });

  describe("escaping the sandbox", function () {
    it("cannot pollute the prototype of any intrinsic", async function () {
      const r = await run(`
        // The run's own global object (also named global) and its params are per-run and writable by design.
        const names = Object.getOwnPropertyNames(globalThis).filter((n) => !["globalThis", "global", "params", "jsParams"].includes(n));
        const polluted = [];
        for (const name of names) {
          const v = globalThis[name];
          for (const target of [v, v && v.prototype]) {
            if ((typeof target !== "object" && typeof target !== "function") || target === null) continue;
            try { target.__polluted = 1; } catch {}
            try { Object.defineProperty(target, "__polluted2", { value: 1 }); } catch {}
            if (Object.prototype.hasOwnProperty.call(target, "__polluted") || Object.prototype.hasOwnProperty.call(target, "__polluted2")) polluted.push(name);
          }
        }
        for (const p of [Object.getPrototypeOf(async function () {}), Object.getPrototypeOf(function* () {}), Object.getPrototypeOf(Uint8Array)]) {
          try { p.__polluted = 1; } catch {}
          if (Object.prototype.hasOwnProperty.call(p, "__polluted")) polluted.push(String(p));
        }
        return { checked: names.length, polluted };`);
      const out = expectOk(r) as { checked: number; polluted: string[] };
      expect(out.polluted).to.deep.equal([]);
      expect(out.checked).to.be.greaterThan(40);
      const after = await run(
        `return [({}).__polluted, [].__polluted, ethers.__polluted, Actions.__polluted, (() => 1).__polluted];`,
      );
      expect(expectOk(after)).to.deep.equal([null, null, null, null, null]);
    });

    it("cannot reach process, require or host globals through constructors", async function () {
      const r = await run(`
        const tries = {
          process: typeof process, require: typeof require, module: typeof module,
          Buffer: typeof Buffer, structuredClone: typeof structuredClone,
        };
        const viaCtor = [];
        for (const f of [console.log, Actions.signMessage, sleep, setTimeout, queueMicrotask, fetch, ethers.Wallet, TextEncoder, () => 1, async () => 1, function* () {}]) {
          try { viaCtor.push(String(f.constructor("return typeof process")())); } catch (e) { viaCtor.push(e.constructor.name); }
        }
        // \`global\` is the run's own global object (older runtimes had it), not the host's.
        return { tries, viaCtor, globalIsOwn: global === globalThis };`);
      const out = expectOk(r) as { tries: Record<string, string>; viaCtor: string[]; globalIsOwn: boolean };
      expect(Object.values(out.tries)).to.deep.equal(Array(5).fill("undefined"));
      expect(out.globalIsOwn).to.equal(true);
      expect(out.viaCtor).to.deep.equal(Array(11).fill("TypeError"));
    });

    it("Error.prepareStackTrace cannot expose host frames", async function () {
      const r = await run(`
        let frames = "not called";
        try { Error.prepareStackTrace = (e, s) => { frames = s.map((f) => typeof f.getThis()); return "x"; }; } catch (e) { frames = "assignment refused"; }
        let stack;
        try { await Actions.signMessage({ pkpId: 5 }); } catch (e) { stack = typeof e.stack; }
        new Error("probe").stack;
        return { frames, stack };`);
      const out = expectOk(r) as { frames: unknown };
      expect(out.frames).to.be.oneOf(["not called", "assignment refused"]);
    });

    it("Error.captureStackTrace cannot reach host objects", async function () {
      const r = await run(`
        const o = {};
        if (typeof Error.captureStackTrace === "function") Error.captureStackTrace(o);
        return typeof o.stack === "string" && !o.stack.includes("sandbox-worker");`);
      expect(expectOk(r)).to.equal(true);
    });

    it("dynamic import( in the source is a syntax_error that says why", async function () {
      const r = await run(`const m = await import("fs");`);
      expectError(r, "syntax_error");
      expect(r.error?.message).to.equal(
        "`import(` is not allowed anywhere in action source, even in a string or comment",
      );
    });

    it("import( inside a string is rejected too", async function () {
      const r = await run(`return "import(x)";`);
      expectError(r, "syntax_error");
    });

    it("eval is absent and the Function constructor is inert", async function () {
      const r = await run(`
        const out = { eval: typeof eval, Compartment: typeof Compartment };
        try { new Function("return 1")(); out.fn = "ran"; } catch (e) { out.fn = e.constructor.name; }
        try { (0, globalThis["ev" + "al"])("1"); out.indirect = "ran"; } catch (e) { out.indirect = e.constructor.name; }
        return out;`);
      expect(expectOk(r)).to.deep.equal({
        eval: "undefined",
        Compartment: "undefined",
        fn: "TypeError",
        indirect: "TypeError",
      });
    });

    it("a direct eval( in the source is a syntax_error", async function () {
      const r = await run(`return eval("1 + 1");`);
      expectError(r, "syntax_error");
      expect(r.error?.message).to.contain("`eval(` is not allowed");
    });

    it("WebAssembly is absent", async function () {
      expect(expectOk(await run(`return typeof WebAssembly;`))).to.equal("undefined");
    });

    it("SharedArrayBuffer and Atomics are absent, so Atomics.wait cannot block", async function () {
      const r = await run(`return [typeof SharedArrayBuffer, typeof Atomics];`);
      expect(expectOk(r)).to.deep.equal(["undefined", "undefined"]);
      const wait = await run(`Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);`);
      expectError(wait, "action_threw");
      expect(wait.error?.message).to.equal("ReferenceError: Atomics is not defined");
    });

    it("ethers cannot be mutated, its crypto cannot be swapped, and it has no providers", async function () {
      const r = await run(`
        const out = {};
        try { ethers.keccak256.register(() => "0x00"); out.register = "ran"; } catch (e) { out.register = "refused"; }
        try { ethers.Wallet.prototype.signMessage = async () => "fake"; out.patch = "ran"; } catch (e) { out.patch = "refused"; }
        try { ethers.LangEn.wordlist().getWord = () => "abandon"; out.wordlist = "ran"; } catch (e) { out.wordlist = "refused"; }
        try { ethers.AbiCoder.defaultAbiCoder().encode = () => "0x"; out.coder = "ran"; } catch (e) { out.coder = "refused"; }
        out.providers = [typeof ethers.JsonRpcProvider, typeof ethers.FetchRequest, typeof ethers.getDefaultProvider, typeof ethers.ethers, typeof ethers.IpcSocketProvider];
        return out;`);
      expect(expectOk(r)).to.deep.equal({
        register: "refused",
        patch: "refused",
        wordlist: "refused",
        coder: "refused",
        providers: ["undefined", "undefined", "undefined", "undefined", "undefined"],
      });
    });
  });

  describe("confusing the runtime", function () {
    it("a Promise subclass with Symbol.species does not confuse the runtime", async function () {
      const r = await run(
        `
        class Evil extends Promise { static get [Symbol.species]() { return Promise; } then(a, b) { return super.then(a, b); } }
        const p = Actions.getAddress({ pkpId: params.pkpId });
        try { p.constructor = Evil; } catch {}
        try { p.then = () => "hijacked"; } catch {}
        async function main() { return await Evil.resolve(await Actions.getAddress({ pkpId: params.pkpId })); }`,
        { jsParams: { pkpId: pkpIds().allowed } },
      );
      expect(expectOk(r)).to.equal(keys.pkpAddress(pkpIds().allowed));
    });

    it("an Array subclass with Symbol.species as the response is serialized as plain data", async function () {
      const r = await run(`
        class A extends Array { static get [Symbol.species]() { throw new Error("species"); } }
        return A.from([1, 2, 3]);`);
      expect(expectOk(r)).to.deep.equal([1, 2, 3]);
    });

    it("a thenable returned from main is awaited like any value", async function () {
      const r = await run(
        `async function main() { return { then(resolve) { resolve("from thenable"); } }; }`,
      );
      expect(expectOk(r)).to.equal("from thenable");
    });

    it("Proxy arguments whose traps throw are an error inside the action, not a crash", async function () {
      const r = await run(`
        const trap = new Proxy({}, { get() { throw new Error("trap"); }, getPrototypeOf() { throw new Error("trap2"); } });
        try { await Actions.signTypedData(trap); } catch (e) { return e.message; }`);
      expect(expectOk(r)).to.equal("trap");
    });

    it("a Proxy response with hostile traps is response_not_json", async function () {
      const r = await run(`return new Proxy({}, { ownKeys() { throw new Error("no keys"); } });`);
      expectError(r, "response_not_json");
      expect(r.error?.message).to.equal("the response is not JSON-serializable: Error: no keys");
    });

    it("a response with a BigInt is response_not_json", async function () {
      expectError(await run(`return { n: 1n };`), "response_not_json");
    });

    it("a thrown object with a throwing message getter is reported without crashing", async function () {
      const r = await run(`throw { get message() { throw new Error("gotcha"); } };`);
      expectError(r, "action_threw");
      expect(r.error?.message).to.equal("a value that could not be printed");
    });

    it("a thrown Error whose name getter loops is ended by the wall-time limit", async function () {
      const r = await run(
        `const e = new Error("x"); Object.defineProperty(e, "name", { get() { for (;;) {} } }); throw e;`,
        {
          limits: { wallTimeMs: 500 },
        },
      );
      expectError(r, "timeout");
    });

    it("thrown non-Error values are reported sensibly", async function () {
      const cases: Array<[string, string]> = [
        [`throw "plain string";`, "plain string"],
        [`throw 42;`, "42"],
        [`throw { reason: "object", n: 1 };`, '{"reason":"object","n":1}'],
        [`throw undefined;`, "undefined"],
        [`throw null;`, "null"],
        [`throw Symbol("s");`, "Symbol(s)"],
        [`throw 10n;`, "10"],
      ];
      for (const [code, message] of cases) {
        const r = await run(code);
        expectError(r, "action_threw");
        expect(r.error?.message, code).to.equal(message);
      }
    });

    it("an unhandled rejection is logged and fails the run, not the worker", async function () {
      const r = await run(`Promise.reject(new Error("nobody listens")); return "fine";`);
      expectError(r, "unhandled_rejection");
      expect(r.logs).to.equal("[sigil: unhandled rejection] Error: nobody listens\n");
      await expectHealthy(executor, run);
    });

    it("a syntax error is syntax_error", async function () {
      const r = await run(`function (`);
      expectError(r, "syntax_error");
      expect(r.error?.message).to.match(/^SyntaxError: /);
    });

    it("an HTML comment in the source is a syntax_error that says why", async function () {
      const r = await run(`const a = 1; <!-- comment`);
      expectError(r, "syntax_error");
      expect(r.error?.message).to.equal("`<!--` and `-->` are not allowed anywhere in action source");
    });
  });

  describe("isolation between runs", function () {
    it("an action cannot read another run's data", async function () {
      const writer = await run(
        `
        globalThis.secret = params.secret;
        try { Object.prototype.secret = params.secret; } catch {}
        try { Actions.secret = params.secret; } catch {}
        try { ethers.secret = params.secret; } catch {}
        try { console.secret = params.secret; } catch {}
        /secret:(\w+)/.exec("secret:" + params.secret); // legacy RegExp.$1 would keep the match
        return globalThis.secret;`,
        { jsParams: { secret: "s3cr3t" } },
      );
      expect(expectOk(writer)).to.equal("s3cr3t");
      // Run enough readers that both workers (the writer's included) are covered.
      for (let i = 0; i < 4; i++) {
        const reader = await run(
          `return [globalThis.secret, ({}).secret, Actions.secret, ethers.secret, console.secret, typeof params.secret, RegExp.$1, RegExp.lastMatch];`,
        );
        expect(expectOk(reader)).to.deep.equal([null, null, null, null, null, "undefined", null, null]);
      }
    });

    it("work left running by a finished run never acts in a later run", async function () {
      const first = await run(
        `
        (async () => { await sleep(200); console.log("stale"); await Actions.signMessage({ pkpId: params.pkpId, message: "stale" }); })();
        Actions.setResponse({ response: "first" });`,
        { jsParams: { pkpId: pkpIds().allowed } },
      );
      // The run waits for its own pending sleep, so the stale work happens inside the first run.
      expect(expectOk(first)).to.equal("first");
      expect(first.logs).to.equal("stale\n");
      expect(first.key_ops).to.equal(1);
      const second = await run(`await sleep(300); return "second";`);
      expect(expectOk(second)).to.equal("second");
      expect(second.logs).to.equal("");
      expect(second.key_ops).to.equal(0);
    });

    it("a worker killed mid-run ends that run with worker_crashed and is replaced", async function () {
      const restarts = executor.stats().restarts;
      // The action's first key operation tells the test it is running (its log line was sent before).
      let started!: () => void;
      const running = new Promise<void>((r) => (started = r));
      const pending = executor.run({
        code: `console.log("started"); await Actions.getAddress({ pkpId: params.pkpId }); await sleep(5000); return "never";`,
        cid: TEST_CID,
        jsParams: { pkpId: pkpIds().allowed },
        authorizePkp: async (id: string) => {
          started();
          return id;
        },
      });
      await running;
      expect(executor.crashBusyWorkers()).to.equal(1);
      const r = await pending;
      expectError(r, "worker_crashed");
      expect(r.logs).to.equal("started\n");
      expect(executor.stats().restarts).to.equal(restarts + 1);
    });
  });
});
