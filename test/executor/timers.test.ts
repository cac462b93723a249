/**
 * setTimeout, setInterval, their clear functions and queueMicrotask inside actions: the semantics of
 * the reference runtime (pending timers keep the run alive, an error in a callback is uncaught), bound
 * to the run that made them.
 */
import { expect } from "chai";
import { makeKeys, useExecutor, expectOk as ok, expectHealthy } from "./helpers";

describe("executor: timers", function () {
  const keys = makeKeys();
  const pool = useExecutor(keys);
  const run = pool.run;

  describe("setTimeout", function () {
    it("resolves an awaited promise after the delay", async function () {
      const code = `const t0 = Date.now(); await new Promise((r) => setTimeout(r, 50)); return Date.now() - t0 >= 45;`;
      expect(ok(await run(code))).to.equal(true);
    });

    it("passes extra arguments to the callback", async function () {
      const code = `return await new Promise((r) => setTimeout((a, b) => r(a + b), 1, 2, 3));`;
      expect(ok(await run(code))).to.equal(5);
    });

    it("keeps the run alive until a callback nobody awaits has run", async function () {
      const code = `setTimeout(() => Lit.Actions.setResponse({ response: "late" }), 30); return "early";`;
      expect(ok(await run(code))).to.equal("late");
    });

    it("fires callbacks in delay order", async function () {
      const code = `
        const seen = [];
        setTimeout(() => seen.push(3), 30);
        setTimeout(() => seen.push(1), 0);
        setTimeout(() => seen.push(2), 10);
        await new Promise((r) => setTimeout(r, 60));
        return seen;`;
      expect(ok(await run(code))).to.deep.equal([1, 2, 3]);
    });

    it("is cancelled by clearTimeout, which ends the run's wait for it", async function () {
      const code = `
        let fired = false;
        const id = setTimeout(() => { fired = true; }, 5_000);
        clearTimeout(id);
        Lit.Actions.setResponse({ response: typeof id === "number" && id > 0 });`;
      const t0 = Date.now();
      expect(ok(await run(code))).to.equal(true);
      expect(Date.now() - t0).to.be.below(4_000);
    });

    it("treats a negative, non-numeric or over-2^31 delay as 0", async function () {
      const code = `
        const order = [];
        setTimeout(() => order.push("neg"), -5);
        setTimeout(() => order.push("nan"), "soon");
        setTimeout(() => order.push("huge"), 2 ** 31);
        await new Promise((r) => setTimeout(r, 20));
        return order;`;
      expect(ok(await run(code))).to.deep.equal(["neg", "nan", "huge"]);
    });

    it("refuses a string of code, which would be eval", async function () {
      const r = await run(
        `try { setTimeout("globalThis.x = 1", 0); } catch (e) { return e.name + ": " + e.message; }`,
      );
      expect(ok(r)).to.match(/^TypeError: setTimeout needs a function: a string of code would be evaluated/);
    });

    it("ends the run with action_threw when a callback throws, even while the action awaits", async function () {
      const r = await run(
        `await new Promise(() => setTimeout(() => { throw new Error("boom"); }, 5)); return "unreachable";`,
      );
      expect(r.error).to.deep.include({
        code: "action_threw",
        message: "setTimeout callback threw: Error: boom",
      });
    });
  });

  describe("setInterval", function () {
    it("fires repeatedly until cleared from its own callback", async function () {
      const code = `
        let n = 0;
        const id = setInterval(() => { n++; if (n === 3) clearInterval(id); }, 5);
        await new Promise((r) => setTimeout(r, 100));
        return n;`;
      expect(ok(await run(code))).to.equal(3);
    });

    it("is cleared by clearTimeout too (one id space)", async function () {
      const code = `
        let n = 0;
        const id = setInterval(() => n++, 5);
        await new Promise((r) => setTimeout(r, 22));
        clearTimeout(id);
        const after = n;
        await new Promise((r) => setTimeout(r, 30));
        return [after > 0, n === after];`;
      expect(ok(await run(code))).to.deep.equal([true, true]);
    });

    it("keeps a run that never clears it going until the wall-time limit", async function () {
      const r = await run(`setInterval(() => {}, 10); return 1;`, { limits: { wallTimeMs: 300 } });
      expect(r.error?.code).to.equal("timeout");
    });
  });

  describe("queueMicrotask", function () {
    it("runs the callback before the next timer", async function () {
      const code = `
        const seen = [];
        setTimeout(() => seen.push("timer"), 0);
        queueMicrotask(() => seen.push("micro"));
        await new Promise((r) => setTimeout(r, 10));
        return seen;`;
      expect(ok(await run(code))).to.deep.equal(["micro", "timer"]);
    });

    it("ends the run with action_threw when the callback throws", async function () {
      const r = await run(`queueMicrotask(() => { throw new RangeError("m"); }); await sleep(50); return 1;`);
      expect(r.error).to.deep.include({
        code: "action_threw",
        message: "queueMicrotask callback threw: RangeError: m",
      });
    });
  });

  describe("bounds and isolation", function () {
    it("counts timers and sleeps against one bound of 1000 pending", async function () {
      const r = await run(`for (let i = 0; i < 1001; i++) setTimeout(() => {}, 1000); return 1;`);
      expect(r.error?.code).to.equal("sleep_limit");
    });

    it("never calls a finished run's callback during a later run", async function () {
      // The first run ends by timeout with a timer still pending; the second must not see it fire.
      const first = await run(
        `setTimeout(() => Lit.Actions.setResponse({ response: "leak" }), 200); while (true) {}`,
        {
          limits: { wallTimeMs: 100 },
        },
      );
      expect(first.error?.code).to.equal("timeout");
      const second = await run(`await sleep(400); return "clean";`);
      expect(ok(second)).to.equal("clean");
      await expectHealthy(pool.executor, run);
    });

    it("cannot be replaced for later runs", async function () {
      const r = await run(`try { setTimeout.call = null; } catch (e) { return e.name; } return "patched";`);
      expect(ok(r)).to.equal("TypeError");
    });
  });
});
