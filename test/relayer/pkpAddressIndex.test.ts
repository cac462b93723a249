/**
 * The PKP address index (relayer/permissions/pkpAddressIndex.ts): naming a PKP by address is a lookup,
 * not a scan of the account's PKPs, and the answer is always the scan's answer.
 */
import { expect } from "chai";
import fc from "fast-check";
import { ethers } from "ethers";
import { Enclave } from "../../enclave";
import { PkpAddressIndex } from "../../relayer/permissions/pkpAddressIndex";
import type { PkpRecord } from "../../relayer/permissions/projection";

const enclave = Enclave.fromRootKey("0x" + "3c".repeat(32));
const pkpId = (n: number) => ethers.zeroPadValue(ethers.toBeHex(n + 1), 32).toLowerCase();
const addressOf = (n: number) => enclave.pkpAddress(pkpId(n));

function counting() {
  const derived: string[] = [];
  const index = new PkpAddressIndex((id) => {
    derived.push(id);
    return enclave.pkpAddress(id);
  });
  return { index, derived };
}

function account(ns: number[]): Map<string, PkpRecord> {
  return new Map(ns.map((n) => [pkpId(n), { id: pkpId(n), name: "", description: "" }]));
}

describe("relayer: PKP address index", function () {
  it("finds a PKP by its address in any case", function () {
    const { index } = counting();
    const pkps = account([1, 2, 3]);
    expect(index.lookup(pkps, addressOf(2))).to.equal(pkpId(2));
    expect(index.lookup(pkps, addressOf(2).toLowerCase())).to.equal(pkpId(2));
    expect(index.lookup(pkps, "0x" + addressOf(3).slice(2).toUpperCase())).to.equal(pkpId(3));
  });

  it("a miss derives no address once the account is indexed", function () {
    const { index, derived } = counting();
    const pkps = account([1, 2, 3]);
    expect(index.lookup(pkps, addressOf(9))).to.equal(null);
    expect(derived).to.have.length(3);
    for (let i = 0; i < 50; i++) expect(index.lookup(pkps, addressOf(10 + i))).to.equal(null);
    expect(derived).to.have.length(3);
  });

  it("a PKP created later is indexed on the next lookup, and only it", function () {
    const { index, derived } = counting();
    const pkps = account([1, 2]);
    index.lookup(pkps, addressOf(1));
    pkps.set(pkpId(7), { id: pkpId(7), name: "", description: "" });
    expect(index.lookup(pkps, addressOf(7))).to.equal(pkpId(7));
    expect(derived).to.deep.equal([pkpId(1), pkpId(2), pkpId(7)]);
  });

  it("another account's PKP is not found", function () {
    const { index } = counting();
    const mine = account([1]);
    index.lookup(account([2]), addressOf(2));
    expect(index.lookup(mine, addressOf(2))).to.equal(null);
  });

  it("a reloaded projection (a new pkps map) starts a fresh index", function () {
    const { index } = counting();
    const before = account([1, 2]);
    expect(index.lookup(before, addressOf(2))).to.equal(pkpId(2));
    const reloaded = account([1]); // e.g. after a chain reset
    expect(index.lookup(reloaded, addressOf(2))).to.equal(null);
  });

  it("always answers what a scan of the account would (property)", function () {
    const step = fc.oneof(
      fc.record({ add: fc.integer({ min: 0, max: 30 }) }),
      fc.record({ find: fc.integer({ min: 0, max: 30 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const index = new PkpAddressIndex((id) => enclave.pkpAddress(id));
        const pkps = account([]);
        for (const s of steps) {
          if ("add" in s) pkps.set(pkpId(s.add), { id: pkpId(s.add), name: "", description: "" });
          else {
            const want = addressOf(s.find);
            const scan = [...pkps.keys()].find((id) => enclave.pkpAddress(id) === want) ?? null;
            expect(index.lookup(pkps, want)).to.equal(scan);
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
