/**
 * Ed25519 and Schnorr in actions (docs/actions.md, "Solana and Bitcoin"): signEd25519, signSchnorr,
 * getPublicKey({ scheme }), solana.signTransactionMessage and bitcoin.signTaprootInput, through the real
 * executor and enclave. Every signature is verified outside the service with the chains' own libraries;
 * the docs' two examples are read from docs/actions.md and run as they are written there.
 */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import path from "node:path";
import { ethers } from "ethers";
import { ed25519 } from "@noble/curves/ed25519";
import { schnorr } from "@noble/curves/secp256k1";
import * as ecc from "@bitcoinerlab/secp256k1";
import { cryptoThread } from "../../enclave/executor/crypto-thread";
import { Enclave } from "../../enclave";
import { expectOk, makeKeys, pkpIds, useExecutor } from "./helpers";
import {
  p2trScript,
  solanaTransferMessage,
  taprootPsbt,
  verifySolanaTransaction,
  verifyTaprootSpend,
} from "./chainFixtures";

const DOCS = readFileSync(path.join(__dirname, "../../docs/actions.md"), "utf8");

/** The fenced code block that follows `<!-- example: NAME -->` in docs/actions.md. */
function docExample(name: string): string {
  const at = DOCS.indexOf(`<!-- example: ${name} -->`);
  if (at < 0) throw new Error(`docs/actions.md has no example ${name}`);
  const m = /```js\n([\s\S]*?)```/.exec(DOCS.slice(at));
  if (m === null) throw new Error(`example ${name} has no js block`);
  return m[1];
}

const RECIPIENT = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";
const hexOf = (b: Uint8Array) => ethers.hexlify(b);
const bytes = (h: string) => ethers.getBytes(h);

