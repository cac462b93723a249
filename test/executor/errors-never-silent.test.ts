/**
 * A failing action is never reported as a success: undeclared names throw, rejections nobody handled
 * fail the run (strict by default, lenient on request), and js_params are globals that may not hide
 * the runtime's own globals.
 */
import { expect } from "chai";
import { ActionExecutor, type RunResult } from "../../enclave/executor";
import { makeKeys, makeRunner, useExecutor, pkpIds, expectOk } from "./helpers";

function expectError(r: RunResult, code: string, message: string): void {
  expect(r.has_error, JSON.stringify(r)).to.equal(true);
  expect(r.response).to.equal(null);
  expect(r.error).to.deep.equal({ code, message });
}

describe("executor: errors are never silent", function () {
  const keys = makeKeys();
  const { allowed, refused } = pkpIds();
  const pool = useExecutor(keys);
  const run = pool.run;

  describe("undeclared names", function () {
    it("throws ReferenceError when main reads an undeclared name", async function () {
      const r = await run(`async function main({ pkpId }) { return pkpid; }`, { jsParams: { pkpId: "x" } });
      expectError(r, "action_threw", "ReferenceError: pkpid is not defined");
    });

    it("throws ReferenceError for an undeclared name read at the top level", async function () {
      expectError(
        await run(`return { a: totally_missing };`),
        "action_threw",
        "ReferenceError: totally_missing is not defined",
      );
    });

    it("throws ReferenceError when assigning to an undeclared name", async function () {
      expectError(
        await run(`undeclaredTarget = 1; return 1;`),
        "action_threw",
        "ReferenceError: undeclaredTarget is not defined",
      );
    });

    it('keeps typeof of an undeclared name "undefined"', async function () {
      expect(expectOk(await run(`return [typeof window, typeof Deno === "undefined"];`))).to.deep.equal([
        "undefined",
        true,
      ]);
    });

    it("lets a name defined through globalThis be read afterwards", async function () {
      expect(expectOk(await run(`globalThis.later = 5; return later + 1;`))).to.equal(6);
    });

    it("does not disturb declared names, parameters, closures and catch bindings", async function () {
      const code = `
        const a = 1; let b = 2; var c = 3; function f(d) { return d + a; } class K {}
        try { throw 4; } catch (e) { return [f(b), c, e, typeof K, [1].map((x) => x + a)[0]]; }`;
      expect(expectOk(await run(code))).to.deep.equal([3, 3, 4, "function", 2]);
    });
  });

  describe("ES module imports", function () {
    it("refuses an import declaration below the top level with a syntax_error that says why", async function () {
      const r = await run(`async function main() {\n  import { z } from "zod@3.22.4";\n  return 1;\n}`);
      expectError(
        r,
        "syntax_error",
        "import declarations must be at the top level of the action (docs/actions.md, ES module imports)",
      );
    });
  });

  describe("rejections nobody handles (strict, the default)", function () {
    it("fails the run of the classic (async () => { throw })() style", async function () {
      const r = await run(`(async () => { throw new Error("boom"); })();`);
      expectError(r, "unhandled_rejection", "a promise rejected and nothing handled it: Error: boom");
      expect(r.logs).to.equal("[sigil: unhandled rejection] Error: boom\n");
    });

    it("fails the run of a go() whose undeclared name throws after an await", async function () {
      const r = await run(
        `const go = async () => { await sleep(1); Lit.Actions.setResponse({ response: tpyo }); }; go();`,
      );
      expectError(
        r,
        "unhandled_rejection",
        "a promise rejected and nothing handled it: ReferenceError: tpyo is not defined",
      );
    });

    it("fails the run even when the action set its response before the rejection", async function () {
      const r = await run(
        `Lit.Actions.setResponse({ response: "ok" }); Promise.reject(new TypeError("late"));`,
      );
      expectError(r, "unhandled_rejection", "a promise rejected and nothing handled it: TypeError: late");
    });

    it("reports a runtime refusal nobody handled with its own code", async function () {
      const r = await run(
        `const go = async () => { await Lit.Actions.signMessage({ pkpId: "${refused}", message: "m" }); }; go();`,
      );
      expect(r.has_error).to.equal(true);
      expect(r.error?.code).to.equal("pkp_not_authorized");
    });

    it("does not fail the run for a rejection the action handles", async function () {
      const code = `const p = Promise.reject(new Error("x")); try { await p; } catch (e) { return "caught"; }`;
      expect(expectOk(await run(code))).to.equal("caught");
    });
  });

  describe("rejections nobody handles (lenient)", function () {
    it("keeps the run a success when the response was set before the rejection", async function () {
      const r = await run(
        `Lit.Actions.setResponse({ response: "ok" }); Promise.reject(new TypeError("late"));`,
        {
          unhandledRejections: "lenient",
        },
      );
      expect(expectOk(r)).to.equal("ok");
      expect(r.logs).to.equal("[sigil: unhandled rejection] TypeError: late\n");
    });

    it("still fails the run when no response was set before the rejection", async function () {
      const r = await run(`(async () => { throw new Error("early"); })();`, {
        unhandledRejections: "lenient",
      });
      expectError(r, "unhandled_rejection", "a promise rejected and nothing handled it: Error: early");
    });

    it("is chosen per executor", async function () {
      const lenient = new ActionExecutor({ keys, poolSize: 1, unhandledRejections: "lenient" });
      try {
        await lenient.ready();
        const r = await makeRunner(
          lenient,
          keys,
        )(`Lit.Actions.setResponse({ response: 1 }); Promise.reject(1);`);
        expect(expectOk(r)).to.equal(1);
      } finally {
        await lenient.close();
      }
    });

    it("refuses an unknown mode with a TypeError", async function () {
      let thrown: unknown;
      try {
        await run(`return 1;`, { unhandledRejections: "loose" as "lenient" });
      } catch (e) {
        thrown = e;
      }
      expect(thrown).to.be.instanceOf(TypeError);
      expect((thrown as Error).message).to.equal('unhandledRejections must be "strict" or "lenient"');
    });
  });

  describe("js_params as globals", function () {
    it("makes each js_params field a global", async function () {
      const r = await run(`return [pkpId, count + 1, nested.k];`, {
        jsParams: { pkpId: allowed, count: 1, nested: { k: "v" } },
      });
      expect(expectOk(r)).to.deep.equal([allowed, 2, "v"]);
    });

    it("lets the action's own declaration of the same name win", async function () {
      expect(
        expectOk(await run(`const toSign = "mine"; return toSign;`, { jsParams: { toSign: "theirs" } })),
      ).to.equal("mine");
    });

    for (const name of ["ethers", "Lit", "Object", "console", "params"]) {
      it(`refuses a js_params field named ${name} (a runtime global)`, async function () {
        const r = await run(`return 1;`, { jsParams: { [name]: 1 } });
        expectError(
          r,
          "param_shadows_global",
          `js_params field "${name}" has the name of a runtime global; rename the field`,
        );
      });
    }
  });
});
