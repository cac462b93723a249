/**
 * One account's runs tamper with what they can reach; later runs of another account on the same workers
 * see no effect and leak nothing (docs/actions.md, "Runs cannot leak into each other"). Each case arms
 * every worker of the pool (one attacker run per worker), runs the victim on every worker, then reads
 * back on every worker whatever the trap collected.
 */
import { expect } from "chai";
import { ethers } from "ethers";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ActionExecutor } from "../../enclave/executor";
import { OTHER_CID, TEST_CID, expectHealthy, expectOk, makeAuthorizer, makeKeys, pkpIds } from "./helpers";

const POOL = 2;

describe("executor: tampering with shared objects", function () {
  this.timeout(60_000);
  const keys = makeKeys();
  let executor: ActionExecutor;
  const { authorizePkp } = makeAuthorizer(keys, [pkpIds().allowed]);

  before(async function () {
    executor = new ActionExecutor({ keys, poolSize: POOL, limits: { wallTimeMs: 5_000 } });
    await executor.ready();
  });

  afterEach(async function () {
    // A fresh pool per case: a trap armed by one case must not be blamed on the next.
    await expectHealthy(executor, (code, extra) =>
      executor.run({ code, cid: TEST_CID, authorizePkp, ...extra }),
    );
    await executor.close();
    executor = new ActionExecutor({ keys, poolSize: POOL, limits: { wallTimeMs: 5_000 } });
    await executor.ready();
  });

  after(async function () {
    await executor.close();
  });

  /** The attacker's runs (account A, its own CID), one per worker; their responses. */
  async function attacker(code: string, jsParams?: unknown): Promise<unknown[]> {
    const out: unknown[] = [];
    for (let i = 0; i < POOL; i++) {
      out.push(expectOk(await executor.run({ code, cid: TEST_CID, authorizePkp, jsParams })));
    }
    return out;
  }

  /** The victim's runs (account B, another CID), two per worker; their responses. */
  async function victim(code: string, jsParams?: unknown): Promise<unknown[]> {
    const out: unknown[] = [];
    for (let i = 0; i < 2 * POOL; i++) {
      out.push(expectOk(await executor.run({ code, cid: OTHER_CID, authorizePkp, jsParams })));
    }
    return out;
  }

  it("a trap on the prototypes a CryptoKey reaches never sees another account's key", async function () {
    // The reproduction of the finding: a setter planted on Node's key-object prototypes for each of
    // their symbol-keyed fields receives every key object constructed later, whose export() is the
    // secret even for a non-extractable key.
    const reach = `
      const key = await crypto.subtle.importKey("raw", new Uint8Array(32), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
      const protos = [];
      for (const o of [key, ...Object.getOwnPropertySymbols(key).map((s) => key[s])]) {
        for (let p = Object.getPrototypeOf(o); p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) protos.push([p, o]);
      }`;
    const armed = await attacker(`${reach}
      let planted = 0;
      for (const [p, o] of protos) {
        for (const s of Object.getOwnPropertySymbols(o)) {
          try {
            Object.defineProperty(p, s, { configurable: true, set(v) { (p.stash ??= []).push(this); Object.defineProperty(this, s, { value: v, writable: true, configurable: true }); } });
            planted++;
          } catch {}
        }
      }
      return planted;`);
    const signatures = await victim(
      `const key = await crypto.subtle.importKey("raw", new Uint8Array(32).fill(0x42), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
       return ethers.hexlify(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode("m"))));`,
    );
    const read = await attacker(`${reach}
      const seen = [];
      for (const [p] of protos) for (const k of p.stash ?? []) { try { seen.push(ethers.hexlify(k.export())); } catch {} }
      return seen;`);
    const expected = ethers.hexlify(
      ethers.computeHmac("sha256", new Uint8Array(32).fill(0x42), ethers.toUtf8Bytes("m")),
    );
    expect(signatures).to.deep.equal(Array(2 * POOL).fill(expected));
    expect(read.flat()).to.not.include("0x" + "42".repeat(32));
    expect(read.flat()).to.deep.equal([]);
    expect(armed).to.deep.equal([0, 0]);
  });

  it("a replaced Headers iterator next never sees another account's headers", async function () {
    await attacker(`
      const proto = Object.getPrototypeOf(new Headers({ a: "1" }).entries());
      try { const next = proto.next; proto.next = function () { const r = next.call(this); (proto.stash ??= []).push(JSON.stringify(r.value)); return r; }; } catch {}
      return null;`);
    const seen = await victim(`
      const h = new Headers({ authorization: "Bearer victim-secret" });
      try { await fetch("http://127.0.0.1:9/", { headers: h }); } catch {}
      return [...h].map(([k, v]) => k + "=" + v);`);
    const read = await attacker(`return Object.getPrototypeOf(new Headers().entries()).stash ?? [];`);
    expect(seen).to.deep.equal(Array(2 * POOL).fill(["authorization=Bearer victim-secret"]));
    expect(read.flat()).to.deep.equal([]);
  });

  it("a replaced URLSearchParams iterator next never sees another account's query", async function () {
    await attacker(`
      const proto = Object.getPrototypeOf(new URLSearchParams("a=1").entries());
      try { const next = proto.next; proto.next = function () { const r = next.call(this); (proto.stash ??= []).push(JSON.stringify(r.value)); return r; }; } catch {}
      return null;`);
    const seen = await victim(
      `return [...new URL("https://example.com/?token=victim-secret").searchParams];`,
    );
    const read = await attacker(`return Object.getPrototypeOf(new URLSearchParams().entries()).stash ?? [];`);
    expect(seen).to.deep.equal(Array(2 * POOL).fill([["token", "victim-secret"]]));
    expect(read.flat()).to.deep.equal([]);
  });

  it("a replaced FixedFormat.from changes no other account's amounts and sees no arguments", async function () {
    await attacker(`
      const FixedFormat = ethers.FixedNumber.from("1").format.constructor;
      try {
        const from = FixedFormat.from;
        FixedFormat.from = function (value) { (FixedFormat.stash ??= []).push(value); const f = from.call(this, value); return from.call(this, "fixed128x" + (f.decimals + 1)); };
      } catch {}
      return null;`);
    const amounts = await victim(`return ethers.FixedNumber.fromString("1.5", "fixed128x18").toHexString();`);
    const read = await attacker(`return ethers.FixedNumber.from("1").format.constructor.stash ?? [];`);
    expect(amounts).to.deep.equal(Array(2 * POOL).fill(ethers.toBeHex(1_500_000_000_000_000_000n, 32)));
    expect(read.flat()).to.deep.equal([]);
  });

  it("a patched DOMException changes no other account's errors and sees none of them", async function () {
    await attacker(`
      let e; try { atob("%"); } catch (x) { e = x; }
      const proto = Object.getPrototypeOf(e);
      try { Object.defineProperty(proto, "name", { configurable: true, get() { (proto.stash ??= []).push(this.message); return "Hacked"; } }); } catch {}
      return null;`);
    const errors = await victim(
      `try { atob("victim-secret%"); } catch (e) { return [e.name, e instanceof Error]; }`,
    );
    const read = await attacker(
      `let e; try { atob("%"); } catch (x) { e = x; } return Object.getPrototypeOf(e).stash ?? [];`,
    );
    expect(errors).to.deep.equal(Array(2 * POOL).fill(["InvalidCharacterError", true]));
    expect(read.flat()).to.deep.equal([]);
  });

  it("a patched Node error class (thrown through ethers) changes no other account's errors", async function () {
    await attacker(`
      let e; try { ethers6.decodeBase64(); } catch (x) { e = x; }
      const proto = Object.getPrototypeOf(e);
      try { proto.toString = function () { (proto.stash ??= []).push(this.message); return "hacked"; }; } catch {}
      return null;`);
    const errors = await victim(
      `try { ethers6.decodeBase64(); } catch (e) { return String(e).slice(0, 35); }`,
    );
    const read = await attacker(
      `let e; try { ethers6.decodeBase64(); } catch (x) { e = x; } return Object.getPrototypeOf(e).stash ?? [];`,
    );
    expect(errors).to.deep.equal(Array(2 * POOL).fill("TypeError [ERR_INVALID_ARG_TYPE]: T"));
    expect(read.flat()).to.deep.equal([]);
  });

  it("a v6 contract's failed emit is not handed to another account's emit", async function () {
    // v6 chains every emit on one module-level promise: a rejected one was awaited by the next emit.
    await attacker(`
      const c = new ethers6.Contract("0x" + "22".repeat(20), ["event Transfer(address indexed from, address indexed to, uint256 value)"]);
      try { c.emit({ fragment: {}, getTopicFilter: async () => { throw new Error("from the attacker"); } }).catch(() => {}); } catch {}
      return null;`);
    const errors = await victim(`
      const c = new ethers6.Contract("0x" + "22".repeat(20), ["event Transfer(address indexed from, address indexed to, uint256 value)"]);
      try { await c.emit("Transfer"); return "emitted"; } catch (e) { return e.message; }`);
    expect(errors).to.deep.equal(
      Array(2 * POOL).fill("invalid_argument: contract events are not available in actions"),
    );
  });

  it("a provider base class's polling started by one run never runs during a later run", async function () {
    // v5's BaseProvider is reached through the endowed provider's prototype chain; its polling runs on
    // the library's own timers, which end with the run that set them.
    await attacker(`
      const BaseProvider = Object.getPrototypeOf(Object.getPrototypeOf(ethers.providers.JsonRpcProvider));
      class Spinner extends BaseProvider {
        async perform() { const end = Date.now() + 300; while (Date.now() < end) {} return 1; }
        async detectNetwork() { return { chainId: 1, name: "homestead" }; }
      }
      const p = new Spinner(1);
      try { p.pollingInterval = 10; p.polling = true; } catch {}
      return null;`);
    const durations = (await victim(
      `const t = Date.now(); await sleep(50); return Date.now() - t;`,
    )) as number[];
    for (const d of durations) expect(d).to.be.lessThan(250);
  });

  it("a base provider cannot send past the fetch policy with ethers' own HTTP client", async function () {
    let hits = 0;
    const server = http.createServer((req, res) => {
      hits++;
      req.resume();
      res.end(JSON.stringify({ jsonrpc: "2.0", id: 42, result: "0x1" }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      const r = await attacker(
        `const Base = Object.getPrototypeOf(ethers.providers.JsonRpcProvider);
         try { return await new Base(params.url, 1).send("eth_chainId", []); } catch (e) { return e.message; }`,
        { url },
      );
      expect(r).to.deep.equal(
        Array(POOL).fill(
          "invalid_argument: ethers' own HTTP client is not available in actions; ethers.providers.JsonRpcProvider sends through fetch",
        ),
      );
      expect(hits).to.equal(0);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
