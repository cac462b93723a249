/**
 * The run's own PKP (docs/actions.md, "The run's own PKP"): its signatures, public key and address are
 * served in the worker from a key moved there for the run. Every answer must be byte-for-byte the
 * enclave's; anything else must still go to the enclave side, be authorized there and be counted.
 */
import { expect } from "chai";
import * as fc from "fast-check";
import { ethers } from "ethers";
import { ActionExecutor } from "../../enclave/executor";
import { connectSigner } from "../../enclave/executor/pool";
import { Enclave } from "../../enclave";
import { TEST_CID, makeAuthorizer, makeKeys, pkpIds } from "./helpers";

// Plain CommonJS modules of the worker (no types): loaded here, in the main realm, to compare answers.

const { makeRunKey } = require("../../enclave/executor/worker/run-key.js");

const { keccak256Native, hasNativeKeccak } = require("../../enclave/executor/worker/keccak.js");

const { makeCurveClient } = require("../../enclave/executor/worker/curve-client.js");

interface RunKey {
  serve(op: string, args: unknown): Promise<string | undefined> | undefined;
  wipe(): void;
}

interface CurveClient {
  request(op: string, key: Uint8Array, digest?: Uint8Array): Promise<Record<string, unknown> | null>;
}

/** A client of the real signer thread, as an action worker has one (the port does not hold the process). */
function curveClient(): CurveClient {
  const port = connectSigner();
  if (port === null) throw new Error("no signer thread");
  const client = makeCurveClient(port);
  port.unref();
  return client;
}
const curve = curveClient();

function runKeyFor(
  enclave: Enclave,
  pkpId: string,
  guard: { epochs?: Int32Array; notAfterMs?: number } = {},
): { runKey: RunKey; buffer: ArrayBuffer; epochs: Int32Array } {
  const derived = enclave.pkpKeyForRun(pkpId);
  const buffer = new ArrayBuffer(32);
  new Uint8Array(buffer).set(derived);
  derived.fill(0);
  const epochs = guard.epochs ?? new Int32Array(new SharedArrayBuffer(16));
  const grant = {
    pkpId,
    key: buffer,
    slot: 1,
    epoch: epochs[1],
    notAfterMs: guard.notAfterMs ?? Date.now() + 60_000,
  };
  return { runKey: makeRunKey(grant, epochs, curve), buffer, epochs };
}

const TYPED = {
  domain: { name: "Sigil test", version: "1", chainId: 31337, verifyingContract: "0x" + "11".repeat(20) },
  types: {
    EIP712Domain: [{ name: "name", type: "string" }],
    Mail: [
      { name: "to", type: "address" },
      { name: "contents", type: "string" },
      { name: "amount", type: "uint256" },
    ],
  },
  value: { to: "0x" + "22".repeat(20), contents: "hello ✓", amount: "12345678901234567890" },
};

