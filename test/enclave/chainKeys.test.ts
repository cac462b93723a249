/**
 * Each PKP's Ed25519 key and its BIP-340 / BIP-341 Schnorr signatures (enclave/chainKeys.ts): every
 * signature is checked by two verifiers that share no code with the signer's path (Ed25519:
 * @noble/curves and @solana/kit, which verifies with the platform's WebCrypto; Schnorr: @noble/curves
 * and @bitcoinerlab/secp256k1), and every address by the chain's own library (@solana/kit,
 * bitcoinjs-lib). The official BIP-340 vector file is third-party data the repository does not carry:
 * the two independent verifiers stand in for it.
 */
import { expect } from "chai";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { ethers } from "ethers";
import { ed25519 } from "@noble/curves/ed25519";
import { schnorr, secp256k1 } from "@noble/curves/secp256k1";
import * as ecc from "@bitcoinerlab/secp256k1";
import * as bitcoin from "bitcoinjs-lib";
import {
  address as solAddress,
  getAddressEncoder,
  getPublicKeyFromAddress,
  verifySignature,
} from "@solana/kit";
import { Enclave, EnclaveError } from "../../enclave";
import { deriveEd25519Seed, deriveSecp256k1, hkdfBytes, ids, LABELS } from "../../enclave/derive";
import { taprootOutputKey, taprootOutputKeyNoble } from "../../enclave/chainKeys";
import { referenceTaprootOutputKey, referenceVerify } from "./bip340Reference";

bitcoin.initEccLib(ecc);

const ROOT = "0x" + "5a".repeat(32);
const id = (n: number) => ethers.zeroPadValue(ethers.toBeHex(n), 32);
const bytes = (h: string) => ethers.getBytes(h);
const hexOf = (b: Uint8Array) => ethers.hexlify(b);
const DIGEST = ethers.keccak256(ethers.toUtf8Bytes("chain keys"));