describe("executor: Ed25519 and Schnorr signatures in actions", function () {
  this.timeout(120_000);
  const keys = makeKeys() as Enclave;
  const { allowed: PKP, refused } = pkpIds();
  const pub = keys.pkpPublicKeys(PKP);
  const { run } = useExecutor(keys);

  it("signEd25519 signs bytes and hex; the signature verifies with @noble/curves; counted as a key operation", async () => {
    const r = await run(
      `return [
         await Actions.signEd25519({ pkpId: params.pkpId, message: new Uint8Array([1, 2, 3]) }),
         await Actions.signEd25519({ pkpId: params.pkpId, message: "0x010203" }),
       ];`,
      { jsParams: { pkpId: PKP } },
    );
    const [a, b] = expectOk(r) as string[];
    expect(a).to.equal(b);
    expect(ed25519.verify(bytes(a), Uint8Array.of(1, 2, 3), bytes(pub.ed25519.publicKey))).to.equal(true);
    expect(r.key_ops).to.equal(2);
  });

  it("signSchnorr: BIP-340 over the x-only key, and Taproot-tweaked over the output key", async () => {
    const digest = ethers.keccak256(ethers.toUtf8Bytes("schnorr in an action"));
    const [plain, tweaked] = expectOk(
      await run(
        `return [
           await Actions.signSchnorr({ pkpId: params.pkpId, digest: params.digest }),
           await Actions.signSchnorr({ pkpId: params.pkpId, digest: params.digest, tweak: "taproot" }),
         ];`,
        { jsParams: { pkpId: PKP, digest } },
      ),
    ) as string[];
    expect(schnorr.verify(bytes(plain), bytes(digest), bytes(pub.taproot.xOnly))).to.equal(true);
    expect(ecc.verifySchnorr(bytes(digest), bytes(pub.taproot.xOnly), bytes(plain))).to.equal(true);
    expect(ecc.verifySchnorr(bytes(digest), bytes(pub.taproot.tweakedXOnly), bytes(tweaked))).to.equal(true);
  });

  it("getPublicKey({ scheme }) answers each scheme's key; without a scheme, the secp256k1 key as before", async () => {
    const out = expectOk(
      await run(
        `const s = (scheme) => Actions.getPublicKey({ pkpId: params.pkpId, scheme });
         return [await Actions.getPublicKey({ pkpId: params.pkpId }), await s("secp256k1"), await s("ed25519"),
                 await s("schnorr"), await s("taproot")];`,
        { jsParams: { pkpId: PKP } },
      ),
    ) as string[];
    expect(out).to.deep.equal([
      keys.pkpPublicKey(PKP),
      pub.secp256k1.publicKey,
      pub.ed25519.publicKey,
      pub.taproot.xOnly,
      pub.taproot.tweakedXOnly,
    ]);
  });

  it("refuses an unknown scheme, a bad tweak and a PKP the caller may not use, with typed errors", async () => {
    const out = expectOk(
      await run(
        `const codes = [];
         for (const f of [
           () => Actions.getPublicKey({ pkpId: params.pkpId, scheme: "rsa" }),
           () => Actions.signSchnorr({ pkpId: params.pkpId, digest: "0x" + "11".repeat(32), tweak: "other" }),
           () => Actions.signSchnorr({ pkpId: params.pkpId, digest: "0x11" }),
           () => Actions.signEd25519({ pkpId: params.pkpId, message: "not hex" }),
           () => Actions.signEd25519({ pkpId: params.refused, message: "0x01" }),
         ]) { try { await f(); codes.push("signed"); } catch (e) { codes.push(e.code); } }
         return codes;`,
        { jsParams: { pkpId: PKP, refused } },
      ),
    );
    expect(out).to.deep.equal([
      "invalid_argument",
      "invalid_argument",
      "invalid_argument",
      "invalid_argument",
      "pkp_not_authorized",
    ]);
  });

  it("the docs' Solana transfer: the action signs, the transaction assembled offline verifies with @solana/kit", async () => {
    const messageBytes = solanaTransferMessage(pub.ed25519.solanaAddress, RECIPIENT, 1_000_000n);
    const out = expectOk(
      await run(docExample("solana-transfer"), { jsParams: { pkpId: PKP, messageHex: hexOf(messageBytes) } }),
    ) as { signature: string; address: string };
    expect(out.address).to.equal(pub.ed25519.solanaAddress);
    expect(await verifySolanaTransaction(messageBytes, out.address, out.signature)).to.equal(true);
    // Another message does not verify under that signature.
    const other = solanaTransferMessage(pub.ed25519.solanaAddress, RECIPIENT, 2_000_000n);
    expect(await verifySolanaTransaction(other, out.address, out.signature)).to.equal(false);
  });

  it("solana.signTransactionMessage refuses a message the PKP does not sign, and bytes that are no message", async () => {
    const foreign = solanaTransferMessage(RECIPIENT, pub.ed25519.solanaAddress, 1n);
    const out = expectOk(
      await run(
        `const out = [];
         for (const m of [params.foreign, "0x0102"]) {
           try { await Actions.solana.signTransactionMessage({ pkpId: params.pkpId, messageBytes: m }); out.push("signed"); }
           catch (e) { out.push(e.code + ": " + e.message); }
         }
         return out;`,
        { jsParams: { pkpId: PKP, foreign: hexOf(foreign) } },
      ),
    ) as string[];
    expect(out[0]).to.match(/^invalid_argument: .*does not list .* among its signers/);
    expect(out[1]).to.match(/^invalid_argument: .*not a compiled Solana transaction message/);
  });

  it("the docs' Taproot key-path spend: the signed PSBT finalizes, extracts and verifies with bitcoinjs-lib", async () => {
    const to = p2trScript(keys.pkpPublicKeys(pkpIds().second).taproot.xOnly);
    const psbt = taprootPsbt(pub.taproot.xOnly, 100_000n, [
      { script: to, value: 60_000n },
      { script: p2trScript(pub.taproot.xOnly), value: 39_000n }, // change
    ]);
    const signed = expectOk(
      await run(docExample("taproot-spend"), { jsParams: { pkpId: PKP, psbtBase64: psbt } }),
    ) as string;
    const { ok, txHex } = verifyTaprootSpend(signed, pub.taproot.tweakedXOnly);
    expect(ok).to.equal(true);
    expect(txHex.length).to.be.greaterThan(100);
  });

  it("bitcoin.signTaprootInput refuses an input that is not the PKP's and a malformed PSBT", async () => {
    const otherKey = keys.pkpPublicKeys(pkpIds().second).taproot.xOnly;
    const notMine = taprootPsbt(otherKey, 10_000n, [{ script: p2trScript(otherKey), value: 9_000n }]);
    const out = expectOk(
      await run(
        `const out = [];
         for (const [psbtBase64, inputIndex] of [[params.notMine, 0], ["bm90IGEgcHNidA==", 0], [params.notMine, 3]]) {
           try { await Actions.bitcoin.signTaprootInput({ pkpId: params.pkpId, psbtBase64, inputIndex }); out.push("signed"); }
           catch (e) { out.push(e.code + ": " + e.message); }
         }
         return out;`,
        { jsParams: { pkpId: PKP, notMine } },
      ),
    ) as string[];
    expect(out[0]).to.match(/^invalid_argument: .*does not spend this PKP's Taproot output/);
    expect(out[1]).to.match(/^invalid_argument: .*does not parse/);
    expect(out[2]).to.match(/^invalid_argument: .*input 3 does not exist/);
  });

  it("the crypto thread signs Ed25519 and Schnorr itself (off the main thread), as the enclave would", async () => {
    const thread = cryptoThread();
    expect(thread).to.not.equal(null);
    const message = Uint8Array.of(9, 8, 7);
    const ed = await thread!.request({ op: "signEd25519", message }, keys.pkpEd25519SeedForOp(PKP));
    expect(ed?.value).to.equal(keys.pkpSignEd25519(PKP, message)); // deterministic: byte for byte
    const digest = ethers.keccak256(ethers.toUtf8Bytes("off the main thread"));
    const merkleRoot = ethers.keccak256(ethers.toUtf8Bytes("a script tree"));
    for (const [tweak, root, key] of [
      [null, null, pub.taproot.xOnly],
      ["taproot", null, pub.taproot.tweakedXOnly],
    ] as const) {
      const r = await thread!.request(
        { op: "signSchnorr", digest: bytes(digest), tweak, merkleRoot: root },
        keys.pkpKeyForRun(PKP),
      );
      expect(ecc.verifySchnorr(bytes(digest), bytes(key), bytes(r!.value as string)), String(tweak)).to.equal(
        true,
      );
    }
    // With a merkle root: verifies against the enclave's own tweak of that root (the enclave signs the same key).
    const withRoot = await thread!.request(
      { op: "signSchnorr", digest: bytes(digest), tweak: "taproot", merkleRoot: bytes(merkleRoot) },
      keys.pkpKeyForRun(PKP),
    );
    const fromEnclave = keys.pkpSignSchnorr(PKP, digest, { tweak: "taproot", merkleRoot });
    const { taprootOutputKey } = await import("../../enclave/chainKeys");
    const outputKey = taprootOutputKey(bytes(pub.taproot.xOnly), bytes(merkleRoot));
    expect(ecc.verifySchnorr(bytes(digest), outputKey, bytes(withRoot!.value as string))).to.equal(true);
    expect(ecc.verifySchnorr(bytes(digest), outputKey, bytes(fromEnclave))).to.equal(true);
    // What it cannot answer exactly as the enclave would, it refuses (the caller falls back).
    expect(
      await thread!.request(
        { op: "signSchnorr", digest: Uint8Array.of(1), tweak: null },
        keys.pkpKeyForRun(PKP),
      ),
    ).to.equal(null);
  });

  it("the new members are hardened per run: an action cannot change them for itself or the next run", async () => {
    const first = expectOk(
      await run(
        `const tries = [];
         for (const f of [
           () => { Actions.solana.signTransactionMessage = () => "hijacked"; },
           () => { Actions.bitcoin.extra = 1; },
           () => { Object.setPrototypeOf(Actions.solana, {}); },
         ]) { try { f(); tries.push("changed"); } catch (e) { tries.push(e.name); } }
         return [tries, Object.isFrozen(Actions.solana), Object.isFrozen(Actions.bitcoin), Object.isFrozen(Actions.signEd25519)];`,
      ),
    );
    expect(first).to.deep.equal([["TypeError", "TypeError", "TypeError"], true, true, true]);
    const second = expectOk(
      await run(
        `return [typeof Actions.bitcoin.extra, String(Actions.solana.signTransactionMessage).includes("hijacked")];`,
      ),
    );
    expect(second).to.deep.equal(["undefined", false]);
  });
});
