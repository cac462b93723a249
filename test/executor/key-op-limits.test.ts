/**
 * Key operations and the main thread (issue 13, item 4): argument sizes are limited in the worker and
 * again on the main thread, and the heavy operations (encrypt, decrypt, signatures by PKPs other than
 * the run's own) are computed by the crypto thread, byte-for-byte as the enclave computes them.
 */
import { expect } from "chai";
import fc from "fast-check";
import { ethers } from "ethers";
import { DEFAULT_LIMITS } from "../../enclave/executor";
import { cryptoThread, type CryptoThreadClient } from "../../enclave/executor/crypto-thread";
import { InFlightLimit } from "../../enclave/executor/in-flight-limit";
import { serveKeyOp } from "../../enclave/executor/key-ops";
import { keyOpArgsProblem } from "../../enclave/executor/worker/arg-limits";
import type { KeyCapabilities } from "../../enclave/capabilities";
import { expectHealthy, makeAuthorizer, makeKeys, pkpIds, TEST_CID, useExecutor } from "./helpers";

const MAX = DEFAULT_LIMITS.maxKeyOpPayloadBytes;

describe("executor: key-operation argument limits", function () {
  this.timeout(30_000);
  const keys = makeKeys();
  const { allowed } = pkpIds();
  const pool = useExecutor(keys);
  const run = pool.run;

  it("has the documented defaults", function () {
    expect(DEFAULT_LIMITS).to.include({ maxKeyOpPayloadBytes: 128 * 1024, maxTypedDataBytes: 32 * 1024 });
  });

  it("an encrypt over the limit throws key_op_too_large, which the action can catch", async function () {
    const r = await run(
      `async function main(p) {
        try { await Actions.encrypt({ pkpId: p.pkpId, message: "x".repeat(${MAX + 1}) }); }
        catch (e) { return e.code + " | " + e.message; }
      }`,
      { jsParams: { pkpId: allowed } },
    );
    expect(r.response).to.equal(
      `key_op_too_large | key_op_too_large: encrypt: message is more than ${MAX} bytes; the limit is ${MAX} (maxKeyOpPayloadBytes)`,
    );
    expect(r.key_ops).to.equal(0); // refused in the worker: it reached no key
  });

  it("uncaught, it is the run's error code", async function () {
    const r = await run(
      `await Actions.signMessage({ pkpId: params.pkpId, message: new Uint8Array(${MAX + 1}) });`,
      {
        jsParams: { pkpId: allowed },
      },
    );
    expect(r.error?.code).to.equal("key_op_too_large");
  });

  it("the limit is configurable per run", async function () {
    const code = `return await Actions.signMessage({ pkpId: params.pkpId, message: "x".repeat(101) });`;
    const refused = await run(code, { jsParams: { pkpId: allowed }, limits: { maxKeyOpPayloadBytes: 100 } });
    expect(refused.error?.code).to.equal("key_op_too_large");
    const served = await run(code, { jsParams: { pkpId: allowed }, limits: { maxKeyOpPayloadBytes: 101 } });
    expect(served.response).to.equal(keys.pkpSignMessage(allowed, "x".repeat(101)));
  });

  it("typed data over maxTypedDataBytes is refused", async function () {
    const r = await run(
      `return await Actions.signTypedData({ pkpId: params.pkpId, domain: { name: "x".repeat(2000) },
         types: { A: [{ name: "a", type: "string" }] }, value: { a: "b" } });`,
      { jsParams: { pkpId: allowed }, limits: { maxTypedDataBytes: 1000 } },
    );
    expect(r.error?.code).to.equal("key_op_too_large");
    expect(r.error?.message).to.contain("signTypedData: typed data is more than 1000 bytes");
  });

  it("the size estimate never undercounts JSON (property)", function () {
    const limits = { maxKeyOpPayloadBytes: MAX, maxTypedDataBytes: 1 << 30 };
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        // Whatever is over the limit as JSON is refused; anything far below it is served.
        const json = JSON.stringify([{}, {}, value]);
        const tight = { ...limits, maxTypedDataBytes: Buffer.byteLength(json) - 1 };
        const args = { domain: {}, types: {}, value };
        expect(keyOpArgsProblem("pkpSignTypedData", args, tight)).to.not.equal(null);
        expect(keyOpArgsProblem("pkpSignTypedData", args, limits)).to.equal(null);
      }),
      { numRuns: 300 },
    );
  });

  it("leaves the pool healthy", async function () {
    await expectHealthy(pool.executor, run);
  });
});

