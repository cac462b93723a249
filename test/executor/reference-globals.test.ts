/**
 * The reference runtime's globals besides ethers: WebCrypto `crypto`, `Lit.Headers`, `Lit.Auth`,
 * `showImportDetails`, `global`, URL/atob/btoa, and the older `signEcdsa({toSign, publicKey, sigName})`.
 */
import { expect } from "chai";
import { createHash, createHmac } from "node:crypto";
import { ethers } from "ethers";
import { TEST_CID, makeKeys, useExecutor, pkpIds, expectOk as ok } from "./helpers";

describe("executor: reference runtime globals", function () {
  const keys = makeKeys();
  const { allowed, refused } = pkpIds();
  const pool = useExecutor(keys);
  const run = pool.run;

  describe("crypto (WebCrypto)", function () {
    it("fills arrays with getRandomValues and makes v4 UUIDs", async function () {
      const r = ok(
        await run(
          `const a = crypto.getRandomValues(new Uint8Array(32)); return [a.length, a.some((b) => b !== 0), crypto.randomUUID()];`,
        ),
      ) as [number, boolean, string];
      expect(r[0]).to.equal(32);
      expect(r[1]).to.equal(true);
      expect(r[2]).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    });

    it("digests with subtle.digest", async function () {
      const code = `const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode("abc")); return ethers.hexlify(new Uint8Array(d));`;
      expect(ok(await run(code))).to.equal("0x" + createHash("sha256").update("abc").digest("hex"));
    });

    it("signs and verifies an HMAC with importKey/sign/verify", async function () {
      const code = `
        const key = await crypto.subtle.importKey("raw", new TextEncoder().encode("secret"), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
        const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode("msg"));
        return [ethers.hexlify(new Uint8Array(mac)), await crypto.subtle.verify("HMAC", key, mac, new TextEncoder().encode("msg"))];`;
      expect(ok(await run(code))).to.deep.equal([
        "0x" + createHmac("sha256", "secret").update("msg").digest("hex"),
        true,
      ]);
    });

    it("round-trips AES-GCM with encrypt/decrypt and derives bits with PBKDF2", async function () {
      const code = `
        const raw = crypto.getRandomValues(new Uint8Array(32));
        const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
        const iv = crypto.getRandomValues(new Uint8Array(12));
        const ct = await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, new TextEncoder().encode("plain"));
        const pt = new TextDecoder().decode(await crypto.subtle.decrypt({ name: "AES-GCM", iv }, key, ct));
        const base = await crypto.subtle.importKey("raw", new TextEncoder().encode("pw"), "PBKDF2", false, ["deriveBits"]);
        const bits = await crypto.subtle.deriveBits({ name: "PBKDF2", salt: new TextEncoder().encode("salt"), iterations: 1000, hash: "SHA-256" }, base, 256);
        return [pt, new Uint8Array(bits).length];`;
      expect(ok(await run(code))).to.deep.equal(["plain", 32]);
    });

    it("keeps the run alive for a digest awaited in an un-awaited go()", async function () {
      const code = `const go = async () => { const d = await crypto.subtle.digest("SHA-256", new Uint8Array(1)); Lit.Actions.setResponse({ response: new Uint8Array(d).length }); }; go();`;
      expect(ok(await run(code))).to.equal(32);
    });

    it("cannot be patched for later runs", async function () {
      const r = await run(
        `try { crypto.subtle.digest = () => 1; } catch (e) { return e.name; } return "patched";`,
      );
      expect(ok(r)).to.equal("TypeError");
    });
  });

  describe("Lit.Headers, Lit.Auth, showImportDetails, global", function () {
    it("exposes the request's ids as Lit.Headers and LitHeaders", async function () {
      const r = await run(
        `return [Lit.Headers.get("x-request-id"), LitHeaders.get("X-Correlation-Id"), Lit.Headers.has("authorization")];`,
        {
          requestHeaders: { "x-request-id": "req-1", "x-correlation-id": "corr-1" },
        },
      );
      expect(ok(r)).to.deep.equal(["req-1", "corr-1", false]);
    });

    it("makes Lit.Headers read-only", async function () {
      const r = await run(`Lit.Headers.set("x-request-id", "forged");`);
      expect(r.error).to.deep.equal({ code: "action_threw", message: "TypeError: Lit.Headers is read-only" });
    });

    it("describes the action in Lit.Auth and LitAuth", async function () {
      const r = ok(
        await run(
          `return [Lit.Auth.actionIpfsIds, LitAuth.actionIpfsIdStack, Lit.Auth.authSigAddress, Lit.Auth.resources];`,
        ),
      );
      expect(r).to.deep.equal([[TEST_CID], [TEST_CID], null, []]);
    });

    it("answers showImportDetails with no imports", async function () {
      expect(ok(await run(`return Lit.Actions.showImportDetails();`))).to.deep.equal([]);
    });

    it("has global, URL, atob and btoa", async function () {
      const code = `return [global === globalThis, new URL("https://a.example/p?q=1").searchParams.get("q"), atob(btoa("hi"))];`;
      expect(ok(await run(code))).to.deep.equal([true, "1", "hi"]);
    });

    it("answers getLitActionPublicKey and getLitActionWalletAddress for an ipfsId", async function () {
      const code = `return [await Lit.Actions.getLitActionPublicKey({ ipfsId: "${TEST_CID}" }), await Lit.Actions.getLitActionWalletAddress({ ipfsId: "${TEST_CID}" })];`;
      expect(ok(await run(code))).to.deep.equal([
        keys.actionPublicKey(TEST_CID),
        keys.actionAddress(TEST_CID),
      ]);
    });
  });

  describe("older signEcdsa({toSign, publicKey, sigName})", function () {
    const digest = ethers.keccak256(ethers.toUtf8Bytes("legacy"));

    it("signs with the PKP the public key names and reports the named signature", async function () {
      const publicKey = keys.pkpPublicKey(allowed).slice(2); // the older API's keys had no 0x
      const code = `
        const toSign = ethers.utils.arrayify("${digest}");
        return await Lit.Actions.signEcdsa({ toSign, publicKey: "${publicKey}", sigName: "sig1" });`;
      const r = await run(code);
      expect(ok(r)).to.equal("success");
      const sig = r.signatures!.sig1;
      expect(Object.keys(sig)).to.deep.equal(["r", "s", "recid", "signature", "publicKey", "dataSigned"]);
      expect(sig.publicKey).to.equal("0x" + publicKey);
      expect(sig.dataSigned).to.equal(digest);
      expect(ethers.recoverAddress(digest, sig.signature)).to.equal(keys.pkpAddress(allowed));
      expect(sig.signature).to.equal("0x" + sig.r + sig.s + (27 + sig.recid).toString(16));
    });

    it("applies the same authorization: a PKP the caller may not use is refused", async function () {
      const code = `await Lit.Actions.signEcdsa({ toSign: ethers.utils.arrayify("${digest}"), publicKey: "${keys.pkpPublicKey(refused)}", sigName: "s" });`;
      const r = await run(code);
      expect(r.has_error).to.equal(true);
      expect(r.error?.code).to.equal("pkp_not_authorized");
      expect(r.signatures).to.equal(undefined);
    });

    it("refuses a second signature with the same sigName", async function () {
      const pk = keys.pkpPublicKey(allowed);
      const code = `
        const args = { toSign: ethers.utils.arrayify("${digest}"), publicKey: "${pk}", sigName: "dup" };
        await Lit.Actions.signEcdsa(args);
        await Lit.Actions.signEcdsa(args);`;
      expect((await run(code)).error).to.deep.equal({
        code: "invalid_argument",
        message: 'signEcdsa: a signature named "dup" was already made in this run',
      });
    });

    it("refuses toSign that is not 32 bytes", async function () {
      const code = `await Lit.Actions.signEcdsa({ toSign: [1, 2, 3], publicKey: "${keys.pkpPublicKey(allowed)}", sigName: "s" });`;
      expect((await run(code)).error).to.deep.equal({
        code: "invalid_argument",
        message: "signEcdsa: toSign must be 32 bytes (a Uint8Array, an array of byte values or hex)",
      });
    });
  });
});
