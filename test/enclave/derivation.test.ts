import { expect } from "chai";
import { hkdfSync } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ethers } from "ethers";
import { Enclave, EnclaveError } from "../../enclave";
import {
  deriveAesKey,
  deriveEd25519Seed,
  deriveRecordKey,
  deriveSecp256k1,
  hkdfBytes,
  ids,
  infoFor,
  LABELS,
  rootKeyObject,
  type Label,
} from "../../enclave/derive";
import { seal } from "../../enclave/aesEnvelope";

/**
 * Known-answer vectors: a fixed root key must keep producing these exact keys forever (users' PKPs and
 * action identities depend on it). The fixture was generated once with SIGIL_WRITE_ENCLAVE_VECTORS=1;
 * any change to a derivation makes this file fail.
 */
const FIXTURE = path.join(__dirname, "../fixtures/enclave/derivation-vectors.json");
const ROOT = "0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const PKP_IDS = [
  "0x0000000000000000000000000000000000000000000000000000000000000001",
  ethers.keccak256(ethers.toUtf8Bytes("sigil pkp")),
  "0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
];
const CIDS = [
  "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o",
  "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
];
const MASTER_KEYS = [
  "0x0000000000000000000000000000000000000001",
  "0x256D394319DA7E564dd8b29753E04D65965075d3",
];
const GAS_INDICES = [0, 1, 4294967295];
const ZERO_NONCE = new Uint8Array(12);
const root = ethers.getBytes(ROOT);
const hex = (b: Uint8Array) => ethers.hexlify(b);
const bytesOf = (h: string) => ethers.getBytes(h);

function computeVectors() {
  const enclave = Enclave.fromRootKey(ROOT);
  const digest = ethers.keccak256(ethers.toUtf8Bytes("known answer"));
  return {
    root: ROOT,
    scheme:
      "HKDF-SHA256(ikm=root, salt=none, info=u16be(len label)||label||u16be(len id)||id); secp256k1: 48 bytes -> mapHashToField",
    pkp: PKP_IDS.map((pkpId) => {
      const aes = deriveAesKey(root, ids.pkp(bytesOf(pkpId)));
      return {
        pkpId,
        info: hex(infoFor(LABELS.pkpSigning, bytesOf(pkpId))),
        okm48: hex(hkdfBytes(root, LABELS.pkpSigning, bytesOf(pkpId), 48)),
        privateKey: enclave.pkpPrivateKey(pkpId),
        publicKey: enclave.pkpPublicKey(pkpId),
        address: enclave.pkpAddress(pkpId),
        aesKey: hex(aes),
        envelopeOfHello: seal(aes, ethers.toUtf8Bytes("hello"), ZERO_NONCE),
        digest,
        digestSignature: enclave.pkpSignDigest(pkpId, digest),
      };
    }),
    action: CIDS.map((cid) => ({
      cid,
      privateKey: enclave.actionPrivateKey(cid),
      publicKey: enclave.actionPublicKey(cid),
      address: enclave.actionAddress(cid),
    })),
    owner: MASTER_KEYS.map((masterKey) => ({
      masterKey,
      privateKey: hex(deriveSecp256k1(root, LABELS.owner, ids.owner(bytesOf(masterKey)))),
      address: enclave.ownerAddress(masterKey),
    })),
    gas: GAS_INDICES.map((index) => ({
      index,
      privateKey: hex(deriveSecp256k1(root, LABELS.gas, ids.gas(index))),
      address: enclave.gasAddress(index),
    })),
  };
}

if (process.env.SIGIL_WRITE_ENCLAVE_VECTORS === "1") {
  writeFileSync(FIXTURE, JSON.stringify(computeVectors(), null, 2) + "\n");
}

