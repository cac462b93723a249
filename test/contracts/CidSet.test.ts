/**
 * contracts/libraries/CidSet.sol through contracts/test/CidSetHarness.sol: the count word (NO_CID_YET, the
 * refund when the last CID leaves), each write's refusals, and a property against a plain set.
 * Deterministic by default (fixed seed); FC_SEED / FC_RUNS explore further.
 */
import { expect } from "chai";
import fc from "fast-check";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import { CidSetHarness__factory } from "../../typechain-types";

const NO_CID_YET = 1n << 16n;
const REFUSED = ethers.MaxUint256;
const hashOf = (label: string) => ethers.id(label);
const A = hashOf("cid A");
const B = hashOf("cid B");

async function harnessFixture() {
  const [deployer] = await ethers.getSigners();
  return { set: await new CidSetHarness__factory(deployer).deploy() };
}

describe("CidSet", function () {
  it("exposes REFUSED as the all-ones word and NO_CID_YET as bit 16", async function () {
    const { set } = await loadFixture(harnessFixture);
    expect([await set.refused(), await set.noCidYet()]).to.deep.equal([REFUSED, NO_CID_YET]);
  });

  describe("add", function () {
    it("answers a count of one for the first CID of a new set, dropping NO_CID_YET", async function () {
      const { set } = await loadFixture(harnessFixture);
      expect(await set.add.staticCall(NO_CID_YET, A, 256n)).to.equal(1n);
    });

    it("lists the CID without writing the word (the caller writes it)", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.add(NO_CID_YET, A, 256n);
      expect([await set.contains(A), await set.word()]).to.deep.equal([true, 0n]);
    });

    it("answers the word plus one for a further CID", async function () {
      const { set } = await loadFixture(harnessFixture);
      expect(await set.add.staticCall(5n, A, 256n)).to.equal(6n);
    });

    it("refuses a CID already listed (REFUSED)", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.addAndStore(A, 256n);
      expect(await set.add.staticCall(1n, A, 256n)).to.equal(REFUSED);
    });

    it("refuses a new CID when the word already counts max (REFUSED, nothing listed)", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.add(2n, A, 2n);
      expect(await set.contains(A)).to.equal(false);
    });
  });

  describe("remove", function () {
    it("answers zero when the last CID leaves, so the word is given back", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.setWord(NO_CID_YET);
      await set.addAndStore(A, 256n);
      await set.removeAndStore(A);
      expect([await set.word(), await set.contains(A)]).to.deep.equal([0n, false]);
    });

    it("answers the word minus one", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.addAndStore(A, 256n);
      await set.addAndStore(B, 256n);
      expect(await set.remove.staticCall(2n, A)).to.equal(1n);
    });

    it("refuses a CID that is not listed (REFUSED)", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.addAndStore(A, 256n);
      expect(await set.remove.staticCall(1n, B)).to.equal(REFUSED);
    });

    it("refuses any CID when the word is zero, even one listed before a clear", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.addAndStore(A, 256n);
      await set.clear();
      expect(await set.remove.staticCall(0n, A)).to.equal(REFUSED);
    });
  });

  describe("clear, count and sizeOf", function () {
    it("clear zeroes the word and leaves the listed hashes", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.addAndStore(A, 256n);
      await set.clear();
      expect([await set.word(), await set.count(), await set.contains(A)]).to.deep.equal([0n, 0n, true]);
    });

    it("sizeOf does not count NO_CID_YET", async function () {
      const { set } = await loadFixture(harnessFixture);
      expect([await set.sizeOf(NO_CID_YET), await set.sizeOf(NO_CID_YET | 3n)]).to.deep.equal([0n, 3n]);
    });

    it("count reads the stored word", async function () {
      const { set } = await loadFixture(harnessFixture);
      await set.addAndStore(A, 256n);
      await set.addAndStore(B, 256n);
      expect(await set.count()).to.equal(2n);
    });
  });

  it("behaves like a set bounded by max under any sequence of adds and removes", async function () {
    const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : 20261127;
    const numRuns = process.env.FC_RUNS ? Number(process.env.FC_RUNS) : 15;
    const MAX = 4;
    const labels = ["a", "b", "c", "d", "e", "f"];
    const opArb = fc.record({ add: fc.boolean(), label: fc.constantFrom(...labels) });
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 24 }), async (ops) => {
        const { set } = await loadFixture(harnessFixture);
        await set.setWord(NO_CID_YET);
        const model = new Set<string>();
        for (const { add, label } of ops) {
          const hash = hashOf(label);
          if (add) {
            const accepted = !model.has(label) && model.size < MAX;
            const expected = accepted ? BigInt(model.size + 1) : REFUSED;
            expect(await set.addAndStore.staticCall(hash, MAX), `add ${label}`).to.equal(expected);
            await set.addAndStore(hash, MAX);
            if (accepted) model.add(label);
          } else {
            const expected = model.has(label) ? BigInt(model.size - 1) : REFUSED;
            expect(await set.removeAndStore.staticCall(hash), `remove ${label}`).to.equal(expected);
            await set.removeAndStore(hash);
            model.delete(label);
          }
        }
        expect(await set.count()).to.equal(BigInt(model.size));
        for (const label of labels) {
          expect(await set.contains(hashOf(label)), `contains ${label}`).to.equal(model.has(label));
        }
      }),
      { seed, numRuns },
    );
  });
});
