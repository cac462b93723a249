/**
 * Action code handed to each worker once per CID (enclave/executor/code-handover.ts on the main thread,
 * worker/code-cache.js in the worker): the main thread records what each worker holds, sends a CID's
 * code with the first run of it a worker gets and the CID alone afterwards. These tests hold what the
 * handover must keep: a worker that does not hold a CID gets its code, two CIDs (or two codes under one
 * CID) are never confused, the bound resets both sides together, and every run still gets a fresh
 * global object and SES's mandatory source checks. Real worker pool, real SES.
 */
import { expect } from "chai";
import { MAX_HELD_CODE_CHARS, MAX_HELD_CODES, SentCode } from "../../enclave/executor/code-handover";
import { expectHealthy, expectOk, makeKeys, OTHER_CID, TEST_CID, useExecutor, waitFor } from "./helpers";
const { makeCodeCache, evaluateOptions, noteEvaluated } = require("../../enclave/executor/worker/code-cache");

const wrap = (code: string) => `(async function () {\n${code}\n})`;

describe("action code handed to a worker once per CID", function () {
  this.timeout(120_000);

  describe("what the main thread sends a worker (code-handover.ts)", () => {
    it("a CID's code with its first run, then the CID alone", () => {
      const sent = new SentCode();
      expect(sent.wire("cidA", "return 1;")).to.deep.equal({
        code: "return 1;",
        holdCode: true,
        forgetCode: false,
      });
      expect(sent.wire("cidA", "return 1;")).to.deep.equal({ holdCode: false, forgetCode: false });
      expect(sent.wire("cidA", "return 1;")).to.deep.equal({ holdCode: false, forgetCode: false });
    });

    it("two CIDs never share what was sent", () => {
      const sent = new SentCode();
      sent.wire("cidA", "return 'a';");
      expect(sent.wire("cidB", "return 'a';").code).to.equal("return 'a';");
      expect(sent.wire("cidB", "return 'a';").code).to.equal(undefined);
      expect(sent.wire("cidA", "return 'a';").code).to.equal(undefined);
    });

    it("other code under a CID already sent goes whole and replaces it", () => {
      const sent = new SentCode();
      sent.wire("cidA", "return 1;");
      expect(sent.wire("cidA", "return 2;")).to.deep.equal({
        code: "return 2;",
        holdCode: true,
        forgetCode: false,
      });
      expect(sent.wire("cidA", "return 2;").code).to.equal(undefined);
      expect(sent.wire("cidA", "return 1;").code).to.equal("return 1;");
    });

    it(`past ${MAX_HELD_CODES} CIDs it starts over and tells the worker to forget`, () => {
      const sent = new SentCode();
      for (let i = 0; i < MAX_HELD_CODES; i++)
        expect(sent.wire(`cid${i}`, `return ${i};`).forgetCode).to.equal(false);
      expect(sent.wire("cid0", "return 0;").code).to.equal(undefined);
      expect(sent.wire("one-more", "return -1;")).to.deep.equal({
        code: "return -1;",
        holdCode: true,
        forgetCode: true,
      });
      // Forgotten on both sides: the first CID's code goes again.
      expect(sent.wire("cid0", "return 0;")).to.deep.equal({
        code: "return 0;",
        holdCode: true,
        forgetCode: false,
      });
      expect(sent.wire("one-more", "return -1;").code).to.equal(undefined);
    });

    it("bounded by length too; code too long to keep goes whole every time and is not kept", () => {
      const sent = new SentCode();
      const half = "x".repeat(MAX_HELD_CODE_CHARS / 2);
      expect(sent.wire("a", half).forgetCode).to.equal(false);
      expect(sent.wire("b", half).forgetCode).to.equal(false);
      expect(sent.wire("c", "y")).to.deep.equal({ code: "y", holdCode: true, forgetCode: true });
      const long = "z".repeat(MAX_HELD_CODE_CHARS + 1);
      for (let i = 0; i < 2; i++) {
        expect(sent.wire("long", long)).to.deep.equal({ code: long, holdCode: false, forgetCode: false });
      }
      expect(sent.wire("c", "y").code).to.equal(undefined);
    });

    it("code without a CID is never kept", () => {
      const sent = new SentCode();
      for (let i = 0; i < 2; i++) {
        expect(sent.wire("", "return 1;")).to.deep.equal({
          code: "return 1;",
          holdCode: false,
          forgetCode: false,
        });
      }
    });
  });

  describe("what the worker holds (worker/code-cache.js)", () => {
    it("keeps the code sent under a CID and resolves the CID alone to the same program", () => {
      const cache = makeCodeCache(wrap);
      const first = { cid: "cidA", code: "return 1;", holdCode: true, forgetCode: false } as Record<
        string,
        unknown
      >;
      cache.receive(first);
      expect(first.code).to.equal(undefined);
      expect(first.program).to.deep.equal({ source: wrap("return 1;"), scanned: false });
      const later = { cid: "cidA", holdCode: false, forgetCode: false } as Record<string, unknown>;
      cache.receive(later);
      expect(later.program).to.equal(first.program);
    });

    it("never resolves a CID to another CID's code, and a CID it does not hold to none", () => {
      const cache = makeCodeCache(wrap);
      cache.receive({ cid: "cidA", code: "return 'a';", holdCode: true });
      cache.receive({ cid: "cidB", code: "return 'b';", holdCode: true });
      const a: Record<string, { source: string }> = { cid: "cidA" } as never;
      const b: Record<string, { source: string }> = { cid: "cidB" } as never;
      const c: Record<string, unknown> = { cid: "cidC" };
      cache.receive(a);
      cache.receive(b);
      cache.receive(c);
      expect(a.program.source).to.equal(wrap("return 'a';"));
      expect(b.program.source).to.equal(wrap("return 'b';"));
      expect(c.program).to.equal(null);
    });

    it("replaces a CID's code when sent other code for it; keeps nothing it was told not to", () => {
      const cache = makeCodeCache(wrap);
      cache.receive({ cid: "cidA", code: "return 1;", holdCode: true });
      cache.receive({ cid: "cidA", code: "return 2;", holdCode: true });
      const m: Record<string, { source: string }> = { cid: "cidA" } as never;
      cache.receive(m);
      expect(m.program.source).to.equal(wrap("return 2;"));
      const once: Record<string, { source: string }> = {
        cid: "once",
        code: "return 3;",
        holdCode: false,
      } as never;
      cache.receive(once);
      expect(once.program.source).to.equal(wrap("return 3;"));
      const again: Record<string, unknown> = { cid: "once" };
      cache.receive(again);
      expect(again.program).to.equal(null);
    });

    it("forgets everything it holds when told, before keeping the message's own code", () => {
      const cache = makeCodeCache(wrap);
      cache.receive({ cid: "cidA", code: "return 1;", holdCode: true });
      cache.receive({ cid: "cidB", code: "return 2;", holdCode: true, forgetCode: true });
      expect(cache.size()).to.equal(1);
      const a: Record<string, unknown> = { cid: "cidA" };
      cache.receive(a);
      expect(a.program).to.equal(null);
    });

    it("skips only SES's optional eval scan, and only for a source SES already evaluated", () => {
      const cache = makeCodeCache(wrap);
      const m: Record<string, object> = { cid: "cidA", code: "return 1;", holdCode: true } as never;
      cache.receive(m);
      expect(evaluateOptions(m.program)).to.equal(undefined);
      noteEvaluated(m.program);
      expect(evaluateOptions(m.program)).to.deep.equal({ __rejectSomeDirectEvalExpressions__: false });
    });
  });

  describe("runs on a real worker", () => {
    const keys = makeKeys();
    const pool = useExecutor(keys);
    const run = pool.run;

    it("two CIDs alternating on one worker each run their own code", async () => {
      for (let i = 0; i < 6; i++) {
        expect(expectOk(await run(`return "a" + params.i;`, { cid: TEST_CID, jsParams: { i } }))).to.equal(
          `a${i}`,
        );
        expect(expectOk(await run(`return "b" + params.i;`, { cid: OTHER_CID, jsParams: { i } }))).to.equal(
          `b${i}`,
        );
      }
    });

    it("other code under a CID the worker holds runs as sent, and so does the first code again", async () => {
      expect(expectOk(await run(`return "first";`, { cid: "cid-changes" }))).to.equal("first");
      expect(expectOk(await run(`return "second";`, { cid: "cid-changes" }))).to.equal("second");
      expect(expectOk(await run(`return "first";`, { cid: "cid-changes" }))).to.equal("first");
    });

    it("every run of a held CID gets a fresh global object", async () => {
      const code = `globalThis.count = (globalThis.count ?? 0) + 1; return globalThis.count;`;
      for (let i = 0; i < 4; i++) expect(expectOk(await run(code, { cid: "cid-count" }))).to.equal(1);
    });

    it("SES's checks still refuse code on every run of its CID", async () => {
      for (let i = 0; i < 2; i++) {
        const r = await run(`// a comment naming eval(x)\nreturn 1;`, { cid: "cid-refused" });
        expect(r.error?.code).to.equal("syntax_error");
        const i2 = await run(`const s = "import(" + "x)"; return s;`, { cid: "cid-refused-import" });
        expect(i2.error?.code).to.equal("syntax_error");
      }
    });

    it(`past ${MAX_HELD_CODES} CIDs a CID run again still gets its code`, async () => {
      const cids = Array.from({ length: MAX_HELD_CODES + 3 }, (_, i) => `cid-bound-${i}`);
      for (const [i, cid] of cids.entries()) expect(expectOk(await run(`return ${i};`, { cid }))).to.equal(i);
      for (const [i, cid] of cids.entries()) expect(expectOk(await run(`return ${i};`, { cid }))).to.equal(i);
    });

    it("a new worker, which holds no code, gets the code of a CID the worker before it held", async () => {
      expect(expectOk(await run(`return "held";`, { cid: "cid-survives" }))).to.equal("held");
      const stuck = run(`await new Promise(() => {});`, { cid: "cid-stuck" });
      await waitFor(() => pool.executor.stats().busy === 1);
      expect(pool.executor.crashBusyWorkers()).to.equal(1);
      expect((await stuck).error?.code).to.equal("worker_crashed");
      await waitFor(() => pool.executor.stats().alive === pool.executor.stats().poolSize);
      expect(expectOk(await run(`return "held";`, { cid: "cid-survives" }))).to.equal("held");
      await expectHealthy(pool.executor, run);
    });
  });
});