describe("enclave derivations", function () {
  const expected = JSON.parse(readFileSync(FIXTURE, "utf8"));
  const actual = computeVectors();
  const enclave = Enclave.fromRootKey(ROOT);

  describe("known-answer vectors", function () {
    it("PKP signing keys, public keys, addresses and HKDF output match the fixture", function () {
      for (let i = 0; i < PKP_IDS.length; i++) {
        const { aesKey: _a, envelopeOfHello: _e, digestSignature: _s, ...want } = expected.pkp[i];
        const { aesKey: _b, envelopeOfHello: _f, digestSignature: _t, ...got } = actual.pkp[i];
        expect(got).to.deep.equal(want);
      }
    });

    it("PKP AES keys match the fixture", function () {
      expect(actual.pkp.map((p) => p.aesKey)).to.deep.equal(
        expected.pkp.map((p: { aesKey: string }) => p.aesKey),
      );
    });

    it("the AES envelope of a fixed nonce matches the fixture byte for byte", function () {
      expect(actual.pkp.map((p) => p.envelopeOfHello)).to.deep.equal(
        expected.pkp.map((p: { envelopeOfHello: string }) => p.envelopeOfHello),
      );
    });

    it("fixture envelopes decrypt with pkpDecrypt", function () {
      for (const p of expected.pkp) {
        expect(ethers.toUtf8String(enclave.pkpDecrypt(p.pkpId, p.envelopeOfHello))).to.equal("hello");
      }
    });

    it("deterministic (RFC 6979) digest signatures match the fixture", function () {
      expect(actual.pkp.map((p) => p.digestSignature)).to.deep.equal(
        expected.pkp.map((p: { digestSignature: string }) => p.digestSignature),
      );
    });

    it("action identity keys match the fixture", function () {
      expect(actual.action).to.deep.equal(expected.action);
    });

    it("service-managed owner keys match the fixture", function () {
      expect(actual.owner).to.deep.equal(expected.owner);
    });

    it("gas wallet keys match the fixture", function () {
      expect(actual.gas).to.deep.equal(expected.gas);
    });

    it("the scheme is exactly the documented one (node:crypto HKDF, then x mod (n-1) + 1)", function () {
      const n = BigInt("0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141");
      const labelBytes = Buffer.from("sigil/pkp/v1/secp256k1/", "utf8");
      for (const v of expected.pkp) {
        const id = Buffer.from(v.pkpId.slice(2), "hex");
        const info = Buffer.concat([
          Buffer.from([0, labelBytes.length]),
          labelBytes,
          Buffer.from([0, 32]),
          id,
        ]);
        const okm = Buffer.from(
          hkdfSync("sha256", Buffer.from(ROOT.slice(2), "hex"), Buffer.alloc(0), info, 48),
        );
        expect("0x" + okm.toString("hex")).to.equal(v.okm48);
        const k = (BigInt("0x" + okm.toString("hex")) % (n - 1n)) + 1n;
        expect(ethers.toBeHex(k, 32)).to.equal(v.privateKey);
      }
    });

    it("the root given as its KeyObject (as the Enclave holds it) derives the same bytes as the root's bytes", function () {
      const rootObject = rootKeyObject(Uint8Array.from(root));
      const idsByLabel: [Label, Uint8Array][] = [
        ...PKP_IDS.map((p): [Label, Uint8Array] => [LABELS.pkpSigning, bytesOf(p)]),
        ...CIDS.map((c): [Label, Uint8Array] => [LABELS.action, ids.action(c)]),
        ...MASTER_KEYS.map((m): [Label, Uint8Array] => [LABELS.owner, bytesOf(m)]),
        ...GAS_INDICES.map((i): [Label, Uint8Array] => [LABELS.gas, ids.gas(i)]),
      ];
      for (const [label, id] of idsByLabel) {
        expect(hex(hkdfBytes(rootObject, label, id, 48))).to.equal(hex(hkdfBytes(root, label, id, 48)));
        expect(hex(deriveSecp256k1(rootObject, label, id))).to.equal(hex(deriveSecp256k1(root, label, id)));
      }
      for (const v of expected.pkp) {
        const id = bytesOf(v.pkpId);
        expect(hex(hkdfBytes(rootObject, LABELS.pkpSigning, id, 48))).to.equal(v.okm48);
        expect(hex(deriveSecp256k1(rootObject, LABELS.pkpSigning, id))).to.equal(v.privateKey);
        expect(hex(deriveAesKey(rootObject, id))).to.equal(v.aesKey);
        expect(hex(deriveEd25519Seed(rootObject, id))).to.equal(hex(deriveEd25519Seed(root, id)));
        expect(hex(deriveRecordKey(rootObject, id))).to.equal(hex(deriveRecordKey(root, id)));
      }
    });

    it("the fixture's private keys are consistent with its addresses (ethers.Wallet)", function () {
      for (const group of [expected.pkp, expected.action, expected.owner, expected.gas]) {
        for (const v of group) expect(new ethers.Wallet(v.privateKey).address).to.equal(v.address);
      }
    });
  });

  describe("independence", function () {
    const id = PKP_IDS[1];

    it("every label gives a different key for the same id bytes", function () {
      const idBytes = bytesOf(id);
      const keys = Object.values(LABELS).map((label) => hex(hkdfBytes(root, label, idBytes, 32)));
      expect(new Set(keys).size).to.equal(keys.length);
    });

    it("a PKP's AES key differs from its signing key (reference gap 4, docs/background.md)", function () {
      const signing = enclave.pkpPrivateKey(id);
      const aes = hex(deriveAesKey(root, bytesOf(id)));
      expect(aes).to.not.equal(signing);
      expect(hex(hkdfBytes(root, LABELS.pkpSigning, bytesOf(id), 32))).to.not.equal(aes);
    });

    it("different PKP ids give different keys", function () {
      const keys = PKP_IDS.map((p) => enclave.pkpPrivateKey(p));
      expect(new Set(keys).size).to.equal(keys.length);
    });

    it("ids that differ in one bit give unrelated keys", function () {
      const a = "0x" + "00".repeat(31) + "02";
      const b = "0x" + "00".repeat(31) + "03";
      expect(enclave.pkpPrivateKey(a)).to.not.equal(enclave.pkpPrivateKey(b));
    });

    it("a different root gives different keys for every label", function () {
      const other = Enclave.fromRootKey("0x" + "42".repeat(32));
      expect(other.pkpPrivateKey(id)).to.not.equal(enclave.pkpPrivateKey(id));
      expect(other.actionAddress(CIDS[0])).to.not.equal(enclave.actionAddress(CIDS[0]));
      expect(other.ownerAddress(MASTER_KEYS[0])).to.not.equal(enclave.ownerAddress(MASTER_KEYS[0]));
      expect(other.gasAddress(0)).to.not.equal(enclave.gasAddress(0));
    });

    it("length prefixes keep label and id apart (no concatenation ambiguity)", function () {
      // Without prefixes, ("sigil/action/v1/", "Qm…") and ("sigil/action/v1/Q", "m…") would collide.
      const a = infoFor(LABELS.action, ethers.toUtf8Bytes("QmX"));
      const b = ethers.concat([ethers.toUtf8Bytes(LABELS.action), ethers.toUtf8Bytes("QmX")]);
      expect(hex(a)).to.not.equal(b);
      expect(a.length).to.equal(ethers.getBytes(b).length + 4);
    });

    it("the CIDv0 and CIDv1 of the same content are different action identities", function () {
      expect(enclave.actionAddress("QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o")).to.not.equal(
        enclave.actionAddress("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"),
      );
    });

    it("a CIDv1 in another base derives the same action key as its canonical base32 form", function () {
      const b32 = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4";
      const { CID } = require("multiformats") as typeof import("multiformats");
      const { base58btc } =
        require("multiformats/bases/base58") as typeof import("multiformats/bases/base58");
      const b58 = CID.parse(b32).toString(base58btc);
      expect(enclave.actionAddress(b58)).to.equal(enclave.actionAddress(b32));
    });

    it("owner keys are derived from the master key's address, case-insensitively", function () {
      expect(enclave.ownerAddress(MASTER_KEYS[1].toLowerCase())).to.equal(
        enclave.ownerAddress(MASTER_KEYS[1]),
      );
    });
  });

  describe("public-key caches", function () {
    it("PKP public keys and addresses, read interleaved and repeated, match a fresh enclave's (never another PKP's)", function () {
      const root = "0x" + "3c".repeat(32);
      const warm = Enclave.fromRootKey(root);
      const pkps = Array.from({ length: 40 }, (_, i) => ethers.keccak256(ethers.toUtf8Bytes(`cache ${i}`)));
      const order = [...pkps, ...pkps.slice().reverse(), ...pkps.filter((_, i) => i % 3 === 0)];
      for (const id of order) {
        const fresh = Enclave.fromRootKey(root);
        expect(warm.pkpAddress(id)).to.equal(fresh.pkpAddress(id));
        expect(warm.pkpPublicKey(id)).to.equal(fresh.pkpPublicKey(id));
        // Upper-case hex is the same PKP (ids are canonicalised), never a separate entry with other values.
        expect(warm.pkpAddress(id.toUpperCase().replace("0X", "0x"))).to.equal(fresh.pkpAddress(id));
      }
      expect(new Set(pkps.map((id) => warm.pkpAddress(id))).size).to.equal(pkps.length);
    });

    it("the address cache is per enclave: the same PKP id under another root has another address", function () {
      const a = Enclave.fromRootKey("0x" + "3c".repeat(32));
      const b = Enclave.fromRootKey("0x" + "3d".repeat(32));
      const id = ethers.keccak256(ethers.toUtf8Bytes("shared id"));
      expect(a.pkpAddress(id)).to.not.equal(b.pkpAddress(id));
      expect(a.pkpPublicKey(id)).to.not.equal(b.pkpPublicKey(id));
    });

    it("owner addresses, cached, match a fresh enclave's for each master key and differ between them", function () {
      const root = "0x" + "3c".repeat(32);
      const warm = Enclave.fromRootKey(root);
      const masters = Array.from({ length: 10 }, () => ethers.Wallet.createRandom().address);
      const owners = masters.map((m) => warm.ownerAddress(m));
      for (const [i, m] of masters.entries()) {
        expect(warm.ownerAddress(m.toLowerCase())).to.equal(owners[i]);
        expect(Enclave.fromRootKey(root).ownerAddress(m)).to.equal(owners[i]);
      }
      expect(new Set(owners).size).to.equal(masters.length);
    });
  });

  describe("refused ids", function () {
    const refused = (fn: () => unknown, code: string) => {
      try {
        fn();
      } catch (e) {
        expect(e).to.be.instanceOf(EnclaveError);
        expect((e as EnclaveError).code).to.equal(code);
        return;
      }
      expect.fail("expected an EnclaveError " + code);
    };

    it("pkpId zero is refused for every PKP operation (reference gap 3, docs/background.md)", function () {
      const zero = "0x" + "00".repeat(32);
      refused(() => enclave.pkpPrivateKey(zero), "invalid_pkp_id");
      refused(() => enclave.pkpAddress(zero), "invalid_pkp_id");
      refused(() => enclave.pkpPublicKey(zero), "invalid_pkp_id");
      refused(() => enclave.pkpSignDigest(zero, ethers.ZeroHash.replace(/0$/, "1")), "invalid_pkp_id");
      refused(() => enclave.pkpSignMessage(zero, "x"), "invalid_pkp_id");
      refused(
        () => enclave.pkpSignTypedData(zero, {}, { T: [{ name: "a", type: "uint256" }] }, { a: 1 }),
        "invalid_pkp_id",
      );
      refused(() => enclave.pkpEncrypt(zero, "x"), "invalid_pkp_id");
      refused(() => enclave.pkpDecrypt(zero, "0x01"), "invalid_pkp_id");
    });

    for (const [name, bad] of [
      ["short", "0x01"],
      ["no 0x", "00".repeat(31) + "01"],
      ["65 hex", "0x" + "0".repeat(63) + "10"],
      ["non-hex", "0x" + "g".repeat(64)],
      ["a number", 1],
      ["a decimal string", "1"],
      ["surrounding whitespace", " 0x" + "00".repeat(31) + "01"],
      ["empty", ""],
      ["null", null],
    ] as const) {
      it(`a malformed pkpId (${name}) is refused with invalid_pkp_id`, function () {
        refused(() => enclave.pkpAddress(bad as unknown as string), "invalid_pkp_id");
      });
    }

    it("a malformed CID is refused for action keys with invalid_cid", function () {
      refused(() => enclave.actionPrivateKey("not-a-cid"), "invalid_cid");
      refused(() => enclave.actionAddress(""), "invalid_cid");
    });

    it("a malformed master key address is refused with invalid_address", function () {
      refused(() => enclave.ownerAddress("0x1234"), "invalid_address");
    });

    for (const bad of [-1, 1.5, 2 ** 32, NaN, "0"]) {
      it(`gas wallet index ${typeof bad} ${String(bad)} is refused with invalid_index`, function () {
        refused(() => enclave.gasAddress(bad as number), "invalid_index");
      });
    }
  });
});
