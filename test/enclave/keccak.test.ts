/**
 * The main thread's keccak-256 (enclave/keccak.ts): libkeccak where built, and ethers routed to it.
 */
import { expect } from "chai";
import * as fc from "fast-check";
import { keccak_256 } from "@noble/hashes/sha3";
import { ethers } from "ethers";
import { hasNativeKeccak, keccak256Bytes, registerNativeKeccakWithEthers } from "../../enclave/keccak";

const hex = (b: Uint8Array) => "0x" + Buffer.from(b).toString("hex");

describe("enclave: keccak-256", function () {
  it("uses the native binding on this platform (as CI and production do)", function () {
    expect(hasNativeKeccak).to.equal(true);
  });

  it("equals noble's keccak_256 for every length around the rate boundaries", function () {
    for (const n of [0, 1, 31, 32, 33, 135, 136, 137, 271, 272, 273, 4096]) {
      const data = ethers.randomBytes(n);
      expect(hex(keccak256Bytes(data)), `length ${n}`).to.equal(hex(keccak_256(data)));
    }
  });

  it("equals noble's keccak_256 on random inputs, including views into larger buffers (property)", function () {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.nat(16), (bytes, offset) => {
        const backing = new Uint8Array(bytes.length + offset + 3);
        backing.set(bytes, offset);
        const view = backing.subarray(offset, offset + bytes.length);
        expect(hex(keccak256Bytes(view))).to.equal(hex(keccak_256(bytes)));
      }),
      { numRuns: 300 },
    );
  });

  it("is what ethers' keccak256 uses in this process, with unchanged results", function () {
    expect(registerNativeKeccakWithEthers()).to.equal(true);
    expect(ethers.keccak256(ethers.toUtf8Bytes("hello"))).to.equal(
      "0x1c8aff950685c2ed4bc3174f3472287b56d9517b9c948127319a09a7a36deac8",
    );
    expect(ethers.getAddress("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")).to.equal(
      "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    );
  });
});
