/**
 * contracts/libraries/PkpBitmap.sol through contracts/test/PkpBitmapHarness.sol: the layout (count and
 * deletion mark beside the first 240 members in word 0), each write's refusals, and a property against a
 * plain set. Deterministic by default (fixed seed); FC_SEED / FC_RUNS explore further.
 */
import { expect } from "chai";
import fc from "fast-check";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import { PkpBitmapHarness__factory } from "../../typechain-types";

const HEADER_BITS = 16n;
const DELETED = 1n << 15n;

async function harnessFixture() {
  const [deployer] = await ethers.getSigners();
  return { bitmap: await new PkpBitmapHarness__factory(deployer).deploy() };
}

describe("PkpBitmap", function () {
  describe("bitOf", function () {
    it("puts index 1 just above the 16-bit header of word 0", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      expect(await bitmap.bitOf(1n)).to.deep.equal([0n, 1n << HEADER_BITS]);
    });

    it("puts index 240 on the top bit of word 0", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      expect(await bitmap.bitOf(240n)).to.deep.equal([0n, 1n << 255n]);
    });

    it("puts index 241 on the bottom bit of word 1", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      expect(await bitmap.bitOf(241n)).to.deep.equal([1n, 1n]);
    });
  });

  describe("add", function () {
    it("writes the member's bit and the count into word 0 alone", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(1n, 256n);
      expect([await bitmap.wordAt(0n), await bitmap.wordAt(1n)]).to.deep.equal([
        (1n << HEADER_BITS) | 1n,
        0n,
      ]);
    });

    it("answers true for a new member", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      expect(await bitmap.add.staticCall(5n, 256n)).to.equal(true);
    });

    it("puts a member past index 240 in word 1 and counts it in word 0", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(242n, 256n);
      expect([await bitmap.wordAt(0n), await bitmap.wordAt(1n)]).to.deep.equal([1n, 2n]);
    });

    it("refuses a member already there (false, count unchanged)", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(3n, 256n);
      expect(await bitmap.add.staticCall(3n, 256n)).to.equal(false);
      expect(await bitmap.count()).to.equal(1n);
    });

    it("refuses a member already there past index 240", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(300n, 256n);
      expect(await bitmap.add.staticCall(300n, 256n)).to.equal(false);
    });

    it("refuses a new member once the count reaches max", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(1n, 2n);
      await bitmap.add(2n, 2n);
      expect(await bitmap.add.staticCall(3n, 2n)).to.equal(false);
    });
  });

  describe("remove", function () {
    it("clears word 0 to zero when the last member of word 0 leaves (a storage refund)", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(7n, 256n);
      await bitmap.remove(7n);
      expect(await bitmap.wordAt(0n)).to.equal(0n);
    });

    it("clears the member's bit in word 1 and the count in word 0", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(241n, 256n);
      await bitmap.remove(241n);
      expect([await bitmap.wordAt(0n), await bitmap.wordAt(1n)]).to.deep.equal([0n, 0n]);
    });

    it("answers true for a member", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(9n, 256n);
      expect(await bitmap.remove.staticCall(9n)).to.equal(true);
    });

    it("refuses an index that is no member of word 0 (false)", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(1n, 256n);
      expect(await bitmap.remove.staticCall(2n)).to.equal(false);
    });

    it("refuses an index that is no member of word 1 (false)", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(1n, 256n);
      expect(await bitmap.remove.staticCall(500n)).to.equal(false);
    });

    it("refuses a member of a bitmap marked deleted (false, member kept)", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(4n, 256n);
      await bitmap.markDeleted();
      expect([await bitmap.remove.staticCall(4n), await bitmap.contains(4n)]).to.deep.equal([false, true]);
    });
  });

  describe("markDeleted", function () {
    it("sets the mark beside the count of a bitmap holding members", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.add(1n, 256n);
      await bitmap.markDeleted();
      expect([await bitmap.wordAt(0n), await bitmap.isDeleted(), await bitmap.count()]).to.deep.equal([
        DELETED | (1n << HEADER_BITS) | 1n,
        true,
        1n,
      ]);
    });

    it("leaves an empty bitmap untouched (no write, no mark)", async function () {
      const { bitmap } = await loadFixture(harnessFixture);
      await bitmap.markDeleted();
      expect([await bitmap.wordAt(0n), await bitmap.isDeleted()]).to.deep.equal([0n, false]);
    });
  });

  it("behaves like a set bounded by max under any sequence of adds and removes", async function () {
    const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : 20261127;
    const numRuns = process.env.FC_RUNS ? Number(process.env.FC_RUNS) : 15;
    const MAX = 6;
    // Indices around the word boundary (240/241) and far past it, so both write paths are taken.
    const indexArb = fc.constantFrom(1n, 2n, 3n, 239n, 240n, 241n, 242n, 511n, 512n, 513n);
    const opArb = fc.record({ add: fc.boolean(), index: indexArb });
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 24 }), async (ops) => {
        const { bitmap } = await loadFixture(harnessFixture);
        const model = new Set<bigint>();
        for (const { add, index } of ops) {
          if (add) {
            const expected = !model.has(index) && model.size < MAX;
            expect(await bitmap.add.staticCall(index, MAX), `add ${index}`).to.equal(expected);
            await bitmap.add(index, MAX);
            if (expected) model.add(index);
          } else {
            const expected = model.has(index);
            expect(await bitmap.remove.staticCall(index), `remove ${index}`).to.equal(expected);
            await bitmap.remove(index);
            model.delete(index);
          }
        }
        expect(await bitmap.count()).to.equal(BigInt(model.size));
        for (const index of [1n, 2n, 3n, 239n, 240n, 241n, 242n, 511n, 512n, 513n]) {
          expect(await bitmap.contains(index), `contains ${index}`).to.equal(model.has(index));
        }
        // An empty bitmap is all zero again: every removal gave its slot back.
        if (model.size === 0) expect(await bitmap.wordAt(0n)).to.equal(0n);
      }),
      { seed, numRuns },
    );
  });
});
