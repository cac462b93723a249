/**
 * A run pays only for the capabilities it reads (docs/actions.md, "How the sandbox is built"): console,
 * sleep, fetch, the timers and crypto are made on first read, each member of Actions is hardened on
 * first read through accessors shared by every run, and each worker makes the next run's Compartment
 * ahead. None of that may be visible to an action as anything but the same API: these tests hold the
 * shapes an action can observe, and that a Compartment made ahead is still the run's alone.
 */
import { expect } from "chai";
import { ActionExecutor } from "../../enclave/executor";
import { expectOk, makeKeys, makeRunner, pkpIds, type Runner } from "./helpers";

describe("executor: capabilities made on first read", function () {
  this.timeout(60_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  let run: Runner;

  before(async function () {
    // One worker: consecutive runs share it, and each takes the Compartment it made while idle.
    executor = new ActionExecutor({ keys, poolSize: 1, reserveWorkers: 0 });
    await executor.ready();
    run = makeRunner(executor, keys);
  });

  after(async function () {
    await executor.close();
  });

  it("gives each Actions member as one function, the same on every read, aliases included", async function () {
    const out = expectOk(
      await run(`async function main() {
        return {
          same: Actions.signMessage === Actions.signMessage,
          alias: Actions.Encrypt === Actions.encrypt && Lit.Actions.Decrypt === LitActions.decrypt,
          litIsActions: Lit.Actions === Actions && LitActions === Actions,
          kind: typeof Actions.getPublicKey,
          frozen: Object.isFrozen(Actions) && Object.isFrozen(Actions.signMessage),
          keys: Object.keys(Actions),
          // Every member is a function, but the two namespaces of chain helpers: frozen objects of functions.
          spread: Object.entries({ ...Actions }).every(([k, f]) =>
            k === "solana" || k === "bitcoin"
              ? Object.isFrozen(f) && Object.values(f).every((g) => typeof g === "function")
              : typeof f === "function"),
        };
      }`),
    );
    expect(out).to.deep.equal({
      same: true,
      alias: true,
      litIsActions: true,
      kind: "function",
      frozen: true,
      // The same names, in the same order, as when Actions was a plain object of functions.
      keys: [
        "showImportDetails",
        "getPublicKey",
        "getAddress",
        "signEcdsa",
        "signMessage",
        "signTypedData",
        "signTransaction",
        "sendTransaction",
        "getSigner",
        "encrypt",
        "decrypt",
        "getPrivateKey",
        "getActionPrivateKey",
        "getActionPublicKey",
        "getActionAddress",
        "setResponse",
        "signEd25519",
        "signSchnorr",
        "solana",
        "bitcoin",
        "Encrypt",
        "Decrypt",
        "getLitActionPrivateKey",
        "getLitActionPublicKey",
        "getLitActionWalletAddress",
      ],
      spread: true,
    });
  });

  it("binds a member read off Actions to the run, as before (destructured, then called)", async function () {
    const { allowed } = pkpIds();
    const out = expectOk(
      await run(
        `async function main(p) {
          const { getAddress, getPublicKey } = Actions;
          return { address: await getAddress({ pkpId: p.pkpId }), key: await getPublicKey({ pkpId: p.pkpId }) };
        }`,
        { jsParams: { pkpId: allowed } },
      ),
    ) as { address: string; key: string };
    expect(out.address).to.equal(keys.pkpAddress(allowed));
    expect(out.key).to.equal(keys.pkpPublicKey(allowed));
  });

  it("answers a member only for the run's own Actions object, and cannot be redefined", async function () {
    const out = expectOk(
      await run(`async function main() {
        const getter = Object.getOwnPropertyDescriptor(Actions, "signMessage").get;
        let foreign;
        try { getter.call({}); foreign = "answered"; } catch (e) { foreign = e.constructor.name; }
        const derived = typeof Object.create(Actions).signMessage;
        let redefined;
        try { Object.defineProperty(Actions, "signMessage", { value: 1 }); redefined = "redefined"; }
        catch (e) { redefined = e.constructor.name; }
        return { foreign, derived, redefined, getterFrozen: Object.isFrozen(getter) };
      }`),
    );
    expect(out).to.deep.equal({
      foreign: "TypeError",
      derived: "function",
      redefined: "TypeError",
      getterFrozen: true,
    });
  });

  it("keeps the lazily made globals enumerable, assignable and working", async function () {
    const out = expectOk(
      await run(`async function main() {
        const listed = ["console", "fetch", "sleep", "setTimeout", "setInterval", "clearTimeout",
          "clearInterval", "queueMicrotask"].filter((n) => Object.keys(globalThis).includes(n));
        globalThis.sleep = "replaced before first read";
        const replaced = sleep;
        const fired = await new Promise((resolve) => setTimeout(() => resolve("fired"), 1));
        console.log("logged");
        return { listed: listed.length, replaced, fired, frozenTimer: Object.isFrozen(setTimeout) };
      }`),
    );
    expect(out).to.deep.equal({
      listed: 8,
      replaced: "replaced before first read",
      fired: "fired",
      frozenTimer: true,
    });
  });

  it("gives every run a Compartment of its own: nothing a run leaves on its globals reaches the next", async function () {
    const plant = `async function main() {
      globalThis.planted = "by the first run";
      Object.defineProperty(globalThis, "pinned", { value: 1, configurable: false });
      return typeof planted;
    }`;
    expect(expectOk(await run(plant))).to.equal("string");
    for (let i = 0; i < 3; i++) {
      // The worker has made its next Compartment while idle between these runs.
      await new Promise((r) => setTimeout(r, 20));
      const seen = expectOk(
        await run(`async function main() { return [typeof globalThis.planted, typeof globalThis.pinned]; }`),
      );
      expect(seen).to.deep.equal(["undefined", "undefined"]);
    }
  });
});