describe("executor: heavy key operations off the main thread", function () {
  this.timeout(30_000);
  const enclave = makeKeys();
  const { allowed, second } = pkpIds();
  /** The enclave, recording which heavy operations the main thread computed itself. */
  const inMain: string[] = [];
  const heavy = new Set(["pkpEncrypt", "pkpDecrypt", "pkpSignDigest", "pkpSignMessage", "pkpSignTypedData"]);
  const keys = new Proxy(enclave, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        if (heavy.has(String(prop))) inMain.push(String(prop));
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as KeyCapabilities;
  const pool = useExecutor(keys);
  const run = pool.run;

  beforeEach(() => {
    inMain.length = 0;
  });

  const typed = {
    domain: { name: "Shop", version: "1", chainId: 8453 },
    types: {
      Order: [
        { name: "to", type: "address" },
        { name: "amount", type: "uint256" },
      ],
    },
    value: { to: "0x" + "11".repeat(20), amount: "1000" },
  };

  it("signatures by another PKP: computed off the main thread, identical to the enclave's", async function () {
    const digest = ethers.keccak256(ethers.toUtf8Bytes("d"));
    const r = await run(
      `async function main(p) {
        return [
          await Actions.signEcdsa({ pkpId: p.pkpId, digest: p.digest }),
          await Actions.signMessage({ pkpId: p.pkpId, message: "hello" }),
          await Actions.signTypedData({ pkpId: p.pkpId, ...p.typed }),
        ];
      }`,
      { jsParams: { pkpId: second, digest, typed } },
    );
    expect(r.error).to.equal(undefined);
    expect(r.response).to.deep.equal([
      enclave.pkpSignDigest(second, digest),
      enclave.pkpSignMessage(second, "hello"),
      enclave.pkpSignTypedData(second, typed.domain, typed.types, typed.value),
    ]);
    expect(inMain).to.deep.equal([]);
  });

  it("encrypt and decrypt: off the main thread, interchangeable with the enclave's", async function () {
    const fromEnclave = enclave.pkpEncrypt(allowed, "sealed by the enclave");
    inMain.length = 0;
    const r = await run(
      `async function main(p) {
        const c = await Actions.encrypt({ pkpId: p.pkpId, message: "sealed in the crypto thread" });
        return { c, opened: await Actions.decrypt({ pkpId: p.pkpId, ciphertext: p.fromEnclave }) };
      }`,
      { jsParams: { pkpId: allowed, fromEnclave } },
    );
    expect(inMain).to.deep.equal([]);
    const { c, opened } = r.response as { c: string; opened: string };
    expect(opened).to.equal("sealed by the enclave");
    expect(Buffer.from(enclave.pkpDecrypt(allowed, c)).toString()).to.equal("sealed in the crypto thread");
  });

  it("a tampered ciphertext is decryption_failed, as from the enclave", async function () {
    const c = enclave.pkpEncrypt(allowed, "x");
    const flipped = c.slice(0, -1) + (c.endsWith("0") ? "1" : "0");
    const r = await run(
      `try { await Actions.decrypt({ pkpId: params.pkpId, ciphertext: params.c }); } catch (e) { return e.message; }`,
      { jsParams: { pkpId: allowed, c: flipped } },
    );
    expect(r.response).to.equal("decryption_failed: Decryption failed.");
  });

  it("input the crypto thread cannot judge goes to the enclave, which words the error", async function () {
    const r = await run(
      `try { await Actions.signTypedData({ pkpId: params.pkpId, domain: {}, types: { A: [{ name: "a", type: "nope" }] }, value: { a: 1 } }); }
       catch (e) { return e.message; }`,
      { jsParams: { pkpId: allowed } },
    );
    expect(r.response).to.match(/^invalid_typed_data: /);
    expect(inMain).to.deep.equal(["pkpSignTypedData"]);
  });

  it("without a crypto thread, the main thread serves them (same answers)", async function () {
    const { authorizePkp } = makeAuthorizer(enclave, [allowed]);
    const server = { keys: enclave, crypto: null, limits: DEFAULT_LIMITS };
    const answer = await serveKeyOp(server, TEST_CID, authorizePkp, "pkpSignMessage", {
      pkpId: allowed,
      message: "m",
    });
    expect(answer).to.deep.equal({ ok: true, value: enclave.pkpSignMessage(allowed, "m") });
  });

  describe("one run's share of the crypto thread", function () {
    /** A stand-in for the thread that records how many requests it holds at once. */
    function slowThread() {
      const seen = { inFlight: 0, peak: 0, sent: 0 };
      const client = {
        request: async (_req: unknown, key: Uint8Array) => {
          key.fill(0);
          seen.sent++;
          seen.inFlight++;
          seen.peak = Math.max(seen.peak, seen.inFlight);
          await new Promise((r) => setTimeout(r, 5));
          seen.inFlight--;
          return { value: "sealed" };
        },
      } as unknown as CryptoThreadClient;
      return { client, seen };
    }

    it("at most two requests of one run are in the thread at once; the rest wait their turn", async function () {
      const { client, seen } = slowThread();
      const { authorizePkp } = makeAuthorizer(enclave, [allowed]);
      const server = {
        keys: enclave,
        crypto: client,
        limits: DEFAULT_LIMITS,
        cryptoSlots: new InFlightLimit(2),
      };
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          serveKeyOp(server, TEST_CID, authorizePkp, "pkpEncrypt", { pkpId: allowed, plaintext: "p" }),
        ),
      );
      expect(answers.every((a) => a.ok && a.value === "sealed")).to.equal(true);
      expect(seen.peak).to.equal(2);
      expect(seen.sent).to.equal(10);
    });

    it("when the run ends, its waiting requests are dropped: never sent, no key derived", async function () {
      const { client, seen } = slowThread();
      const { authorizePkp } = makeAuthorizer(enclave, [allowed]);
      const slots = new InFlightLimit(2);
      const server = { keys: enclave, crypto: client, limits: DEFAULT_LIMITS, cryptoSlots: slots };
      const pending = Array.from({ length: 6 }, () =>
        serveKeyOp(server, TEST_CID, authorizePkp, "pkpEncrypt", { pkpId: allowed, plaintext: "p" }),
      );
      await new Promise((r) => setTimeout(r, 1));
      slots.close();
      const answers = await Promise.all(pending);
      expect(seen.sent).to.equal(2);
      expect(answers.filter((a) => a.ok)).to.have.length(2);
    });
  });

  it("the crypto thread zeroes the caller's key copy at once", async function () {
    const thread = cryptoThread();
    expect(thread).to.not.equal(null);
    const key = enclave.pkpAesKeyForOp(allowed);
    const pending = thread!.request({ op: "encrypt", plaintext: "z" }, key);
    expect(Array.from(key).every((b) => b === 0)).to.equal(true);
    const answer = await pending;
    expect(Buffer.from(enclave.pkpDecrypt(allowed, answer!.value as string)).toString()).to.equal("z");
  });
});
