/**
 * A worker gives a run the Compartment its account's previous run used, put back as it was made
 * (enclave/executor/worker/compartment-keeper.js; docs/actions.md, "Runs cannot leak into each other").
 * These tests hold that no run can see or change what an earlier run left on its globals, whatever it
 * did to them, that a Compartment never passes from one account to another, and that the run-scoped
 * globals (Lit, LitActions, LitAuth, LitHeaders) answer the run in progress. The executor's
 * `compartmentReuses` count shows which runs were given a Compartment used before, so each test also
 * shows that the case it checks is the reused one (or that the Compartment was dropped).
 */
import { expect } from "chai";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { ActionExecutor, type RunRequest } from "../../enclave/executor";
import { expectOk, makeKeys, makeRunner, OTHER_CID, TEST_CID, type Runner } from "./helpers";

/** What a run sees of the globals an earlier run may have touched: the same as on a new Compartment. */
const CHECK = `async function main() {
  return {
    // First, before this run reads them: the lazy globals and Actions as a new Compartment has them.
    unread: ["console", "crypto", "sleep", "setTimeout"].every(
      (n) => typeof Object.getOwnPropertyDescriptor(globalThis, n).get === "function"),
    actions: Object.getOwnPropertyDescriptor(globalThis, "Actions").writable === true &&
      typeof Actions.signMessage === "function",
    own: Object.getOwnPropertyNames(globalThis).filter((n) => /^(planted|pinned|secret|extra)/.test(n)),
    symbols: Object.getOwnPropertySymbols(globalThis).map(String).filter((s) => s !== "Symbol(Symbol.unscopables)"),
    ethers: typeof ethers.Wallet,
    array: Array.isArray([]),
    url: typeof URL,
    encoder: typeof TextEncoder === "function" && new TextEncoder().encode("a").length,
    console: typeof console.log,
    sleep: typeof sleep,
    secret: typeof secret,
    extensible: Object.isExtensible(globalThis),
    proto: Object.getPrototypeOf(globalThis) === Object.prototype,
    canAdd: (() => { globalThis.extraAdded = 1; return extraAdded === 1; })(),
    lit: Lit.Actions === Actions && LitActions === Actions,
  };
}`;

const CLEAN = {
  unread: true,
  actions: true,
  own: ["extraAdded"],
  symbols: [],
  ethers: "function",
  array: true,
  url: "function",
  encoder: 1,
  console: "function",
  sleep: "function",
  secret: "undefined",
  extensible: true,
  proto: true,
  canAdd: true,
  lit: true,
};