describe("enclave: Ed25519 and Schnorr keys of every PKP", function () {
  this.timeout(60_000);
  const enclave = Enclave.fromRootKey(ROOT);
  const pkp = id(101);

  it("leaves the PKP's EVM address and ECDSA signature as they were (pinned before the new keys)", () => {
    // Values computed on this root before Ed25519 and Schnorr existed.
    expect(enclave.pkpAddress(pkp)).to.equal("0x4d07136c9d9899c1FD1F91409bE0ad854544Bf62");
    const sig = enclave.pkpSignDigest(pkp, DIGEST);
    expect(ethers.recoverAddress(DIGEST, sig)).to.equal("0x4d07136c9d9899c1FD1F91409bE0ad854544Bf62");
    expect(enclave.pkpPublicKeys(pkp).secp256k1.address).to.equal(enclave.pkpAddress(pkp));
    expect(enclave.pkpPublicKeys(pkp).secp256k1.publicKey).to.equal(enclave.pkpPublicKey(pkp));
  });

  it("pins the new public keys and addresses of a known PKP (known answers)", () => {
    const keys = enclave.pkpPublicKeys(pkp);
    expect(keys.ed25519.solanaAddress).to.equal("sx1jK2ShyyPZEPZUUC3vExuakFfS4iqDK1hfSApdfcW");
    expect(keys.taproot.address).to.equal("bc1pkpxmmu0546pt70qdptkwkgqatg5teg3np8f5jayy0qexw00xlu4qht2r06");
    expect(keys.taproot.testnetAddress).to.equal(
      "tb1pkpxmmu0546pt70qdptkwkgqatg5teg3np8f5jayy0qexw00xlu4qqruv44",
    );
  });

  it("derives the Ed25519 seed with HKDF under its own label (recomputed independently)", () => {
    const root = bytes(ROOT);
    const seed = hkdfBytes(root, LABELS.pkpEd25519, bytes(pkp), 32);
    expect(LABELS.pkpEd25519).to.equal("sigil/pkp/v1/ed25519/");
    expect(ethers.hexlify(ed25519.getPublicKey(seed))).to.equal(enclave.pkpPublicKeys(pkp).ed25519.publicKey);
  });

  it("Solana address: base58 of the Ed25519 key, as @solana/kit decodes it", () => {
    const keys = enclave.pkpPublicKeys(pkp);
    const encoded = getAddressEncoder().encode(solAddress(keys.ed25519.solanaAddress));
    expect(ethers.hexlify(new Uint8Array(encoded))).to.equal(keys.ed25519.publicKey);
  });

  it("Taproot address and keys agree with bitcoinjs-lib's P2TR (no script tree)", () => {
    const keys = enclave.pkpPublicKeys(pkp);
    const compressed = bytes(keys.secp256k1.compressed);
    expect(ethers.hexlify(compressed.slice(1))).to.equal(keys.taproot.xOnly);
    const main = bitcoin.payments.p2tr({ internalPubkey: bytes(keys.taproot.xOnly) });
    expect(main.address).to.equal(keys.taproot.address);
    expect(ethers.hexlify(main.pubkey!)).to.equal(keys.taproot.tweakedXOnly);
    const test = bitcoin.payments.p2tr({
      internalPubkey: bytes(keys.taproot.xOnly),
      network: bitcoin.networks.testnet,
    });
    expect(test.address).to.equal(keys.taproot.testnetAddress);
    expect(keys.taproot.address.startsWith("bc1p")).to.equal(true);
    expect(keys.taproot.testnetAddress.startsWith("tb1p")).to.equal(true);
  });

  it("Ed25519 signatures verify with @noble/curves and with @solana/kit (WebCrypto)", async () => {
    const keys = enclave.pkpPublicKeys(pkp);
    const message = randomBytes(200);
    const sig = enclave.pkpSignEd25519(pkp, message);
    expect(bytes(sig).length).to.equal(64);
    expect(ed25519.verify(bytes(sig), message, bytes(keys.ed25519.publicKey))).to.equal(true);
    const cryptoKey = await getPublicKeyFromAddress(solAddress(keys.ed25519.solanaAddress));
    expect(await verifySignature(cryptoKey, bytes(sig) as never, message)).to.equal(true);
    // The same message given as hex, the same (deterministic) signature; another message does not verify.
    expect(enclave.pkpSignEd25519(pkp, ethers.hexlify(message))).to.equal(sig);
    expect(await verifySignature(cryptoKey, bytes(sig) as never, randomBytes(200))).to.equal(false);
  });

  it("refuses an Ed25519 message that is neither bytes nor 0x-hex", () => {
    expect(() => enclave.pkpSignEd25519(pkp, "hello")).to.throw(EnclaveError, "Invalid message");
  });

  it("BIP-340 signatures verify against the x-only key with @noble/curves and @bitcoinerlab/secp256k1", () => {
    const keys = enclave.pkpPublicKeys(pkp);
    const sig = enclave.pkpSignSchnorr(pkp, DIGEST);
    expect(schnorr.verify(bytes(sig), bytes(DIGEST), bytes(keys.taproot.xOnly))).to.equal(true);
    expect(ecc.verifySchnorr(bytes(DIGEST), bytes(keys.taproot.xOnly), bytes(sig))).to.equal(true);
    // Fresh aux randomness: two signatures of one digest differ, and both verify.
    const again = enclave.pkpSignSchnorr(pkp, DIGEST);
    expect(again).to.not.equal(sig);
    expect(ecc.verifySchnorr(bytes(DIGEST), bytes(keys.taproot.xOnly), bytes(again))).to.equal(true);
    // Not a signature of the tweaked key.
    expect(ecc.verifySchnorr(bytes(DIGEST), bytes(keys.taproot.tweakedXOnly), bytes(sig))).to.equal(false);
  });

  it("Taproot-tweaked signatures verify against the tweaked output key (and with a merkle root, its key)", () => {
    const keys = enclave.pkpPublicKeys(pkp);
    const sig = enclave.pkpSignSchnorr(pkp, DIGEST, { tweak: "taproot" });
    expect(ecc.verifySchnorr(bytes(DIGEST), bytes(keys.taproot.tweakedXOnly), bytes(sig))).to.equal(true);
    expect(schnorr.verify(bytes(sig), bytes(DIGEST), bytes(keys.taproot.tweakedXOnly))).to.equal(true);
    expect(ecc.verifySchnorr(bytes(DIGEST), bytes(keys.taproot.xOnly), bytes(sig))).to.equal(false);

    const merkleRoot = ethers.hexlify(randomBytes(32));
    const withTree = bitcoin.payments.p2tr({
      internalPubkey: bytes(keys.taproot.xOnly),
      hash: bytes(merkleRoot),
    });
    const treeSig = enclave.pkpSignSchnorr(pkp, DIGEST, { tweak: "taproot", merkleRoot });
    expect(ecc.verifySchnorr(bytes(DIGEST), withTree.pubkey!, bytes(treeSig))).to.equal(true);
  });

  it("a third verifier written from the BIPs' pseudo-code (no library) accepts the signatures and the tweak", () => {
    const keys = enclave.pkpPublicKeys(pkp);
    const xOnly = bytes(keys.taproot.xOnly);
    expect(hexOf(referenceTaprootOutputKey(xOnly, null))).to.equal(keys.taproot.tweakedXOnly);
    const merkleRoot = randomBytes(32);
    expect(hexOf(referenceTaprootOutputKey(xOnly, merkleRoot))).to.equal(
      hexOf(taprootOutputKey(xOnly, merkleRoot)),
    );
    const plain = enclave.pkpSignSchnorr(pkp, DIGEST);
    const tweaked = enclave.pkpSignSchnorr(pkp, DIGEST, { tweak: "taproot" });
    expect(referenceVerify(xOnly, bytes(DIGEST), bytes(plain))).to.equal(true);
    expect(referenceVerify(bytes(keys.taproot.tweakedXOnly), bytes(DIGEST), bytes(tweaked))).to.equal(true);
    // And it can fail: another message, another key, one flipped bit.
    expect(referenceVerify(xOnly, randomBytes(32), bytes(plain))).to.equal(false);
    expect(referenceVerify(bytes(keys.taproot.tweakedXOnly), bytes(DIGEST), bytes(plain))).to.equal(false);
    const flipped = bytes(plain);
    flipped[40] ^= 1;
    expect(referenceVerify(xOnly, bytes(DIGEST), flipped)).to.equal(false);
  });

  it("refuses malformed Schnorr inputs with typed errors", () => {
    expect(() => enclave.pkpSignSchnorr(pkp, "0x1234")).to.throw(EnclaveError, "Invalid digest");
    expect(() => enclave.pkpSignSchnorr(pkp, DIGEST, { tweak: "other" as never })).to.throw(EnclaveError);
    expect(() => enclave.pkpSignSchnorr(pkp, DIGEST, { merkleRoot: DIGEST })).to.throw(EnclaveError);
    expect(() => enclave.pkpSignSchnorr("0x" + "00".repeat(32), DIGEST)).to.throw(
      EnclaveError,
      "Invalid PKP id",
    );
  });

  it("the Taproot output key is the same from libsecp256k1 and from noble, with and without a merkle root", () => {
    for (let i = 0; i < 20; i++) {
      const xOnly = schnorr.getPublicKey(randomBytes(32));
      for (const root of [null, randomBytes(32)])
        expect(hexOf(taprootOutputKey(xOnly, root))).to.equal(hexOf(taprootOutputKeyNoble(xOnly, root)));
    }
  });

  it("keys are distinct per PKP and per scheme", () => {
    const seen = new Set<string>();
    for (const n of [101, 102, 103, 104]) {
      const k = enclave.pkpPublicKeys(id(n));
      for (const v of [
        k.secp256k1.compressed.slice(4),
        k.ed25519.publicKey.slice(2),
        k.taproot.tweakedXOnly.slice(2),
      ])
        seen.add(v);
    }
    expect(seen.size).to.equal(12);
  });

  it("keys are stable across enclave restarts on the same root key file", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sigil-chainkeys-"));
    const file = path.join(dir, "root.key");
    writeFileSync(file, randomBytes(32).toString("hex") + "\n", { mode: 0o600 });
    const first = (await Enclave.open({ rootKeyFile: file })).pkpPublicKeys(pkp);
    const second = await Enclave.open({ rootKeyFile: file });
    expect(second.pkpPublicKeys(pkp)).to.deep.equal(first);
    const sig = second.pkpSignEd25519(pkp, "0x01");
    expect(ed25519.verify(bytes(sig), Uint8Array.of(1), bytes(first.ed25519.publicKey))).to.equal(true);
  });

  it("pkpPublicKeys hands out copies: changing one does not change the enclave's answer", () => {
    const a = enclave.pkpPublicKeys(pkp);
    a.ed25519.solanaAddress = "changed";
    expect(enclave.pkpPublicKeys(pkp).ed25519.solanaAddress).to.not.equal("changed");
  });

  it("property: the Ed25519 seed is neither the secp256k1 secret nor an HKDF of it or of the root under another label", () => {
    const root = bytes(ROOT);
    const otherLabels = Object.values(LABELS).filter((l) => l !== LABELS.pkpEd25519);
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (raw) => {
        fc.pre(raw.some((b) => b !== 0));
        const pkpId = ethers.hexlify(raw);
        const idBytes = ids.pkp(raw);
        const seed = deriveEd25519Seed(root, idBytes);
        const secret = deriveSecp256k1(root, LABELS.pkpSigning, idBytes);
        const edPublic = ed25519.getPublicKey(seed);
        const candidates = [
          secret,
          ...otherLabels.map((l) => hkdfBytes(root, l, idBytes, 32)),
          ...otherLabels.map((l) => hkdfBytes(secret, l, idBytes, 32)),
          hkdfBytes(secret, LABELS.pkpEd25519, idBytes, 32),
        ];
        for (const c of candidates) {
          if (Buffer.from(c).equals(Buffer.from(seed))) return false;
          // Nor does the secp256k1 secret, used as an Ed25519 seed, give the PKP's Ed25519 key.
          if (Buffer.from(ed25519.getPublicKey(c)).equals(Buffer.from(edPublic))) return false;
        }
        // And the public keys of the two schemes are unrelated values.
        const xOnly = secp256k1.getPublicKey(secret, true).slice(1);
        if (Buffer.from(xOnly).equals(Buffer.from(edPublic))) return false;
        return enclave.pkpPublicKeys(pkpId).ed25519.publicKey === ethers.hexlify(edPublic);
      }),
      { numRuns: 60 },
    );
  });
});
