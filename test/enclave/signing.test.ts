import { expect } from "chai";
import { ethers as hhEthers } from "hardhat";
import { ethers } from "ethers";
import { inspect } from "node:util";
import { Enclave, EnclaveError, FORWARD_REQUEST_TYPES, isEnclaveError } from "../../enclave";
import { expectEnclaveError, expectEnclaveRejection } from "./helpers";

const PKP = ethers.keccak256(ethers.toUtf8Bytes("signing test pkp"));
const DOMAIN = {
  name: "SigilForwarder",
  version: "1",
  chainId: 31337n,
  verifyingContract: "0x" + "ab".repeat(20),
};
const MAIL_TYPES = {
  Mail: [
    { name: "to", type: "address" },
    { name: "contents", type: "string" },
  ],
};

describe("enclave signing", function () {
  const enclave = Enclave.fromRootKey("0x" + "5a".repeat(32));
  const pkpAddress = enclave.pkpAddress(PKP);

  describe("PKP signatures verify with ethers", function () {
    it("pkpSignDigest recovers to the PKP address (recoverAddress)", function () {
      const digest = ethers.keccak256("0xdeadbeef");
      expect(ethers.recoverAddress(digest, enclave.pkpSignDigest(PKP, digest))).to.equal(pkpAddress);
    });

    it("digest signatures are 65 bytes with v in {27, 28} and low s", function () {
      const sig = ethers.Signature.from(enclave.pkpSignDigest(PKP, ethers.keccak256("0x01")));
      expect([27, 28]).to.include(sig.v);
      expect(BigInt(sig.s) <= ethers.N / 2n).to.equal(true);
    });

    it("pkpSignMessage of a string verifies (verifyMessage)", function () {
      expect(ethers.verifyMessage("hello sigil", enclave.pkpSignMessage(PKP, "hello sigil"))).to.equal(
        pkpAddress,
      );
    });

    it("pkpSignMessage of bytes verifies", function () {
      const msg = ethers.getBytes("0x00ff10");
      expect(ethers.verifyMessage(msg, enclave.pkpSignMessage(PKP, msg))).to.equal(pkpAddress);
    });

    it("pkpSignMessage matches an ethers Wallet holding the same key", async function () {
      const w = new ethers.Wallet(enclave.pkpPrivateKey(PKP));
      expect(enclave.pkpSignMessage(PKP, "same")).to.equal(await w.signMessage("same"));
    });

    it("pkpSignTypedData verifies (verifyTypedData)", function () {
      const value = { to: "0x" + "11".repeat(20), contents: "hi" };
      const sig = enclave.pkpSignTypedData(PKP, DOMAIN, MAIL_TYPES, value);
      expect(ethers.verifyTypedData(DOMAIN, MAIL_TYPES, value, sig)).to.equal(pkpAddress);
    });

    it("pkpSignTypedData ignores an EIP712Domain entry in types (eth_signTypedData_v4 payloads)", function () {
      const value = { to: "0x" + "11".repeat(20), contents: "hi" };
      const withDomain = {
        ...MAIL_TYPES,
        EIP712Domain: [
          { name: "name", type: "string" },
          { name: "version", type: "string" },
          { name: "chainId", type: "uint256" },
          { name: "verifyingContract", type: "address" },
        ],
      };
      expect(enclave.pkpSignTypedData(PKP, DOMAIN, withDomain, value)).to.equal(
        enclave.pkpSignTypedData(PKP, DOMAIN, MAIL_TYPES, value),
      );
    });

    it("pkpSignTypedData refuses types that do not match the value with invalid_typed_data", function () {
      expectEnclaveError(
        () => enclave.pkpSignTypedData(PKP, DOMAIN, MAIL_TYPES, { to: "not an address", contents: 1 }),
        "invalid_typed_data",
      );
    });

    it("pkpSignTypedData refuses non-object arguments with invalid_typed_data", function () {
      expectEnclaveError(
        () => enclave.pkpSignTypedData(PKP, DOMAIN, null as never, {}),
        "invalid_typed_data",
      );
    });

    it("pkpSignDigest refuses a digest that is not 32 bytes of hex with invalid_digest", function () {
      expectEnclaveError(() => enclave.pkpSignDigest(PKP, "0x1234"), "invalid_digest");
      expectEnclaveError(
        () => enclave.pkpSignDigest(PKP, ethers.keccak256("0x01").slice(2)),
        "invalid_digest",
      );
    });

    it("pkpSignMessage refuses a non-string non-bytes message with invalid_message", function () {
      expectEnclaveError(() => enclave.pkpSignMessage(PKP, 5 as never), "invalid_message");
    });

    it("pkpPublicKey is the uncompressed key of pkpAddress", function () {
      const pub = enclave.pkpPublicKey(PKP);
      expect(pub).to.match(/^0x04[0-9a-f]{128}$/);
      expect(ethers.computeAddress(pub)).to.equal(pkpAddress);
    });

    it("action keys: public key and address belong to the private key", function () {
      const cid = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
      const w = new ethers.Wallet(enclave.actionPrivateKey(cid));
      expect(enclave.actionAddress(cid)).to.equal(w.address);
      expect(enclave.actionPublicKey(cid)).to.equal(w.signingKey.publicKey);
    });
  });

  describe("AES-256-GCM envelope", function () {
    it("round-trips a string", function () {
      expect(ethers.toUtf8String(enclave.pkpDecrypt(PKP, enclave.pkpEncrypt(PKP, "top secret")))).to.equal(
        "top secret",
      );
    });

    it("round-trips bytes, including empty", function () {
      for (const m of [new Uint8Array(0), ethers.randomBytes(1000)]) {
        expect(ethers.hexlify(enclave.pkpDecrypt(PKP, enclave.pkpEncrypt(PKP, m)))).to.equal(
          ethers.hexlify(m),
        );
      }
    });

    it("has the documented layout: 0x01 ‖ 12-byte nonce ‖ ciphertext ‖ 16-byte tag", function () {
      const env = ethers.getBytes(enclave.pkpEncrypt(PKP, "abc"));
      expect(env[0]).to.equal(1);
      expect(env.length).to.equal(1 + 12 + 3 + 16);
    });

    it("uses a fresh nonce each time", function () {
      expect(enclave.pkpEncrypt(PKP, "same")).to.not.equal(enclave.pkpEncrypt(PKP, "same"));
    });

    it("accepts the envelope without 0x", function () {
      expect(ethers.toUtf8String(enclave.pkpDecrypt(PKP, enclave.pkpEncrypt(PKP, "x").slice(2)))).to.equal(
        "x",
      );
    });

    it("another PKP cannot decrypt it", function () {
      const other = ethers.keccak256(ethers.toUtf8Bytes("other pkp"));
      expectEnclaveError(
        () => enclave.pkpDecrypt(other, enclave.pkpEncrypt(PKP, "mine")),
        "decryption_failed",
      );
    });

    for (const [name, mutate] of [
      ["a flipped ciphertext bit", (b: Uint8Array) => (b[14] ^= 1)],
      ["a flipped tag bit", (b: Uint8Array) => (b[b.length - 1] ^= 1)],
      ["a flipped nonce bit", (b: Uint8Array) => (b[3] ^= 1)],
      ["an unknown version byte", (b: Uint8Array) => (b[0] = 2)],
    ] as const) {
      it(`refuses ${name} with decryption_failed`, function () {
        const b = ethers.getBytes(enclave.pkpEncrypt(PKP, "payload"));
        mutate(b);
        expectEnclaveError(() => enclave.pkpDecrypt(PKP, ethers.hexlify(b)), "decryption_failed");
      });
    }

    for (const [name, bad] of [
      ["truncated input", "0x01" + "00".repeat(20)],
      ["non-hex input", "0xzz"],
      ["odd-length hex", "0x012"],
      ["a non-string", 12],
    ] as const) {
      it(`refuses ${name} with decryption_failed`, function () {
        expectEnclaveError(() => enclave.pkpDecrypt(PKP, bad as string), "decryption_failed");
      });
    }

    it("pkpEncrypt refuses a non-string non-bytes plaintext with invalid_message", function () {
      expectEnclaveError(() => enclave.pkpEncrypt(PKP, { a: 1 } as never), "invalid_message");
    });
  });

  describe("forward requests", function () {
    const req = {
      to: "0x" + "22".repeat(20),
      data: "0x1234",
      gas: 100_000n,
      nonce: 7n,
      deadline: 2_000_000_000,
    };

    it("a usage key's request verifies as the key's address (verifyTypedData)", async function () {
      const k = enclave.generateUsageKey();
      const s = await enclave.signForwardRequest(k.apiKey, req, DOMAIN);
      expect(s.from).to.equal(k.address);
      const value = {
        from: s.from,
        to: s.to,
        value: s.value,
        gas: s.gas,
        nonce: req.nonce,
        deadline: s.deadline,
        data: s.data,
      };
      expect(ethers.verifyTypedData(DOMAIN, FORWARD_REQUEST_TYPES, value, s.signature)).to.equal(k.address);
    });

    it("an account key's request is signed by the service-managed owner", async function () {
      const k = enclave.generateAccountKey();
      const s = await enclave.signForwardRequest(k.apiKey, req, DOMAIN);
      expect(s.from).to.equal(enclave.ownerAddress(k.address));
      const value = { ...s, nonce: req.nonce };
      expect(ethers.verifyTypedData(DOMAIN, FORWARD_REQUEST_TYPES, value, s.signature)).to.equal(s.from);
    });

    it("value defaults to zero and is returned as a bigint", async function () {
      const s = await enclave.signForwardRequest(enclave.generateUsageKey().apiKey, req, DOMAIN);
      expect(s.value).to.equal(0n);
    });

    for (const [name, patch] of [
      ["a bad target address", { to: "0x1234" }],
      ["odd-length data", { data: "0x123" }],
      ["a negative gas", { gas: -1n }],
      ["a number nonce", { nonce: 1 as unknown as bigint }],
      ["a deadline beyond uint48", { deadline: 2 ** 48 }],
      ["a fractional deadline", { deadline: 1.5 }],
    ] as const) {
      it(`refuses ${name} with invalid_request`, async function () {
        await expectEnclaveRejection(
          enclave.signForwardRequest(enclave.generateUsageKey().apiKey, { ...req, ...patch }, DOMAIN),
          "invalid_request",
        );
      });
    }

    it("requests for two domains each verify under their own domain only (per-domain separator)", async function () {
      const k = enclave.generateUsageKey();
      const other = { ...DOMAIN, chainId: 1n, verifyingContract: "0x" + "cd".repeat(20) };
      for (const [dom, wrong] of [
        [DOMAIN, other],
        [other, DOMAIN],
        [DOMAIN, other],
      ] as const) {
        const s = await enclave.signForwardRequest(k.apiKey, req, dom);
        const value = { ...s, nonce: req.nonce };
        expect(ethers.verifyTypedData(dom, FORWARD_REQUEST_TYPES, value, s.signature)).to.equal(k.address);
        expect(ethers.verifyTypedData(wrong, FORWARD_REQUEST_TYPES, value, s.signature)).to.not.equal(
          k.address,
        );
      }
    });

    it("refuses a domain without a verifying contract with invalid_request", async function () {
      await expectEnclaveRejection(
        enclave.signForwardRequest(enclave.generateUsageKey().apiKey, req, {
          ...DOMAIN,
          verifyingContract: "x",
        }),
        "invalid_request",
      );
    });
  });

  describe("on the Hardhat network", function () {
    let forwarder: ethers.Contract;
    let target: ethers.Contract;
    let domain: { name: string; version: string; chainId: bigint; verifyingContract: string };

    before(async function () {
      const factory = await hhEthers.getContractFactory("SigilForwarder"); // contracts/SigilForwarder.sol
      forwarder = (await factory.deploy()) as unknown as ethers.Contract;
      await forwarder.waitForDeployment();
      target = (await (
        await hhEthers.getContractFactory("EnclaveTarget")
      ).deploy(await forwarder.getAddress())) as unknown as ethers.Contract;
      await target.waitForDeployment();
      const d = await forwarder.eip712Domain();
      domain = {
        name: d.name,
        version: d.version,
        chainId: d.chainId,
        verifyingContract: d.verifyingContract,
      };
      expect(domain.name).to.equal("SigilForwarder");
      expect(domain.version).to.equal("1");
    });

    async function relay(apiKey: string, value: bigint) {
      const principal = enclave.principalAddress(apiKey);
      const nonce: bigint = await forwarder.nonces(principal);
      const block = await hhEthers.provider.getBlock("latest");
      const signed = await enclave.signForwardRequest(
        apiKey,
        {
          to: await target.getAddress(),
          data: target.interface.encodeFunctionData("record", [value]),
          gas: 200_000n,
          nonce,
          deadline: block!.timestamp + 3600,
        },
        domain,
      );
      expect(await forwarder.verify(signed)).to.equal(true);
      const [relayer] = await hhEthers.getSigners();
      await (await (forwarder.connect(relayer) as ethers.Contract).execute(signed)).wait();
      return principal;
    }

    it("a usage key's request executes with _msgSender() equal to the key's address", async function () {
      const k = enclave.generateUsageKey();
      const principal = await relay(k.apiKey, 11n);
      expect(principal).to.equal(k.address);
      expect(await target.lastSender()).to.equal(k.address);
      expect(await target.lastValue()).to.equal(11n);
    });

    it("an account key's request executes as the service-managed owner", async function () {
      const k = enclave.generateAccountKey();
      await relay(k.apiKey, 22n);
      expect(await target.lastSender()).to.equal(enclave.ownerAddress(k.address));
    });

    it("consecutive requests use the forwarder's nonce", async function () {
      const k = enclave.generateUsageKey();
      await relay(k.apiKey, 1n);
      await relay(k.apiKey, 2n);
      expect(await forwarder.nonces(k.address)).to.equal(2n);
    });

    it("a request signed for another forwarder domain is refused by the forwarder", async function () {
      const k = enclave.generateUsageKey();
      const signed = await enclave.signForwardRequest(
        k.apiKey,
        { to: await target.getAddress(), data: "0x", gas: 100_000n, nonce: 0n, deadline: 2 ** 40 },
        { ...domain, version: "2" },
      );
      expect(await forwarder.verify(signed)).to.equal(false);
    });

    it("a gas signer sends a transaction on chain", async function () {
      const [funder] = await hhEthers.getSigners();
      const gas = enclave.gasSigner(3, hhEthers.provider);
      expect(await gas.getAddress()).to.equal(enclave.gasAddress(3));
      await (
        await funder.sendTransaction({ to: enclave.gasAddress(3), value: ethers.parseEther("1") })
      ).wait();
      const receipt = await (await gas.sendTransaction({ to: funder.address, value: 1n })).wait();
      expect(receipt!.from).to.equal(enclave.gasAddress(3));
    });

    it("a gas signer can submit forwarder.execute itself", async function () {
      const [funder] = await hhEthers.getSigners();
      const gas = enclave.gasSigner(4, hhEthers.provider);
      await (
        await funder.sendTransaction({ to: enclave.gasAddress(4), value: ethers.parseEther("1") })
      ).wait();
      const k = enclave.generateUsageKey();
      const signed = await enclave.signForwardRequest(
        k.apiKey,
        {
          to: await target.getAddress(),
          data: target.interface.encodeFunctionData("record", [44n]),
          gas: 200_000n,
          nonce: 0n,
          deadline: 2 ** 40,
        },
        domain,
      );
      await (await (forwarder.connect(gas) as ethers.Contract).execute(signed)).wait();
      expect(await target.lastSender()).to.equal(k.address);
    });
  });

  describe("gas signers", function () {
    it("sign messages and typed data as the gas address", async function () {
      const g = enclave.gasSigner(0, null);
      expect(ethers.verifyMessage("m", await g.signMessage("m"))).to.equal(enclave.gasAddress(0));
      const value = { to: "0x" + "11".repeat(20), contents: "x" };
      expect(
        ethers.verifyTypedData(DOMAIN, MAIL_TYPES, value, await g.signTypedData(DOMAIN, MAIL_TYPES, value)),
      ).to.equal(enclave.gasAddress(0));
    });

    it("connect() keeps the same key", async function () {
      const g = enclave.gasSigner(1, null);
      expect(await g.connect(null).getAddress()).to.equal(enclave.gasAddress(1));
    });

    it("different indices are different wallets", function () {
      expect(enclave.gasAddress(0)).to.not.equal(enclave.gasAddress(1));
    });

    it("expose no private key: no privateKey/signingKey property, nothing secret in inspect or JSON", function () {
      const g = enclave.gasSigner(2, null) as unknown as Record<string, unknown>;
      const hidden = new ethers.Wallet(
        // The expected key, recomputed through the internal derivation to search for it.
        ethers.hexlify(
          require("../../enclave/derive").deriveSecp256k1(
            ethers.getBytes("0x" + "5a".repeat(32)),
            "sigil/gas/v1/",
            Uint8Array.of(0, 0, 0, 2),
          ),
        ),
      );
      expect(hidden.address).to.equal(enclave.gasAddress(2));
      expect(g.privateKey).to.equal(undefined);
      expect(g.signingKey).to.equal(undefined);
      const dump =
        inspect(g, { showHidden: true, depth: 10 }) +
        JSON.stringify(g) +
        Object.getOwnPropertyNames(g).join();
      expect(dump).to.not.include(hidden.privateKey.slice(2));
    });

    it("legacy transactions are byte-for-byte what an ethers Wallet with the same key signs", async function () {
      const g = enclave.gasSigner(2, null);
      const same = new ethers.Wallet(
        ethers.hexlify(
          require("../../enclave/derive").deriveSecp256k1(
            ethers.getBytes("0x" + "5a".repeat(32)),
            "sigil/gas/v1/",
            Uint8Array.of(0, 0, 0, 2),
          ),
        ),
      );
      // 300 nonces: some signatures have an r or s with a leading zero byte (minimal RLP integers).
      const txs = [
        { nonce: 0, value: 0n, data: "0x", chainId: 31337 },
        { nonce: 1, value: 1n, data: "0xabcdef", chainId: 31337n },
        { nonce: 70_000, value: 10n ** 18n, data: "0x" + "00".repeat(33), chainId: 1 },
        // Calldata lengths around RLP's long-length boundaries (55/56 bytes, 255/256, 65535/65536).
        ...[54, 55, 56, 57, 255, 256, 4_000, 65_535, 65_536].map((n, i) => ({
          nonce: 200_000 + i,
          value: 0n,
          data: ethers.hexlify(ethers.randomBytes(n)),
          chainId: 31337,
        })),
        ...Array.from({ length: 300 }, (_, i) => ({ nonce: 100 + i, value: 0n, data: "0x12", chainId: 5 })),
      ];
      for (const tx of txs) {
        const request = {
          type: 0,
          to: "0x" + "22".repeat(20),
          gasLimit: 300_000n,
          gasPrice: 2_000_000_001n,
          ...tx,
        };
        const signed = await g.signTransaction(request);
        expect(signed).to.equal(await same.signTransaction(request));
        expect(ethers.Transaction.from(signed).from).to.equal(enclave.gasAddress(2));
      }
    });

    it("refuses a transaction whose from is another address", async function () {
      const g = enclave.gasSigner(0, null);
      let caught: unknown;
      await g
        .signTransaction({
          from: "0x" + "11".repeat(20),
          to: "0x" + "22".repeat(20),
          chainId: 1n,
          nonce: 0,
          gasLimit: 21000n,
          gasPrice: 1n,
        })
        .catch((e) => (caught = e));
      expect(String(caught)).to.match(/from address mismatch/);
    });
  });

  describe("libsecp256k1 primitives", function () {
    it("uses the native binding, never the package's non-constant-time elliptic fallback", function () {
      const { nativeSecp } = require("../../enclave/secp");
      expect(
        nativeSecp,
        "secp256k1's native binding is not built: npm ci must run its install script",
      ).to.not.equal(null);
      expect(nativeSecp).to.equal(require("secp256k1/bindings"));
      expect(nativeSecp).to.not.equal(require("secp256k1/elliptic"));
    });
    it("signatures and public keys are byte-for-byte noble's (RFC 6979, low s) for 300 random keys", function () {
      const { secp256k1 } = require("@noble/curves/secp256k1");
      const { publicKeyOf, signDigest } = require("../../enclave/secp");
      for (let i = 0; i < 300; i++) {
        const k = ethers.getBytes(ethers.keccak256(ethers.toUtf8Bytes(`key ${i}`)));
        const digest = ethers.getBytes(ethers.keccak256(ethers.toUtf8Bytes(`digest ${i}`)));
        const sig = secp256k1.sign(digest, k, { lowS: true });
        expect(signDigest(k, digest)).to.equal("0x" + sig.toCompactHex() + (27 + sig.recovery).toString(16));
        expect(ethers.hexlify(publicKeyOf(k))).to.equal(ethers.hexlify(secp256k1.getPublicKey(k, false)));
      }
    });
  });

  it("EnclaveError is exported and typed, and isEnclaveError tells it from other errors", function () {
    const e = new EnclaveError("invalid_cid", "Invalid CID.", { details: "why" });
    expect([e.code, e.shortMessage, e.details, e.name]).to.deep.equal([
      "invalid_cid",
      "Invalid CID.",
      "why",
      "EnclaveError",
    ]);
    expect(JSON.parse(JSON.stringify(e))).to.deep.equal({
      code: "invalid_cid",
      message: "Invalid CID.",
      details: "why",
    });
    expect(isEnclaveError(e)).to.equal(true);
    expect(isEnclaveError(new Error("x"))).to.equal(false);
  });
});