describe("executor: the run's own PKP, served in the worker", function () {
  const keys = makeKeys() as Enclave;
  const { allowed, second, refused } = pkpIds();

  describe("answers (in the main realm, against the enclave)", function () {
    it("uses native code, as production does: libkeccak here, libsecp256k1 in the signer thread", async function () {
      expect(hasNativeKeccak, "keccak binding").to.equal(true);
      // The signer thread answers only with its native binding loaded (it never falls back to JS).
      const key = (makeKeys() as Enclave).pkpKeyForRun(allowed);
      const r = await curve.request("publicKey", key);
      expect(r, "signer thread answer").to.not.equal(null);
      expect("0x" + Buffer.from(r!.publicKey as Uint8Array).toString("hex")).to.equal(
        keys.pkpPublicKey(allowed),
      );
    });

    it("the signer thread refuses malformed requests instead of failing", async function () {
      expect(await curve.request("sign", new Uint8Array(32).fill(1), new Uint8Array(31))).to.equal(null);
      expect(await curve.request("sign", new Uint8Array(31).fill(1), new Uint8Array(32))).to.equal(null);
      expect(await curve.request("privateKey", new Uint8Array(32).fill(1))).to.equal(null);
      expect(await curve.request("sign", new Uint8Array(32), new Uint8Array(32)), "zero key").to.equal(null);
    });

    it("native keccak-256 equals ethers' keccak256 for every length around the rate", async function () {
      for (const n of [0, 1, 31, 32, 135, 136, 137, 271, 272, 273, 1000]) {
        const bytes = ethers.randomBytes(n);
        expect("0x" + keccak256Native(bytes).toString("hex"), `length ${n}`).to.equal(
          ethers.keccak256(bytes),
        );
      }
    });

    it("public key and address are the enclave's, with the id in any case or the address as reference", async function () {
      const { runKey } = runKeyFor(keys, allowed);
      for (const ref of [allowed, allowed.toUpperCase().replace("0X", "0x"), keys.pkpAddress(allowed)]) {
        expect(await runKey.serve("pkpPublicKey", { pkpId: ref })).to.equal(keys.pkpPublicKey(allowed));
        expect(await runKey.serve("pkpAddress", { pkpId: ref })).to.equal(keys.pkpAddress(allowed));
      }
    });

    it("message signatures equal the enclave's for random strings and bytes (property)", async function () {
      const { runKey } = runKeyFor(keys, allowed);
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(fc.string({ unit: "binary" }), fc.uint8Array({ maxLength: 300 })),
          async (message) => {
            if (
              typeof message === "string" &&
              !(message as unknown as { isWellFormed(): boolean }).isWellFormed()
            )
              return;
            const local = await runKey.serve("pkpSignMessage", { pkpId: allowed, message });
            expect(local).to.equal(keys.pkpSignMessage(allowed, message));
          },
        ),
        { numRuns: 200 },
      );
    });

    it("digest signatures equal the enclave's, for hex and for bytes", async function () {
      const { runKey } = runKeyFor(keys, allowed);
      for (let i = 0; i < 20; i++) {
        const digest = ethers.hexlify(ethers.randomBytes(32));
        const expected = keys.pkpSignDigest(allowed, digest);
        expect(await runKey.serve("pkpSignDigest", { pkpId: allowed, digest })).to.equal(expected);
        expect(
          await runKey.serve("pkpSignDigest", { pkpId: allowed, digest: ethers.getBytes(digest) }),
        ).to.equal(expected);
      }
    });

    it("typed-data signatures equal the enclave's (EIP712Domain in types is ignored, as there)", async function () {
      const { runKey } = runKeyFor(keys, allowed);
      const local = await runKey.serve("pkpSignTypedData", { pkpId: allowed, ...TYPED });
      expect(local).to.equal(keys.pkpSignTypedData(allowed, TYPED.domain, TYPED.types, TYPED.value));
    });

    it("different PKPs give different keys (the buffer is the named PKP's)", async function () {
      const a = await runKeyFor(keys, allowed).runKey.serve("pkpAddress", { pkpId: allowed });
      const b = await runKeyFor(keys, second).runKey.serve("pkpAddress", { pkpId: second });
      expect(a).to.equal(keys.pkpAddress(allowed));
      expect(b).to.equal(keys.pkpAddress(second));
      expect(a).to.not.equal(b);
    });
  });

  describe("what it leaves to the enclave side (undefined)", function () {
    const { runKey } = runKeyFor(makeKeys() as Enclave, allowed);

    it("another PKP, by id or by address", async function () {
      expect(await runKey.serve("pkpSignMessage", { pkpId: refused, message: "m" })).to.equal(undefined);
      expect(await runKey.serve("pkpAddress", { pkpId: keys.pkpAddress(second) })).to.equal(undefined);
    });

    it("operations other than signatures, public key and address", async function () {
      for (const op of ["pkpPrivateKey", "pkpEncrypt", "pkpDecrypt", "actionPrivateKey", "constructor"])
        expect(await runKey.serve(op, { pkpId: allowed, plaintext: "x", ciphertext: "x" }), op).to.equal(
          undefined,
        );
    });

    it("input the enclave should judge: malformed digests, typed data, messages and arguments", async function () {
      for (const digest of ["0x12", "0x" + "zz".repeat(32), new Uint8Array(31), 5, undefined])
        expect(await runKey.serve("pkpSignDigest", { pkpId: allowed, digest })).to.equal(undefined);
      expect(await runKey.serve("pkpSignMessage", { pkpId: allowed, message: "\ud800" })).to.equal(undefined);
      expect(await runKey.serve("pkpSignMessage", { pkpId: allowed, message: 5 })).to.equal(undefined);
      expect(
        await runKey.serve("pkpSignTypedData", {
          pkpId: allowed,
          domain: {},
          types: { A: [{ name: "x", type: "nope" }] },
          value: {},
        }),
      ).to.equal(undefined);
      expect(await runKey.serve("pkpSignMessage", null)).to.equal(undefined);
      expect(await runKey.serve("pkpSignMessage", { pkpId: 7, message: "m" })).to.equal(undefined);
    });

    it("everything once its authorization epoch moves: the key is zeroed for good", async function () {
      const own = runKeyFor(keys, allowed);
      expect(await own.runKey.serve("pkpAddress", { pkpId: allowed })).to.equal(keys.pkpAddress(allowed));
      Atomics.add(own.epochs, 0, 1); // another slot: no effect
      expect(await own.runKey.serve("pkpAddress", { pkpId: allowed })).to.equal(keys.pkpAddress(allowed));
      Atomics.add(own.epochs, 1, 1);
      expect(await own.runKey.serve("pkpAddress", { pkpId: allowed })).to.equal(undefined);
      expect(new Uint8Array(own.buffer).every((b) => b === 0)).to.equal(true);
      Atomics.sub(own.epochs, 1, 1); // back to the old value: still gone
      expect(await own.runKey.serve("pkpAddress", { pkpId: allowed })).to.equal(undefined);
    });

    it("everything after notAfterMs (the caller key's expiry)", async function () {
      const own = runKeyFor(keys, allowed, { notAfterMs: Date.now() - 1 });
      expect(await own.runKey.serve("pkpSignMessage", { pkpId: allowed, message: "m" })).to.equal(undefined);
      expect(new Uint8Array(own.buffer).every((b) => b === 0)).to.equal(true);
    });

    it("nothing at all from a malformed grant (and its key bytes are zeroed)", async function () {
      const buffer = new ArrayBuffer(32);
      new Uint8Array(buffer).fill(7);
      const epochs = new Int32Array(new SharedArrayBuffer(16));
      expect(
        makeRunKey({ pkpId: allowed, key: buffer, slot: 9, epoch: 0, notAfterMs: 1e15 }, epochs, curve),
      ).to.equal(null);
      expect(new Uint8Array(buffer).every((b) => b === 0)).to.equal(true);
      const ok = () => {
        const b = new ArrayBuffer(32);
        return { pkpId: allowed, key: b, slot: 0, epoch: 0, notAfterMs: 1e15 };
      };
      expect(makeRunKey(ok(), null, curve)).to.equal(null);
      expect(makeRunKey({ ...ok(), key: new ArrayBuffer(16) }, epochs, curve)).to.equal(null);
      expect(makeRunKey({ ...ok(), pkpId: 5 }, epochs, curve)).to.equal(null);
      expect(makeRunKey({ ...ok(), notAfterMs: "never" }, epochs, curve)).to.equal(null);
      expect(makeRunKey(ok(), epochs, null), "no signer thread").to.equal(null);
      expect(makeRunKey(ok(), epochs, curve)).to.not.equal(null);
    });

    it("everything once wiped, and the key bytes are zero", async function () {
      const own = runKeyFor(keys, allowed);
      expect(await own.runKey.serve("pkpSignMessage", { pkpId: allowed, message: "m" })).to.be.a("string");
      own.runKey.wipe();
      expect(new Uint8Array(own.buffer).every((b) => b === 0)).to.equal(true);
      expect(await own.runKey.serve("pkpSignMessage", { pkpId: allowed, message: "m" })).to.equal(undefined);
      expect(await own.runKey.serve("pkpAddress", { pkpId: allowed })).to.equal(undefined);
    });
  });

  describe("in the executor", function () {
    let executor: ActionExecutor;
    before(async function () {
      executor = new ActionExecutor({ keys, poolSize: 1 });
      await executor.ready();
    });
    after(async function () {
      await executor.close();
    });

    const threeOps = `async function main(p) {
      const a = await Actions.signMessage({ pkpId: p.ref, message: "one" });
      const b = await Actions.signEcdsa({ pkpId: p.ref, digest: "0x" + "ab".repeat(32) });
      const addr = await Actions.getAddress({ pkpId: p.ref });
      return { a, b, addr };
    }`;

    it("serves the run's PKP without asking the authorizer per operation, with the enclave's answers", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      for (const ref of [allowed, keys.pkpAddress(allowed)]) {
        calls.length = 0;
        const r = await executor.run({
          code: threeOps,
          cid: TEST_CID,
          authorizePkp,
          runPkp: { ref: allowed, scope: 1 },
          jsParams: { ref },
        });
        expect(r.has_error, JSON.stringify(r.error)).to.equal(false);
        expect(r.response).to.deep.equal({
          a: keys.pkpSignMessage(allowed, "one"),
          b: keys.pkpSignDigest(allowed, "0x" + "ab".repeat(32)),
          addr: keys.pkpAddress(allowed),
        });
        expect(ethers.verifyMessage("one", (r.response as { a: string }).a)).to.equal(
          keys.pkpAddress(allowed),
        );
        expect(r.key_ops).to.equal(3);
        expect(calls, "only the check when the run was accepted").to.deep.equal([allowed]);
      }
    });

    it("without runPkp every operation is authorized on the enclave side, as before", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      const r = await executor.run({
        code: threeOps,
        cid: TEST_CID,
        authorizePkp,
        jsParams: { ref: allowed },
      });
      expect(r.has_error).to.equal(false);
      expect(r.key_ops).to.equal(3);
      expect(calls).to.deep.equal([allowed, allowed, allowed]);
    });

    it("a runPkp the authorizer refuses is not handed over: the action's operations are refused", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      const r = await executor.run({
        code: threeOps,
        cid: TEST_CID,
        authorizePkp,
        runPkp: { ref: refused, scope: 1 },
        jsParams: { ref: refused },
      });
      expect(r.has_error).to.equal(true);
      expect(r.error?.code).to.equal("pkp_not_authorized");
      expect(calls).to.deep.equal([refused, refused]);
    });

    it("other PKPs in the same run still go to the authorizer", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed, second]);
      const code = `async function main() {
        const a = await Actions.signMessage({ pkpId: "${allowed}", message: "m" });
        const b = await Actions.signMessage({ pkpId: "${second}", message: "m" });
        return [a, b];
      }`;
      const r = await executor.run({ code, cid: TEST_CID, authorizePkp, runPkp: { ref: allowed, scope: 1 } });
      expect(r.response).to.deep.equal([keys.pkpSignMessage(allowed, "m"), keys.pkpSignMessage(second, "m")]);
      expect(calls).to.deep.equal([allowed, second]);
      expect(r.key_ops).to.equal(2);
    });

    it("operations served in the worker count against maxKeyOps, and going over ends the run", async function () {
      const { authorizePkp } = makeAuthorizer(keys, [allowed]);
      const code = `async function main() {
        for (let i = 0; i < 10; i++) {
          try { await Actions.signMessage({ pkpId: "${allowed}", message: "m" + i }); } catch (e) {}
        }
        return "finished";
      }`;
      const r = await executor.run({
        code,
        cid: TEST_CID,
        authorizePkp,
        runPkp: { ref: allowed, scope: 1 },
        limits: { maxKeyOps: 4 },
      });
      expect(r.has_error).to.equal(true);
      expect(r.error?.code).to.equal("key_ops_limit");
      expect(r.key_ops).to.equal(4);
    });

    it("the key does not outlive its run: the next run on the same worker asks the authorizer again", async function () {
      const first = makeAuthorizer(keys, [allowed]);
      await executor.run({
        code: threeOps,
        cid: TEST_CID,
        authorizePkp: first.authorizePkp,
        runPkp: { ref: allowed, scope: 1 },
        jsParams: { ref: allowed },
      });
      const next = makeAuthorizer(keys, []); // this caller may use no PKP at all
      const r = await executor.run({
        code: threeOps,
        cid: TEST_CID,
        authorizePkp: next.authorizePkp,
        jsParams: { ref: allowed },
      });
      expect(r.has_error).to.equal(true);
      expect(r.error?.code).to.equal("pkp_not_authorized");
      expect(next.calls).to.deep.equal([allowed]);
    });

    it("a change to the run's scope during the run sends later operations back to the authorizer", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      const code = `async function main() {
        const before = await Actions.signMessage({ pkpId: "${allowed}", message: "m" });
        await sleep(300);
        let after = null;
        try { after = await Actions.signMessage({ pkpId: "${allowed}", message: "m" }); } catch (e) { after = e.message; }
        return { before, after };
      }`;
      const refuseLater = async (ref: string) => {
        calls.push(ref);
        if (calls.length > 1) throw new Error("revoked");
        return authorizePkp(ref).finally(() => calls.pop());
      };
      const run = executor.run({
        code,
        cid: TEST_CID,
        authorizePkp: refuseLater,
        runPkp: { ref: allowed, scope: 7 },
      });
      await new Promise((r) => setTimeout(r, 150));
      executor.invalidateRunKeys(7);
      const r = await run;
      expect(r.has_error, JSON.stringify(r.error)).to.equal(false);
      const res = r.response as { before: string; after: string };
      expect(res.before).to.equal(keys.pkpSignMessage(allowed, "m"));
      expect(res.after).to.match(/revoked/);
      // Another scope is not affected: its run is served in the worker (authorized once, at its start).
      const { authorizePkp: a2, calls: c2 } = makeAuthorizer(keys, [allowed]);
      const run2 = executor.run({
        code,
        cid: TEST_CID,
        authorizePkp: a2,
        runPkp: { ref: allowed, scope: 2 },
      });
      await new Promise((r) => setTimeout(r, 150));
      executor.invalidateRunKeys(7);
      const o = await run2;
      expect((o.response as { after: string }).after).to.equal(keys.pkpSignMessage(allowed, "m"));
      expect(c2).to.deep.equal([allowed]);
    });

    it("invalidating every scope (after a chain reset) reaches every run", async function () {
      const { authorizePkp } = makeAuthorizer(keys, [allowed]);
      const seen: string[] = [];
      const counting = async (ref: string) => {
        seen.push(ref);
        return authorizePkp(ref);
      };
      const code = `async function main() {
        await Actions.signMessage({ pkpId: "${allowed}", message: "m" });
        await sleep(300);
        await Actions.signMessage({ pkpId: "${allowed}", message: "m" });
        return 1;
      }`;
      const run = executor.run({
        code,
        cid: TEST_CID,
        authorizePkp: counting,
        runPkp: { ref: allowed, scope: 123 },
      });
      await new Promise((r) => setTimeout(r, 150));
      executor.invalidateRunKeys();
      expect((await run).has_error).to.equal(false);
      expect(seen, "start, then the second signature").to.deep.equal([allowed, allowed]);
    });

    it("a run past its notAfterMs asks the authorizer for every operation", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      const r = await executor.run({
        code: threeOps,
        cid: TEST_CID,
        authorizePkp,
        runPkp: { ref: allowed, scope: 1, notAfterMs: Date.now() - 1 },
        jsParams: { ref: allowed },
      });
      expect(r.has_error).to.equal(false);
      expect(calls).to.deep.equal([allowed, allowed, allowed, allowed]);
    });

    it("rejects a malformed runPkp as a caller bug", async function () {
      const { authorizePkp } = makeAuthorizer(keys, [allowed]);
      for (const runPkp of [
        5,
        allowed,
        { ref: allowed },
        { ref: allowed, scope: 1.5 },
        { ref: allowed, scope: 1, notAfterMs: "x" },
      ]) {
        let thrown: unknown;
        try {
          await executor.run({ code: "1", cid: TEST_CID, authorizePkp, runPkp: runPkp as never });
        } catch (e) {
          thrown = e;
        }
        expect(thrown, JSON.stringify(runPkp)).to.be.instanceOf(TypeError);
      }
    });
  });
});