describe("executor: a Compartment used again by the same account's next run", function () {
  this.timeout(120_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;
  const reuses = () => executor.stats().compartmentReuses;
  // A module origin with one module whose state lives in the Compartment that evaluated it.
  let server: http.Server;
  let storeDir: string;

  before(async function () {
    server = http.createServer((_req, res) =>
      res.writeHead(200, { "content-type": "application/javascript" }).end(`export let count = 0;
export function bump() { count += 1; return count; }`),
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-reuse-modules-"));
    // One worker and no reserve: every run of these tests follows the one before on the same worker.
    executor = new ActionExecutor({
      keys,
      poolSize: 1,
      reserveWorkers: 0,
      modules: {
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}/npm/`,
        allowAddresses: ["127.0.0.1"],
        storeDir,
      },
    });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async function () {
    await executor.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    fs.rmSync(storeDir, { recursive: true, force: true });
  });

  it("gives a run that left nothing behind's Compartment to the account's next run", async function () {
    await run(`async function main() { return 1; }`, { account: "a" });
    const before = reuses();
    for (let i = 0; i < 3; i++) expect(expectOk(await run(CHECK, { account: "a" }))).to.deep.equal(CLEAN);
    expect(reuses() - before).to.equal(3);
  });

  // Each plants something on the globals, succeeds, and is followed by CHECK from the same account.
  // reused: whether the Compartment could be put back (then CHECK ran in it), or had to be dropped.
  const plants: Array<{ what: string; code: string; reused: boolean; params?: unknown }> = [
    { what: "a new global", code: `globalThis.planted = { by: "the first run" };`, reused: true },
    { what: "a new symbol-keyed global", code: `globalThis[Symbol("planted")] = 1;`, reused: true },
    {
      what: "a js_params field made a global",
      code: `return secret;`,
      reused: true,
      params: { secret: "s1" },
    },
    {
      what: "a replaced lazy global",
      code: `globalThis.console = "replaced"; globalThis.sleep = 1;`,
      reused: true,
    },
    {
      what: "lazy globals read, and one deleted",
      code: `console.log("x"); typeof crypto; setTimeout(() => {}, 0); delete globalThis.sleep;`,
      reused: false,
    },
    {
      what: "lazy globals read and replaced",
      code: `console.log("x"); typeof crypto; globalThis.setTimeout = "replaced";`,
      reused: true,
    },
    { what: "a replaced Actions", code: `globalThis.Actions = "replaced";`, reused: true },
    {
      what: "Actions redefined as an accessor",
      code: `Object.defineProperty(globalThis, "Actions", { get() { return 1; }, configurable: true });`,
      reused: true,
    },
    {
      what: "a pinned Actions",
      code: `Object.defineProperty(globalThis, "Actions", { value: 1, writable: false, configurable: false });`,
      reused: false,
    },
    {
      what: "a replaced shared global",
      code: `globalThis.ethers = "replaced"; globalThis.Array = null;`,
      reused: false,
    },
    { what: "a deleted shared global", code: `delete globalThis.URL;`, reused: false },
    {
      what: "a shared global redefined as an accessor",
      code: `Object.defineProperty(globalThis, "TextEncoder", { get() { return 1; }, configurable: true });`,
      reused: false,
    },
    {
      what: "a pinned (non-configurable) global",
      code: `Object.defineProperty(globalThis, "pinned", { value: 1, configurable: false });`,
      reused: false,
    },
    {
      what: "a global object made non-extensible",
      code: `Object.preventExtensions(globalThis);`,
      reused: false,
    },
    { what: "a frozen global object", code: `harden(globalThis);`, reused: false },
    {
      what: "a global object with another prototype",
      code: `Object.setPrototypeOf(globalThis, null);`,
      reused: false,
    },
    {
      what: "a shared global deleted and put back",
      code: `const u = URL; delete globalThis.URL; globalThis.URL = u;`,
      reused: false,
    },
  ];
  for (const { what, code, reused, params } of plants) {
    it(`lets no later run see ${what} (${reused ? "put back" : "dropped"})`, async function () {
      const first = await run(`async function main() { ${code} }`, {
        account: "a",
        ...(params === undefined ? {} : { jsParams: params }),
      });
      expect(first.has_error, JSON.stringify(first.error)).to.equal(false);
      const before = reuses();
      expect(expectOk(await run(CHECK, { account: "a" }))).to.deep.equal(CLEAN);
      expect(reuses() - before, "the check ran in the first run's Compartment").to.equal(reused ? 1 : 0);
    });
  }

  it("drops the Compartment of a run that failed, and of one that imported modules", async function () {
    const failed = await run(`async function main() { globalThis.planted = 1; throw new Error("no"); }`, {
      account: "a",
    });
    expect(failed.has_error).to.equal(true);
    let before = reuses();
    expect(expectOk(await run(CHECK, { account: "a" }))).to.deep.equal(CLEAN);
    expect(reuses() - before).to.equal(0);

    // The run after a clean one is reused; CHECK itself leaves a global (extraAdded), removed again.
    before = reuses();
    expect(expectOk(await run(CHECK, { account: "a" }))).to.deep.equal(CLEAN);
    expect(reuses() - before).to.equal(1);

    // A module's state lives in the Compartment that evaluated it: each run starts from a new one.
    const counter = `import { bump } from "counter@1.0.0"; return bump();`;
    expect(expectOk(await run(counter, { account: "a" }))).to.equal(1);
    before = reuses();
    expect(expectOk(await run(counter, { account: "a" }))).to.equal(1);
    expect(reuses() - before, "the run after an import got a new Compartment").to.equal(0);
  });

  it("never gives one account's Compartment to another account's run", async function () {
    await run(`async function main() { globalThis.planted = 1; }`, { account: "a" });
    const before = reuses();
    expect(expectOk(await run(CHECK, { account: "b" }))).to.deep.equal(CLEAN);
    expect(reuses() - before, "b's run got a new Compartment").to.equal(0);
    // Each account keeps its own: a's next run is given a's, b's next run b's.
    expect(expectOk(await run(CHECK, { account: "a" }))).to.deep.equal(CLEAN);
    expect(expectOk(await run(CHECK, { account: "b" }))).to.deep.equal(CLEAN);
    expect(reuses() - before).to.equal(2);
  });

  it("makes the action's top-level declarations anew in each run of the same code in a reused Compartment", async function () {
    // The wrapper evaluated by the first run is called again (compartment-keeper.js, `evaluated`); each
    // call must start from the action's own source, never from what the last call left.
    const counting = `let count = 0;
    const seen = [];
    async function main() {
      count += 1;
      seen.push(count);
      main.calls = (main.calls ?? 0) + 1;
      return [count, seen.length, main.calls];
    }`;
    await run(counting, { account: "d" });
    const before = reuses();
    for (let i = 0; i < 3; i++)
      expect(expectOk(await run(counting, { account: "d" }))).to.deep.equal([1, 1, 1]);
    expect(reuses() - before).to.equal(3);
  });

  it("answers the run in progress from Lit, LitActions, LitAuth and LitHeaders in a reused Compartment", async function () {
    const probe = `async function main() {
      Lit.Actions.setResponse({ response: JSON.stringify({
        cid: Lit.Auth.actionIpfsIds[0],
        litAuth: LitAuth.actionIpfsIds[0],
        header: LitHeaders.get("x-run"),
        same: Lit.Actions === Actions && LitActions === Actions,
        protected: (() => { try { globalThis.Lit = {}; return false; } catch { return true; } })(),
      }) });
    }`;
    const as = (cid: string, header: string): Partial<RunRequest> => ({
      account: "c",
      cid,
      requestHeaders: { "x-run": header },
    });
    await run(probe, as(TEST_CID, "one"));
    const before = reuses();
    const second = expectOk(await run(probe, as(OTHER_CID, "two")));
    expect(reuses() - before).to.equal(1);
    expect(JSON.parse(second as string)).to.deep.equal({
      cid: OTHER_CID,
      litAuth: OTHER_CID,
      header: "two",
      same: true,
      protected: true,
    });
  });
});
