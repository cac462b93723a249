import { expect } from "chai";
import { ethers } from "ethers";
import { ActionExecutor } from "../../enclave/executor";
import {
  OTHER_CID,
  REFUSAL_MESSAGE,
  TEST_CID,
  makeAuthorizer,
  makeKeys,
  makeRunner,
  pkpIds,
  type Runner,
} from "./helpers";

describe("executor: runtime API", function () {
  const keys = makeKeys();
  const { allowed, second, refused } = pkpIds();
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

  async function ok(code: string, jsParams: unknown = { pkpId: allowed }) {
    const r = await run(code, { jsParams });
    expect(r.has_error, JSON.stringify(r.error) + r.logs).to.equal(false);
    return r.response as Record<string, string>;
  }

  describe("program model", function () {
    it("returns main's return value as the response", async function () {
      expect(await ok(`async function main() { return { a: 1 }; }`)).to.deep.equal({ a: 1 });
    });

    it("passes js_params as main's argument and as the globals params and jsParams", async function () {
      const r = await ok(`async function main(p) { return [p.x, params.x, jsParams.x]; }`, { x: 7 });
      expect(r).to.deep.equal([7, 7, 7]);
    });

    it("uses setResponse when the action calls it, even from an un-awaited async function", async function () {
      const r = await ok(
        `const go = async () => { await sleep(5); Actions.setResponse({ response: "late" }); }; go();`,
      );
      expect(r).to.equal("late");
    });

    it("lets setResponse win over main's return value", async function () {
      expect(await ok(`async function main() { Actions.setResponse({ response: 1 }); return 2; }`)).to.equal(
        1,
      );
    });

    it("uses a top-level return value when there is no main", async function () {
      expect(await ok(`return [1, 2];`)).to.deep.equal([1, 2]);
    });

    it("answers null when the action produces nothing", async function () {
      expect(await ok(`const x = 1;`)).to.equal(null);
    });

    it("captures console output in logs", async function () {
      const r = await run(`console.log("a", 1, { b: 2 }); console.error(new TypeError("bad")); return 0;`);
      expect(r.logs).to.equal('a 1 {"b":2}\nTypeError: bad\n');
    });

    it("accepts the other common console methods", async function () {
      const r = await run(
        `console.dir({ a: 1 }); console.table([1]); console.assert(1 === 2, "math"); console.assert(true, "no"); console.group("g"); console.groupEnd(); return 0;`,
      );
      expect(r.logs).to.equal('{"a":1}\n[1]\nAssertion failed: math\ng\n');
    });

    it("endows Date.now, Math.random, TextEncoder and TextDecoder", async function () {
      const r = await ok(`
        const bytes = new TextEncoder().encode("é");
        return { now: Date.now(), r: Math.random(), bytes: Array.from(bytes), back: new TextDecoder().decode(bytes) };`);
      expect(Math.abs(Number(r.now) - Date.now())).to.be.lessThan(5_000);
      expect(r.r).to.be.a("number");
      expect(r.bytes).to.deep.equal([0xc3, 0xa9]);
      expect(r.back).to.equal("é");
    });

    it("endows ethers v6 as ethers6, and its names v5 lacks on ethers, with hashing, ABI coding and wallets", async function () {
      const r = await ok(`
        const w = new ethers6.Wallet("0x" + "11".repeat(32));
        return { v: ethers6.version, id: ethers.id("x"), abi: ethers.AbiCoder.defaultAbiCoder().encode(["uint256"], [5n]), addr: w.address };`);
      expect(r.v).to.equal(ethers.version);
      expect(r.id).to.equal(ethers.id("x"));
      expect(r.abi).to.equal(ethers.AbiCoder.defaultAbiCoder().encode(["uint256"], [5n]));
      expect(r.addr).to.equal(new ethers.Wallet("0x" + "11".repeat(32)).address);
    });

    it("reports execution time, key operations and fetches", async function () {
      const r = await run(`await Actions.getAddress({ pkpId: params.pkpId }); return 1;`, {
        jsParams: { pkpId: allowed },
      });
      expect(r.key_ops).to.equal(1);
      expect(r.fetches).to.equal(0);
      expect(r.execution_ms).to.be.greaterThan(0);
    });
  });

  describe("PKP operations with derived keys", function () {
    it("getPublicKey returns the PKP's uncompressed public key", async function () {
      const r = await ok(`return await Actions.getPublicKey({ pkpId: params.pkpId });`);
      expect(r).to.equal(keys.pkpPublicKey(allowed));
    });

    it("getAddress returns the PKP's address", async function () {
      expect(await ok(`return await Actions.getAddress({ pkpId: params.pkpId });`)).to.equal(
        keys.pkpAddress(allowed),
      );
    });

    it("accepts the PKP's address in place of its id", async function () {
      const r = await ok(`return await Actions.getPublicKey({ pkpId: params.pkpId });`, {
        pkpId: keys.pkpAddress(second),
      });
      expect(r).to.equal(keys.pkpPublicKey(second));
    });

    it("signEcdsa signs a digest that recovers to the PKP's address", async function () {
      const digest = ethers.keccak256(ethers.toUtf8Bytes("digest me"));
      const sig = await ok(
        `return await Actions.signEcdsa({ pkpId: params.pkpId, digest: params.digest });`,
        {
          pkpId: allowed,
          digest,
        },
      );
      expect(ethers.recoverAddress(digest, sig as unknown as string)).to.equal(keys.pkpAddress(allowed));
    });

    it("signEcdsa accepts the digest as bytes", async function () {
      const digest = ethers.keccak256("0x01");
      const sig = await ok(
        `return await Actions.signEcdsa({ pkpId: params.pkpId, digest: ethers.getBytes(params.digest) });`,
        {
          pkpId: allowed,
          digest,
        },
      );
      expect(ethers.recoverAddress(digest, sig as unknown as string)).to.equal(keys.pkpAddress(allowed));
    });

    it("signMessage makes an EIP-191 signature", async function () {
      const sig = await ok(`return await Actions.signMessage({ pkpId: params.pkpId, message: "hello" });`);
      expect(ethers.verifyMessage("hello", sig as unknown as string)).to.equal(keys.pkpAddress(allowed));
    });

    it("signTypedData makes an EIP-712 signature", async function () {
      const domain = { name: "Sigil", version: "1", chainId: 31337 };
      const types = {
        Mail: [
          { name: "to", type: "address" },
          { name: "amount", type: "uint256" },
        ],
      };
      const value = { to: "0x" + "22".repeat(20), amount: "1000000000000000000000" };
      const sig = await ok(`return await Actions.signTypedData({ pkpId: params.pkpId, ...params.td });`, {
        pkpId: allowed,
        td: { domain, types, value },
      });
      expect(ethers.verifyTypedData(domain, types, value, sig as unknown as string)).to.equal(
        keys.pkpAddress(allowed),
      );
    });

    it("encrypt then decrypt round-trips a message", async function () {
      const r = await ok(`
        const ciphertext = await Actions.encrypt({ pkpId: params.pkpId, message: "secret ✓" });
        return { ciphertext, plaintext: await Actions.decrypt({ pkpId: params.pkpId, ciphertext }) };`);
      expect(r.plaintext).to.equal("secret ✓");
      expect(r.ciphertext).to.match(/^0x[0-9a-f]+$/);
      expect(ethers.toUtf8String(keys.pkpDecrypt(allowed, r.ciphertext))).to.equal("secret ✓");
    });

    it("decrypt with as: bytes returns the raw bytes", async function () {
      const r = await ok(`
        const ciphertext = await Actions.encrypt({ pkpId: params.pkpId, message: new Uint8Array([0, 255, 7]) });
        const bytes = await Actions.decrypt({ pkpId: params.pkpId, ciphertext, as: "bytes" });
        return Array.from(bytes);`);
      expect(r).to.deep.equal([0, 255, 7]);
    });

    it("decrypt of a tampered ciphertext fails with the enclave's code", async function () {
      const r = await run(
        `
        const c = await Actions.encrypt({ pkpId: params.pkpId, message: "x" });
        const bad = c.slice(0, -2) + (c.endsWith("00") ? "01" : "00");
        try { await Actions.decrypt({ pkpId: params.pkpId, ciphertext: bad }); } catch (e) { return e.code; }`,
        { jsParams: { pkpId: allowed } },
      );
      expect(r.response).to.equal("decryption_failed");
    });

    it("an uncaught enclave refusal ends the run with key_op_failed and the enclave's code first", async function () {
      const r = await run(
        `const c = await Actions.encrypt({ pkpId: params.pkpId, message: "x" });
        await Actions.decrypt({ pkpId: params.pkpId, ciphertext: c.slice(0, -2) + (c.endsWith("00") ? "01" : "00") });`,
        { jsParams: { pkpId: allowed } },
      );
      expect(r.has_error).to.equal(true);
      expect(r.error?.code).to.equal("key_op_failed");
      expect(r.error?.message).to.match(/^decryption_failed: /);
    });

    it("getPrivateKey returns the PKP's private key", async function () {
      const pk = await ok(`return await Actions.getPrivateKey({ pkpId: params.pkpId });`);
      expect(new ethers.Wallet(pk as unknown as string).address).to.equal(keys.pkpAddress(allowed));
    });

    it("a PKP that the authorization callback refuses gives a clear error inside the action", async function () {
      const r = await run(
        `
        try { await Actions.signMessage({ pkpId: params.pkpId, message: "m" }); return "signed"; }
        catch (e) { return { code: e.code, message: e.message }; }`,
        { jsParams: { pkpId: refused } },
      );
      expect(r.response).to.deep.equal({
        code: "pkp_not_authorized",
        message: `pkp_not_authorized: PKP ${refused} refused: ${REFUSAL_MESSAGE}`,
      });
    });

    it("an uncaught refusal ends the run with pkp_not_authorized", async function () {
      const r = await run(`await Actions.getPrivateKey({ pkpId: params.pkpId });`, {
        jsParams: { pkpId: refused },
      });
      expect(r.has_error).to.equal(true);
      expect(r.error?.code).to.equal("pkp_not_authorized");
    });

    it("calls the authorization callback for every PKP operation, with what the action passed", async function () {
      const { authorizePkp, calls } = makeAuthorizer(keys, [allowed]);
      const address = keys.pkpAddress(allowed);
      await executor.run({
        code: `await Actions.getAddress({ pkpId: params.a }); await Actions.signMessage({ pkpId: params.b, message: "m" });`,
        cid: TEST_CID,
        jsParams: { a: allowed, b: address },
        authorizePkp,
      });
      expect(calls).to.deep.equal([allowed, address]);
    });

    it("rejects malformed arguments with invalid_argument before reaching the enclave", async function () {
      const r = await run(
        `try { await Actions.signMessage({ pkpId: 5, message: "m" }); } catch (e) { return e.code; }`,
      );
      expect(r.response).to.equal("invalid_argument");
      expect(r.key_ops).to.equal(0);
    });
  });

  describe("action identity key", function () {
    it("getActionPrivateKey is this CID's identity key", async function () {
      const pk = await ok(`return await Actions.getActionPrivateKey();`);
      expect(new ethers.Wallet(pk as unknown as string).address).to.equal(keys.actionAddress(TEST_CID));
    });

    it("getActionPublicKey and getActionAddress default to this CID", async function () {
      const r = await ok(
        `return { pub: await Actions.getActionPublicKey(), addr: await Actions.getActionAddress() };`,
      );
      expect(r).to.deep.equal({ pub: keys.actionPublicKey(TEST_CID), addr: keys.actionAddress(TEST_CID) });
    });

    it("getActionPublicKey and getActionAddress take any CID", async function () {
      const r = await ok(
        `return { pub: await Actions.getActionPublicKey({ cid: params.cid }), addr: await Actions.getActionAddress({ cid: params.cid }) };`,
        {
          cid: OTHER_CID,
        },
      );
      expect(r).to.deep.equal({ pub: keys.actionPublicKey(OTHER_CID), addr: keys.actionAddress(OTHER_CID) });
    });
  });

  describe("reference runtime aliases", function () {
    it("Lit.Actions and LitActions are the same object as Actions", async function () {
      expect(await ok(`return Lit.Actions === Actions && LitActions === Actions;`)).to.equal(true);
    });

    it("Encrypt and Decrypt round-trip through Lit.Actions", async function () {
      const r = await ok(`
        const ciphertext = await Lit.Actions.Encrypt({ pkpId: params.pkpId, message: "challenge" });
        return await LitActions.Decrypt({ pkpId: params.pkpId, ciphertext });`);
      expect(r).to.equal("challenge");
    });

    it("getPrivateKey through LitActions", async function () {
      const pk = await ok(`return await LitActions.getPrivateKey({ pkpId: params.pkpId });`);
      expect(pk).to.equal(keys.pkpPrivateKey(allowed));
    });

    it("getLitActionPrivateKey is the action identity key", async function () {
      expect(await ok(`return await Lit.Actions.getLitActionPrivateKey();`)).to.equal(
        keys.actionPrivateKey(TEST_CID),
      );
    });

    it("getLitActionPublicKey and getLitActionWalletAddress take { ipfsId }", async function () {
      const r = await ok(
        `return {
        pub: await Lit.Actions.getLitActionPublicKey({ ipfsId: params.cid }),
        addr: await LitActions.getLitActionWalletAddress({ ipfsId: params.cid }) };`,
        { cid: OTHER_CID },
      );
      expect(r).to.deep.equal({ pub: keys.actionPublicKey(OTHER_CID), addr: keys.actionAddress(OTHER_CID) });
    });

    it("setResponse through Lit.Actions", async function () {
      expect(await ok(`Lit.Actions.setResponse({ response: JSON.stringify({ ok: true }) });`)).to.equal(
        '{"ok":true}',
      );
    });
  });

  describe("reference samples run unchanged", function () {
    it("hello world", async function () {
      const r = await run(
        `const go = async () => { Lit.Actions.setResponse({ response: "Hello World!" }); };\ngo();`,
      );
      expect(r).to.include({ response: "Hello World!", has_error: false });
    });

    it("hello world with main", async function () {
      const r = await run(`async function main() {\n  return "Hello World!";\n}`);
      expect(r).to.include({ response: "Hello World!", has_error: false });
    });

    it("signs a message with ethers using getLitActionPrivateKey", async function () {
      const r = await run(`
async function main() {
  const wallet = new ethers.Wallet(await Lit.Actions.getLitActionPrivateKey());
  const signature = await wallet.signMessage("Hello from my action");
  return { wallet_address: wallet.address, signature };
}`);
      expect(r.has_error).to.equal(false);
      const { wallet_address, signature } = r.response as { wallet_address: string; signature: string };
      expect(wallet_address).to.equal(keys.actionAddress(TEST_CID));
      expect(ethers.verifyMessage("Hello from my action", signature)).to.equal(wallet_address);
    });

    it("Encrypt then Decrypt of a challenge with a pkpId", async function () {
      const r = await run(
        `
async function main({ pkpId }) {
  const challenge = "challenge-" + Date.now();
  const ciphertext = await Lit.Actions.Encrypt({ pkpId, message: challenge });
  const decrypted = await Lit.Actions.Decrypt({ pkpId, ciphertext });
  return { ok: decrypted === challenge, ciphertext };
}`,
        { jsParams: { pkpId: allowed } },
      );
      expect(r.has_error).to.equal(false);
      expect((r.response as { ok: boolean }).ok).to.equal(true);
    });
  });
});
