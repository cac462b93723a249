/**
 * enclave/attestation.ts: the identity derivation, the document signature, canonical JSON and the
 * measurement of enclave/ (over temporary copies of the checkout, so editing a file cannot touch the real one).
 */
import { expect } from "chai";
import { hkdfSync } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ethers } from "ethers";
import { mapHashToField } from "@noble/curves/abstract/modular";
import { secp256k1 } from "@noble/curves/secp256k1";
import { Enclave } from "../../enclave";
import { canonicalJson, identityOf, measureEnclave } from "../../enclave/attestation";
import { canonicalJson as sdkCanonicalJson } from "../../sdk/attestation";

const REPO = path.resolve(__dirname, "..", "..");
const ROOT = "0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const bytes = (h: string) => Uint8Array.from(Buffer.from(h.slice(2), "hex"));

/** A copy of what the measurement reads: enclave/ and package-lock.json. */
function checkoutCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-measure-"));
  fs.cpSync(path.join(REPO, "enclave"), path.join(dir, "enclave"), { recursive: true });
  fs.copyFileSync(path.join(REPO, "package-lock.json"), path.join(dir, "package-lock.json"));
  return dir;
}

describe("enclave: attestation", function () {
  describe("identity", function () {
    it("is HKDF-SHA256(root, 'sigil/identity/v1/', 'root') mapped to a secp256k1 key, recomputed independently", function () {
      const label = Buffer.from("sigil/identity/v1/");
      const id = Buffer.from("root");
      const info = Buffer.concat([
        Buffer.from([label.length >> 8, label.length & 0xff]),
        label,
        Buffer.from([id.length >> 8, id.length & 0xff]),
        id,
      ]);
      const okm = new Uint8Array(hkdfSync("sha256", bytes(ROOT), new Uint8Array(0), info, 48));
      const priv = mapHashToField(okm, secp256k1.CURVE.n);
      const expected = new ethers.Wallet(ethers.hexlify(priv));
      const got = identityOf(bytes(ROOT));
      expect(got.address).to.equal(expected.address);
      expect(got.publicKey).to.equal(expected.signingKey.publicKey);
    });

    it("is the same for the same root key and differs for another", function () {
      const a = Enclave.fromRootKey(ROOT).attestationIdentity();
      expect(Enclave.fromRootKey(ROOT).attestationIdentity()).to.deep.equal(a);
      const other = Enclave.fromRootKey("0x" + "42".repeat(32)).attestationIdentity();
      expect(other.address).to.not.equal(a.address);
    });

    it("is none of the other derived keys (owner, gas wallet)", function () {
      const e = Enclave.fromRootKey(ROOT);
      const { address } = e.attestationIdentity();
      expect(address).to.not.equal(e.gasAddress(0));
      expect(address).to.not.equal(e.ownerAddress("0x0000000000000000000000000000000000000001"));
    });
  });

  describe("signature", function () {
    it("is an EIP-191 signature by the identity over the canonical JSON of the fields", function () {
      const e = Enclave.fromRootKey(ROOT);
      const fields = { b: 1, a: { y: [1, "x", null], x: true }, nonce: "n-1" };
      const sig = e.signAttestation(fields);
      expect(sig).to.match(/^0x[0-9a-f]{130}$/);
      expect(ethers.verifyMessage('{"a":{"x":true,"y":[1,"x",null]},"b":1,"nonce":"n-1"}', sig)).to.equal(
        e.attestationIdentity().address,
      );
    });

    it("does not verify for changed fields", function () {
      const e = Enclave.fromRootKey(ROOT);
      const sig = e.signAttestation({ a: 1 });
      expect(ethers.verifyMessage(canonicalJson({ a: 2 }), sig)).to.not.equal(
        e.attestationIdentity().address,
      );
    });
  });

  describe("canonicalJson", function () {
    it("sorts keys at every depth and writes no whitespace", function () {
      expect(canonicalJson({ z: { b: 2, a: 1 }, a: [{ d: 0, c: "é" }] })).to.equal(
        '{"a":[{"c":"é","d":0}],"z":{"a":1,"b":2}}',
      );
    });

    it("refuses what JSON cannot carry (NaN, functions, class instances)", function () {
      expect(() => canonicalJson({ a: NaN })).to.throw(TypeError, "finite");
      expect(() => canonicalJson({ a: () => 1 })).to.throw(TypeError, "function is not a JSON value");
      expect(() => canonicalJson({ a: new Date(0) })).to.throw(TypeError, "object is not a JSON value");
    });

    it("is the SDK's serialisation too", function () {
      const doc = { tee: "none", identity: { public_key: "0x04", address: "0xA" }, nonce: null, n: 1 };
      expect(sdkCanonicalJson(doc)).to.equal(canonicalJson(doc));
    });
  });

  describe("measurement", function () {
    let copy: string;
    beforeEach(() => (copy = checkoutCopy()));
    afterEach(() => fs.rmSync(copy, { recursive: true, force: true }));

    it("is stable: the same for the checkout and a copy of it, computed twice", function () {
      const m = measureEnclave(REPO);
      expect(m.measurement).to.match(/^0x[0-9a-f]{64}$/);
      expect(measureEnclave(REPO)).to.deep.equal(m);
      expect(measureEnclave(copy)).to.deep.equal(m);
    });

    it("is the SHA-256 of its listing: every enclave file with its hash, then the dependencies", function () {
      const m = measureEnclave(copy);
      expect(m.measurement).to.equal(
        "0x" + require("node:crypto").createHash("sha256").update(m.listing).digest("hex"),
      );
      const derive = fs.readFileSync(path.join(copy, "enclave", "derive.ts"));
      const fileHash = require("node:crypto").createHash("sha256").update(derive).digest("hex");
      expect(m.listing).to.include(`file enclave/derive.ts ${fileHash}\n`);
      expect(m.listing).to.include("file enclave/executor/worker/sandbox-worker.js ");
      const lock = JSON.parse(fs.readFileSync(path.join(copy, "package-lock.json"), "utf8"));
      const ses = lock.packages["node_modules/ses"];
      expect(m.listing).to.include(`dep node_modules/ses ${ses.version} ${ses.integrity}\n`);
      // Transitive: ses depends on @endo/env-options.
      expect(m.listing).to.match(/\ndep node_modules\/@endo\/env-options /);
      // Packages the enclave does not use are not measured.
      expect(m.listing).to.not.include("dep node_modules/express ");
    });

    it("changes when an enclave source file changes", function () {
      const before = measureEnclave(copy).measurement;
      fs.appendFileSync(path.join(copy, "enclave", "derive.ts"), "\n// changed\n");
      expect(measureEnclave(copy).measurement).to.not.equal(before);
    });

    it("changes when a file is added under enclave/", function () {
      const before = measureEnclave(copy).measurement;
      fs.writeFileSync(path.join(copy, "enclave", "extra.ts"), "export const x = 1;\n");
      expect(measureEnclave(copy).measurement).to.not.equal(before);
    });

    it("changes when a dependency's locked version changes", function () {
      const before = measureEnclave(copy).measurement;
      const file = path.join(copy, "package-lock.json");
      const lock = JSON.parse(fs.readFileSync(file, "utf8"));
      lock.packages["node_modules/ses"].integrity = "sha512-changed";
      fs.writeFileSync(file, JSON.stringify(lock));
      expect(measureEnclave(copy).measurement).to.not.equal(before);
    });

    it("does not change when a package the enclave does not use changes", function () {
      const before = measureEnclave(copy).measurement;
      const file = path.join(copy, "package-lock.json");
      const lock = JSON.parse(fs.readFileSync(file, "utf8"));
      lock.packages["node_modules/express"].version = "0.0.0";
      fs.writeFileSync(file, JSON.stringify(lock));
      expect(measureEnclave(copy).measurement).to.equal(before);
    });
  });
});
