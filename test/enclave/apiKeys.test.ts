import { expect } from "chai";
import { ethers } from "ethers";
import { Enclave, EnclaveError, keyHash } from "../../enclave";
import { expectEnclaveError } from "./helpers";

const N = BigInt("0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141");
const hex64 = (v: bigint) => v.toString(16).padStart(64, "0");

describe("enclave API keys", function () {
  const enclave = Enclave.fromRootKey("0x" + "07".repeat(32));

  describe("generation and round trips", function () {
    it("an account key is ak_ + 64 lowercase hex and parses back to kind account", function () {
      const k = enclave.generateAccountKey();
      expect(k.apiKey).to.match(/^ak_[0-9a-f]{64}$/);
      expect(k.kind).to.equal("account");
      expect(enclave.parseApiKey(k.apiKey)).to.deep.equal({
        kind: "account",
        address: k.address,
        keyHash: k.keyHash,
      });
    });

    it("a usage key is uk_ + 64 lowercase hex and parses back to kind usage", function () {
      const k = enclave.generateUsageKey();
      expect(k.apiKey).to.match(/^uk_[0-9a-f]{64}$/);
      expect(enclave.parseApiKey(k.apiKey)).to.deep.equal({
        kind: "usage",
        address: k.address,
        keyHash: k.keyHash,
      });
    });

    it("the address is the ethers wallet address of the key's scalar", function () {
      const k = enclave.generateUsageKey();
      expect(k.address).to.equal(new ethers.Wallet("0x" + k.apiKey.slice(3)).address);
      expect(k.address).to.equal(ethers.getAddress(k.address)); // checksummed
    });

    it("keyHash is keccak256 of the UTF-8 key string", function () {
      const k = enclave.generateAccountKey();
      expect(k.keyHash).to.equal(ethers.id(k.apiKey));
      expect(keyHash(k.apiKey)).to.equal(k.keyHash);
    });

    it("generated keys are unique", function () {
      const keys = new Set(Array.from({ length: 50 }, () => enclave.generateUsageKey().apiKey));
      expect(keys.size).to.equal(50);
    });

    it("a raw 0x private key parses as a usage key with its wallet address", function () {
      const w = ethers.Wallet.createRandom();
      expect(enclave.parseApiKey(w.privateKey)).to.deep.equal({
        kind: "usage",
        address: w.address,
        keyHash: ethers.id(w.privateKey),
      });
    });

    it("a raw 0x key in upper-case hex is accepted", function () {
      const w = ethers.Wallet.createRandom();
      expect(enclave.parseApiKey("0x" + w.privateKey.slice(2).toUpperCase()).address).to.equal(w.address);
    });

    it("the same scalar under ak_ and uk_ has the same address but a different kind and hash", function () {
      const body = hex64(123456789n);
      const a = enclave.parseApiKey("ak_" + body);
      const u = enclave.parseApiKey("uk_" + body);
      expect(a.address).to.equal(u.address);
      expect(a.kind).to.equal("account");
      expect(u.kind).to.equal("usage");
      expect(a.keyHash).to.not.equal(u.keyHash);
    });

    it("the smallest and largest valid scalars (1 and n-1) are accepted", function () {
      expect(enclave.parseApiKey("uk_" + hex64(1n)).address).to.equal(
        new ethers.Wallet("0x" + hex64(1n)).address,
      );
      expect(enclave.parseApiKey("uk_" + hex64(N - 1n)).address).to.equal(
        new ethers.Wallet("0x" + hex64(N - 1n)).address,
      );
    });

    it("a cached parse returns the same answer as a cold one, and a copy the caller cannot corrupt", function () {
      const k = enclave.generateUsageKey().apiKey;
      const first = enclave.parseApiKey(k);
      first.address = "0xtampered";
      const second = enclave.parseApiKey(k);
      expect(second.address).to.equal(new ethers.Wallet("0x" + k.slice(3)).address);
    });

    it("the parse cache is bounded", function () {
      // A fresh enclave's cache is private; its bound is observable only through memory, so check the
      // LRU itself evicts.
      const { Lru } = require("../../enclave/lru") as typeof import("../../enclave/lru");
      const lru = new Lru<string, number>(3);
      for (const [i, k] of ["a", "b", "c", "d"].entries()) lru.set(k, i);
      expect(lru.size).to.equal(3);
      expect(lru.get("a")).to.equal(undefined);
      expect(lru.get("d")).to.equal(3);
    });

    it("the LRU keeps a recently read entry over an older one", function () {
      const { Lru } = require("../../enclave/lru") as typeof import("../../enclave/lru");
      const lru = new Lru<string, number>(2);
      lru.set("a", 1);
      lru.set("b", 2);
      lru.get("a");
      lru.set("c", 3);
      expect(lru.get("a")).to.equal(1);
      expect(lru.get("b")).to.equal(undefined);
    });

    it("the parser's cache holds at most its bound", function () {
      const { ApiKeyParser } = require("../../enclave/apiKeys") as typeof import("../../enclave/apiKeys");
      const p = new ApiKeyParser(5);
      for (let i = 1; i <= 12; i++) p.parse("uk_" + hex64(BigInt(i)));
      expect(p.cacheSize).to.equal(5);
    });
  });

  describe("malformed keys are refused with invalid_api_key", function () {
    const valid = "uk_" + hex64(42n);
    const cases: Array<[string, unknown]> = [
      ["empty string", ""],
      ["wrong prefix xk_", "xk_" + hex64(42n)],
      ["upper-case prefix UK_", "UK_" + hex64(42n)],
      ["no prefix", hex64(42n)],
      ["0X prefix", "0X" + hex64(42n)],
      ["63 hex characters", valid.slice(0, -1)],
      ["65 hex characters", valid + "0"],
      ["non-hex character", "uk_" + hex64(42n).slice(0, -1) + "g"],
      ["upper-case hex after uk_", "uk_" + "A".repeat(64)],
      ["zero scalar", "uk_" + "0".repeat(64)],
      ["zero scalar as raw 0x", "0x" + "0".repeat(64)],
      ["scalar equal to the curve order", "uk_" + hex64(N)],
      ["scalar above the curve order", "ak_" + "f".repeat(64)],
      ["leading whitespace", " " + valid],
      ["trailing whitespace", valid + " "],
      ["trailing newline", valid + "\n"],
      ["a 10 kB string", "uk_" + "a".repeat(10_000)],
      ["base64 (the reference system's format)", Buffer.alloc(32, 1).toString("base64")],
      ["a number", 42],
      ["undefined", undefined],
      ["null", null],
      ["an object", { apiKey: valid }],
      ["bytes", new Uint8Array(32).fill(1)],
    ];
    for (const [name, input] of cases) {
      it(name, function () {
        const err = expectEnclaveError(() => enclave.parseApiKey(input as string), "invalid_api_key");
        expect(err.shortMessage).to.equal("Invalid API key.");
      });
    }

    it("the reason names the problem: whitespace", function () {
      expect(expectEnclaveError(() => enclave.parseApiKey(" " + valid), "invalid_api_key").details).to.match(
        /whitespace/,
      );
    });

    it("the reason names the problem: scalar range", function () {
      expect(
        expectEnclaveError(() => enclave.parseApiKey("uk_" + hex64(N)), "invalid_api_key").details,
      ).to.match(/curve order/);
    });

    it("the reason names the problem: length", function () {
      expect(expectEnclaveError(() => enclave.parseApiKey(valid + "0"), "invalid_api_key").details).to.match(
        /length/,
      );
    });

    it("principalAddress and signForwardRequest refuse malformed keys the same way", async function () {
      expectEnclaveError(() => enclave.principalAddress("nope"), "invalid_api_key");
      let caught: unknown;
      await enclave
        .signForwardRequest(
          "nope",
          { to: ethers.ZeroAddress, data: "0x", gas: 1n, nonce: 0n, deadline: 1 },
          {
            name: "SigilForwarder",
            version: "1",
            chainId: 1,
            verifyingContract: ethers.ZeroAddress,
          },
        )
        .catch((e) => (caught = e));
      expect(caught).to.be.instanceOf(EnclaveError);
      expect((caught as EnclaveError).code).to.equal("invalid_api_key");
    });

    it("keyHash refuses a non-string", function () {
      expectEnclaveError(() => keyHash(42 as unknown as string), "invalid_api_key");
    });
  });

  describe("principals", function () {
    it("a usage key's principal is its own address", function () {
      const k = enclave.generateUsageKey();
      expect(enclave.principalAddress(k.apiKey)).to.equal(k.address);
    });

    it("a raw 0x key's principal is its own address", function () {
      const w = ethers.Wallet.createRandom();
      expect(enclave.principalAddress(w.privateKey)).to.equal(w.address);
    });

    it("an account key's principal is the service-managed owner derived from its address", function () {
      const k = enclave.generateAccountKey();
      const p = enclave.principalAddress(k.apiKey);
      expect(p).to.equal(enclave.ownerAddress(k.address));
      expect(p).to.not.equal(k.address);
    });

    it("the owner of the same master key differs between roots", function () {
      const k = enclave.generateAccountKey();
      const other = Enclave.fromRootKey("0x" + "08".repeat(32));
      expect(other.principalAddress(k.apiKey)).to.not.equal(enclave.principalAddress(k.apiKey));
    });
  });
});
