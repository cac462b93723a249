import { expect } from "chai";
import { ethers } from "ethers";
import fc from "fast-check";
import { Enclave } from "../../enclave";
import { deriveSecp256k1 } from "../../enclave/derive";

/**
 * The gas signer's lean type-2 encoding (enclave/gasSigner.ts) against ethers: the relayer's EIP-1559
 * transactions must be byte-for-byte what an ethers Wallet with the same key signs.
 */
describe("gas signer: EIP-1559 (type 2) transactions", function () {
  const root = "0x" + "5a".repeat(32);
  const enclave = Enclave.fromRootKey(root);
  const gas = enclave.gasSigner(1, null);
  const same = new ethers.Wallet(
    ethers.hexlify(deriveSecp256k1(ethers.getBytes(root), "sigil/gas/v1/", Uint8Array.of(0, 0, 0, 1))),
  );

  const uint = (bits: number) => fc.bigInt({ min: 0n, max: 2n ** BigInt(bits) - 1n });
  const request = fc
    .record({
      chainId: fc.oneof(fc.constant(31337n), fc.constant(1n), fc.bigInt({ min: 1n, max: 2n ** 64n - 1n })),
      nonce: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })),
      tip: fc.oneof(fc.constant(0n), uint(8), uint(40), uint(128)),
      extra: fc.oneof(fc.constant(0n), uint(8), uint(64), uint(128)),
      gasLimit: fc.oneof(fc.constant(21_000n), uint(64)),
      to: fc.uint8Array({ minLength: 20, maxLength: 20 }).map((b) => ethers.getAddress(ethers.hexlify(b))),
      value: fc.oneof(fc.constant(0n), uint(8), uint(256)),
      // Lengths around RLP's short/long boundary (55/56 bytes) and beyond 255.
      data: fc.oneof(
        fc.constant("0x"),
        fc.uint8Array({ maxLength: 80 }).map(ethers.hexlify),
        fc.uint8Array({ minLength: 250, maxLength: 2_000 }).map(ethers.hexlify),
      ),
    })
    .map((f) => ({
      type: 2,
      chainId: f.chainId,
      nonce: f.nonce,
      maxPriorityFeePerGas: f.tip,
      maxFeePerGas: f.tip + f.extra,
      gasLimit: f.gasLimit,
      to: f.to,
      value: f.value,
      data: f.data,
    }));

  it("are byte-for-byte what an ethers Wallet with the same key signs, for random fields", async function () {
    await fc.assert(
      fc.asyncProperty(request, async (tx) => {
        expect(await gas.signTransaction(tx)).to.equal(await same.signTransaction(tx));
      }),
      { numRuns: 400 },
    );
  });

  it("recover to the gas address, with the fields given", async function () {
    const tx = {
      type: 2,
      chainId: 31337,
      nonce: 7,
      maxPriorityFeePerGas: 1_000_000_000n,
      maxFeePerGas: 21_000_000_000n,
      gasLimit: 300_000n,
      to: "0x" + "22".repeat(20),
      value: 0n,
      data: "0x1234",
    };
    const parsed = ethers.Transaction.from(await gas.signTransaction(tx));
    expect(parsed.type).to.equal(2);
    expect(parsed.from).to.equal(enclave.gasAddress(1));
    expect([parsed.maxPriorityFeePerGas, parsed.maxFeePerGas, parsed.nonce, parsed.data]).to.deep.equal([
      1_000_000_000n,
      21_000_000_000n,
      7,
      "0x1234",
    ]);
    expect(parsed.accessList).to.deep.equal([]);
  });

  it("an explicit empty access list encodes like an absent one", async function () {
    const tx = {
      type: 2,
      chainId: 5,
      nonce: 0,
      maxPriorityFeePerGas: 1n,
      maxFeePerGas: 2n,
      gasLimit: 21_000n,
      to: "0x" + "33".repeat(20),
    };
    const signed = await gas.signTransaction({ ...tx, accessList: [] });
    expect(signed).to.equal(await gas.signTransaction(tx));
    expect(signed).to.equal(await same.signTransaction({ ...tx, accessList: [] }));
  });

  it("a non-empty access list takes the general path and still matches ethers", async function () {
    const tx = {
      type: 2,
      chainId: 5,
      nonce: 3,
      maxPriorityFeePerGas: 1n,
      maxFeePerGas: 2n,
      gasLimit: 50_000n,
      to: "0x" + "33".repeat(20),
      accessList: [{ address: "0x" + "44".repeat(20), storageKeys: ["0x" + "00".repeat(31) + "01"] }],
    };
    expect(await gas.signTransaction(tx)).to.equal(await same.signTransaction(tx));
  });
});
