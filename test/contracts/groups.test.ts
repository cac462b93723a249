/**
 * PKPs, groups and their members: creation, membership rules, bounds, views and canExecute.
 */
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import {
  CID_EMPTY,
  CID_HELLO,
  Scope,
  cidHash,
  expectedPkpId,
  grantKey,
  readAccount,
  scopes,
  twoAccountsFixture,
} from "./fixtures";

/** Distinct, CID-shaped strings (46 characters like a CIDv0). */
const fakeCid = (i: number): string => "Qm" + ethers.id(`cid ${i}`).slice(2, 46);

/**
 * Account A with PKPs 1..242: word 0 of a group's PKP bitmap holds the count and the bits of PKPs 1..240,
 * so PKPs 241 and 242 are the first whose bits live in word 1 (the count then takes a second write).
 */
async function pastFirstBitmapWordFixture() {
  const fixture = await twoAccountsFixture();
  const { registry, ownerA, deployment } = fixture;
  for (let i = 3; i <= 242; i++) await registry.connect(ownerA).createPkp("", "");
  const pkpA = (index: number) =>
    expectedPkpId(BigInt(deployment.chainId), deployment.registry, 1n, BigInt(index));
  return { ...fixture, pkpA240: pkpA(240), pkpA241: pkpA(241), pkpA242: pkpA(242) };
}

const pkpCountOf = async (registry: { getGroup(a: bigint, g: bigint): Promise<{ pkpCount: bigint }> }) =>
  (await registry.getGroup(1n, 1n)).pkpCount;

describe("AccountRegistry: PKPs and groups", function () {
  describe("createPkp", function () {
    it("returns keccak256(abi.encode(chainid, registry, accountId, counter))", async function () {
      const { registry, ownerA, deployment } = await loadFixture(twoAccountsFixture);
      const expected = expectedPkpId(BigInt(deployment.chainId), deployment.registry, 1n, 3n);
      expect(await registry.connect(ownerA).createPkp.staticCall("p", "")).to.equal(expected);
    });

    it("gives different ids to the same counter in different accounts", async function () {
      const { pkpA1, pkpB1 } = await loadFixture(twoAccountsFixture);
      expect(pkpA1).to.not.equal(pkpB1);
      expect(pkpA1).to.not.equal(ethers.ZeroHash);
    });

    it("getPkp returns the PKP with its account", async function () {
      const { registry, pkpA2 } = await loadFixture(twoAccountsFixture);
      const pkp = await registry.getPkp(pkpA2);
      expect([pkp.id, pkp.accountId, pkp.name, pkp.description]).to.deep.equal([pkpA2, 1n, "pkp A2", ""]);
    });

    it("getPkp reverts PkpNotInAccount(id, 0) for an unknown id", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      await expect(registry.getPkp(ethers.ZeroHash))
        .to.be.revertedWithCustomError(registry, "PkpNotInAccount")
        .withArgs(ethers.ZeroHash, 0n);
    });

    it("listPkps pages through the account's PKPs in creation order", async function () {
      const { registry, ownerA, pkpA1, pkpA2 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).createPkp("pkp A3", "");
      const [page, total] = await registry.listPkps(1n, 0n, 2n);
      expect(total).to.equal(3n);
      expect(page.map((pkp) => pkp.id)).to.deep.equal([pkpA1, pkpA2]);
      const [rest] = await registry.listPkps(1n, 2n, 2n);
      expect(rest.map((pkp) => pkp.name)).to.deep.equal(["pkp A3"]);
    });

    it("listPkps refuses a page larger than MAX_PAGE_SIZE", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      await expect(registry.listPkps(1n, 0n, 1000n))
        .to.be.revertedWithCustomError(registry, "PageTooLarge")
        .withArgs(1000n, 100n);
    });

    it("refuses a description longer than MAX_STRING_BYTES", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).createPkp("p", "d".repeat(257)))
        .to.be.revertedWithCustomError(registry, "StringTooLong")
        .withArgs(257n, 256n);
    });
  });

  describe("createGroup", function () {
    it("assigns per-account ids from 1", async function () {
      const { registry, ownerB } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerB).createGroup("second of B", "", [], []))
        .to.emit(registry, "GroupCreated")
        .withArgs(2n, 2n, "second of B", "");
    });

    it("never reuses the id of a deleted group", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).deleteGroup(2n);
      await expect(registry.connect(ownerA).createGroup("third", "", [], []))
        .to.emit(registry, "GroupCreated")
        .withArgs(1n, 3n, "third", "");
    });

    it("lets the owner create a group with initial PKPs and actions", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).createGroup("full", "", [pkpA1], [CID_HELLO]))
        .to.emit(registry, "PkpAdded")
        .withArgs(1n, 3n, pkpA1)
        .and.to.emit(registry, "ActionAdded")
        .withArgs(1n, 3n, cidHash(CID_HELLO), CID_HELLO);
      const group = await registry.getGroup(1n, 3n);
      expect([group.pkpCount, group.actionCount]).to.deep.equal([1n, 1n]);
    });

    it("lets a key with group:create and wildcard addPkp/manageActions add initial members", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await grantKey(registry, ownerA, key, scopes({ CreateGroup: true, AddPkp: [0], ManageActions: [0] }));
      await expect(registry.connect(key).createGroup("full", "", [pkpA1], [CID_HELLO])).to.emit(
        registry,
        "ActionAdded",
      );
    });

    it("refuses initial PKPs to a key without wildcard addPkp", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await grantKey(
        registry,
        ownerA,
        key,
        scopes({ CreateGroup: true, AddPkp: [1, 2], ManageActions: [0] }),
      );
      await expect(registry.connect(key).createGroup("g", "", [pkpA1], [CID_HELLO]))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 1n, Scope.AddPkp, 3n);
    });

    it("refuses initial actions to a key without wildcard manageActions", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await grantKey(registry, ownerA, key, scopes({ CreateGroup: true, AddPkp: [0], ManageActions: [1] }));
      await expect(registry.connect(key).createGroup("g", "", [pkpA1], [CID_HELLO]))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 1n, Scope.ManageActions, 3n);
    });

    it("refuses an initial PKP of another account", async function () {
      const { registry, ownerA, pkpB1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).createGroup("g", "", [pkpB1], []))
        .to.be.revertedWithCustomError(registry, "PkpNotInAccount")
        .withArgs(pkpB1, 1n);
    });

    it("refuses more than MAX_BATCH initial members", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      const cids = Array.from({ length: 65 }, (_, i) => fakeCid(i));
      await expect(registry.connect(ownerA).createGroup("g", "", [], cids))
        .to.be.revertedWithCustomError(registry, "TooManyEntries")
        .withArgs(65n, 64n);
    });

    it("refuses a name longer than MAX_STRING_BYTES", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).createGroup("g".repeat(257), "", [], []))
        .to.be.revertedWithCustomError(registry, "StringTooLong")
        .withArgs(257n, 256n);
    });
  });

  describe("deleteGroup", function () {
    it("removes the group and its members from every view", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkp(2n, pkpA1);
      await registry.connect(ownerA).addAction(2n, CID_HELLO);
      await registry.connect(ownerA).deleteGroup(2n);
      await expect(registry.getGroup(1n, 2n))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 2n);
      await expect(registry.isPkpInGroup(1n, 2n, pkpA1))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 2n);
      await expect(registry.isActionInGroup(1n, 2n, cidHash(CID_HELLO)))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 2n);
      const [groups, total] = await registry.listGroups(1n, 0n, 10n);
      expect([groups.map((group) => group.id), total]).to.deep.equal([[1n], 1n]);
    });

    it("stops execution through the deleted group", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkp(2n, pkpA1);
      await registry.connect(ownerA).addAction(2n, CID_HELLO);
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [2] }));
      expect(await registry.canExecute(keySigners[0].address, cidHash(CID_HELLO), pkpA1)).to.equal(true);
      await registry.connect(ownerA).deleteGroup(2n);
      expect(await registry.canExecute(keySigners[0].address, cidHash(CID_HELLO), pkpA1)).to.equal(false);
    });

    it("refuses a group that does not exist", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).deleteGroup(5n))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 5n);
    });

    it("refuses a group deleted already", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).deleteGroup(2n);
      await expect(registry.connect(ownerA).deleteGroup(2n))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 2n);
    });

    it("refuses the wildcard id 0", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).deleteGroup(0n))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 0n);
    });
  });

  describe("actions", function () {
    it("records membership by the CID's hash and carries the string in ActionAdded", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addAction(1n, CID_HELLO))
        .to.emit(registry, "ActionAdded")
        .withArgs(1n, 1n, cidHash(CID_HELLO), CID_HELLO);
      expect(await registry.isActionInGroup(1n, 1n, cidHash(CID_HELLO))).to.equal(true);
      expect((await readAccount(registry, 1n)).groups.get(1)?.actions.get(cidHash(CID_HELLO))).to.equal(
        CID_HELLO,
      );
    });

    it("isActionInGroup is false for a CID never listed", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      expect(await registry.isActionInGroup(1n, 1n, cidHash(CID_HELLO))).to.equal(false);
    });

    it("lets the same CID be listed in groups of unrelated accounts", async function () {
      const { registry, ownerA, ownerB } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addAction(1n, CID_HELLO);
      await expect(registry.connect(ownerB).addAction(1n, CID_HELLO))
        .to.emit(registry, "ActionAdded")
        .withArgs(2n, 1n, cidHash(CID_HELLO), CID_HELLO);
    });

    it("refuses an empty CID", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addAction(1n, "")).to.be.revertedWithCustomError(
        registry,
        "EmptyCid",
      );
    });

    it("refuses a CID longer than MAX_CID_BYTES", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addAction(1n, "b".repeat(129)))
        .to.be.revertedWithCustomError(registry, "CidTooLong")
        .withArgs(129n, 128n);
    });

    it("refuses a CID already in the group", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addAction(1n, CID_HELLO);
      await expect(registry.connect(ownerA).addAction(1n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "ActionAlreadyInGroup")
        .withArgs(1n, CID_HELLO);
    });

    it("refuses a duplicate inside one batch, atomically", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addActions(1n, [CID_HELLO, CID_EMPTY, CID_HELLO]))
        .to.be.revertedWithCustomError(registry, "ActionAlreadyInGroup")
        .withArgs(1n, CID_HELLO);
      expect((await registry.getGroup(1n, 1n)).actionCount).to.equal(0n);
    });

    it("refuses to remove a CID the group does not list", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).removeAction(1n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "ActionNotInGroup")
        .withArgs(1n, CID_HELLO);
    });

    it("reports no CID in a group created without any (the action word's NO_CID_YET mark is not counted)", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      expect((await registry.getGroup(1n, 1n)).actionCount).to.equal(0n);
    });

    it("lists a CID again in a group whose last CID was removed", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addAction(1n, CID_HELLO);
      await registry.connect(ownerA).removeAction(1n, CID_HELLO);
      await registry.connect(ownerA).addAction(1n, CID_EMPTY);
      expect([
        (await registry.getGroup(1n, 1n)).actionCount,
        await registry.isActionInGroup(1n, 1n, cidHash(CID_HELLO)),
        await registry.isActionInGroup(1n, 1n, cidHash(CID_EMPTY)),
      ]).to.deep.equal([1n, false, true]);
    });

    it("refuses to remove a CID from a group deleted while listing it, with UnknownGroup", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addAction(1n, CID_HELLO);
      await registry.connect(ownerA).deleteGroup(1n);
      await expect(registry.connect(ownerA).removeAction(1n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 1n);
    });

    it("refuses to add a CID to a group deleted while listing CIDs, with UnknownGroup", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addAction(1n, CID_HELLO);
      await registry.connect(ownerA).deleteGroup(1n);
      await expect(registry.connect(ownerA).addActions(1n, [CID_EMPTY]))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 1n);
    });

    it("removes a batch down to an empty group and refuses a CID after the last, atomically", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addActions(1n, [CID_HELLO, CID_EMPTY]);
      await expect(registry.connect(ownerA).removeActions(1n, [CID_HELLO, CID_EMPTY, CID_HELLO]))
        .to.be.revertedWithCustomError(registry, "ActionNotInGroup")
        .withArgs(1n, CID_HELLO);
      await registry.connect(ownerA).removeActions(1n, [CID_HELLO, CID_EMPTY]);
      expect((await registry.getGroup(1n, 1n)).actionCount).to.equal(0n);
    });

    it("refuses an action on a group that does not exist", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addAction(3n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 3n);
    });

    it("refuses a batch of more than MAX_BATCH CIDs", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      const cids = Array.from({ length: 65 }, (_, i) => fakeCid(i));
      await expect(registry.connect(ownerA).addActions(1n, cids))
        .to.be.revertedWithCustomError(registry, "TooManyEntries")
        .withArgs(65n, 64n);
    });

    it("refuses a removal batch of more than MAX_BATCH CIDs", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      const cids = Array.from({ length: 65 }, (_, i) => fakeCid(i));
      await expect(registry.connect(ownerA).removeActions(1n, cids))
        .to.be.revertedWithCustomError(registry, "TooManyEntries")
        .withArgs(65n, 64n);
    });

    it("refuses the CID beyond MAX_ACTIONS_PER_GROUP", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      for (let batch = 0; batch < 4; batch++) {
        await registry.connect(ownerA).addActions(
          1n,
          Array.from({ length: 64 }, (_, i) => fakeCid(batch * 64 + i)),
        );
      }
      expect((await registry.getGroup(1n, 1n)).actionCount).to.equal(256n);
      await expect(registry.connect(ownerA).addAction(1n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "TooManyMembers")
        .withArgs(1n, 256n);
    });

    it("a reader lists the CID strings from the events, in the order they were added", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addActions(1n, [CID_HELLO, CID_EMPTY, fakeCid(1)]);
      await registry.connect(ownerA).removeAction(1n, CID_EMPTY);
      const group = (await readAccount(registry, 1n)).groups.get(1)!;
      expect([[...group.actions.values()], (await registry.getGroup(1n, 1n)).actionCount]).to.deep.equal([
        [CID_HELLO, fakeCid(1)],
        2n,
      ]);
    });
  });

  describe("PKP membership", function () {
    it("refuses a PKP of another account", async function () {
      const { registry, ownerA, pkpB1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addPkp(1n, pkpB1))
        .to.be.revertedWithCustomError(registry, "PkpNotInAccount")
        .withArgs(pkpB1, 1n);
    });

    it("refuses a PKP id that was never created", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      const unknown = ethers.id("no such pkp");
      await expect(registry.connect(ownerA).addPkp(1n, unknown))
        .to.be.revertedWithCustomError(registry, "PkpNotInAccount")
        .withArgs(unknown, 1n);
    });

    it("refuses a PKP already in the group", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkp(1n, pkpA1);
      await expect(registry.connect(ownerA).addPkp(1n, pkpA1))
        .to.be.revertedWithCustomError(registry, "PkpAlreadyInGroup")
        .withArgs(1n, pkpA1);
    });

    it("lets one PKP be referenced by several groups", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkp(1n, pkpA1);
      await expect(registry.connect(ownerA).addPkp(2n, pkpA1))
        .to.emit(registry, "PkpAdded")
        .withArgs(1n, 2n, pkpA1);
    });

    it("refuses to remove a PKP the group does not hold", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).removePkp(1n, pkpA1))
        .to.be.revertedWithCustomError(registry, "PkpNotInGroup")
        .withArgs(1n, pkpA1);
    });

    it("refuses to remove another account's PKP with PkpNotInGroup", async function () {
      const { registry, ownerA, pkpB1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).removePkp(1n, pkpB1))
        .to.be.revertedWithCustomError(registry, "PkpNotInGroup")
        .withArgs(1n, pkpB1);
    });

    it("keeps PKPs whose indices share a bitmap word apart", async function () {
      const { registry, ownerA, pkpA1, pkpA2 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkps(1n, [pkpA1, pkpA2]);
      await registry.connect(ownerA).removePkp(1n, pkpA1);
      expect([
        await registry.isPkpInGroup(1n, 1n, pkpA1),
        await registry.isPkpInGroup(1n, 1n, pkpA2),
      ]).to.deep.equal([false, true]);
      await expect(registry.connect(ownerA).addPkp(1n, pkpA2))
        .to.be.revertedWithCustomError(registry, "PkpAlreadyInGroup")
        .withArgs(1n, pkpA2);
    });

    it("counts PKPs added and removed, down to an empty group", async function () {
      const { registry, ownerA, pkpA1, pkpA2 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkps(1n, [pkpA1, pkpA2]);
      const counts = [await pkpCountOf(registry)];
      await registry.connect(ownerA).removePkp(1n, pkpA2);
      counts.push(await pkpCountOf(registry));
      await registry.connect(ownerA).removePkp(1n, pkpA1);
      counts.push(await pkpCountOf(registry));
      await registry.connect(ownerA).addPkp(1n, pkpA2);
      counts.push(await pkpCountOf(registry));
      expect(counts).to.deep.equal([2n, 1n, 0n, 1n]);
    });

    it("adds and removes PKPs on both sides of the first bitmap word, keeping one count", async function () {
      const { registry, ownerA, pkpA1, pkpA240, pkpA241, pkpA242 } =
        await loadFixture(pastFirstBitmapWordFixture);
      await registry.connect(ownerA).addPkps(1n, [pkpA1, pkpA240, pkpA241, pkpA242]);
      await registry.connect(ownerA).removePkps(1n, [pkpA241, pkpA1]);
      expect([
        await pkpCountOf(registry),
        await registry.isPkpInGroup(1n, 1n, pkpA1),
        await registry.isPkpInGroup(1n, 1n, pkpA240),
        await registry.isPkpInGroup(1n, 1n, pkpA241),
        await registry.isPkpInGroup(1n, 1n, pkpA242),
      ]).to.deep.equal([2n, false, true, false, true]);
    });

    it("refuses a PKP past the first bitmap word that the group already holds", async function () {
      const { registry, ownerA, pkpA241 } = await loadFixture(pastFirstBitmapWordFixture);
      await registry.connect(ownerA).addPkp(1n, pkpA241);
      await expect(registry.connect(ownerA).addPkp(1n, pkpA241))
        .to.be.revertedWithCustomError(registry, "PkpAlreadyInGroup")
        .withArgs(1n, pkpA241);
    });

    it("refuses to remove a PKP past the first bitmap word that the group does not hold", async function () {
      const { registry, ownerA, pkpA241, pkpA242 } = await loadFixture(pastFirstBitmapWordFixture);
      await registry.connect(ownerA).addPkp(1n, pkpA242);
      await expect(registry.connect(ownerA).removePkp(1n, pkpA241))
        .to.be.revertedWithCustomError(registry, "PkpNotInGroup")
        .withArgs(1n, pkpA241);
    });

    it("lets canExecute find a PKP past the first bitmap word", async function () {
      const { registry, ownerA, pkpA241 } = await loadFixture(pastFirstBitmapWordFixture);
      await registry.connect(ownerA).addPkp(1n, pkpA241);
      await registry.connect(ownerA).addAction(1n, CID_HELLO);
      expect(await registry.canExecute(await ownerA.getAddress(), cidHash(CID_HELLO), pkpA241)).to.equal(
        true,
      );
    });

    it("refuses to remove a PKP from a group deleted while holding it, with UnknownGroup", async function () {
      const { registry, ownerA, pkpA1, pkpA2 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkps(1n, [pkpA1, pkpA2]);
      await registry.connect(ownerA).deleteGroup(1n);
      await expect(registry.connect(ownerA).removePkp(1n, pkpA1))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 1n);
    });

    it("refuses to remove a PKP from a group deleted empty, with UnknownGroup", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).deleteGroup(1n);
      await expect(registry.connect(ownerA).removePkp(1n, pkpA1))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 1n);
    });

    it("refuses to remove a PKP from a group that never existed, with UnknownGroup", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).removePkp(9n, pkpA1))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 9n);
    });

    it("refuses to remove another account's PKP from a deleted group with UnknownGroup", async function () {
      const { registry, ownerA, pkpA1, pkpB1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkp(1n, pkpA1);
      await registry.connect(ownerA).deleteGroup(1n);
      await expect(registry.connect(ownerA).removePkp(1n, pkpB1))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 1n);
    });

    it("refuses an empty removal batch on a group that does not exist", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).removePkps(9n, []))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 9n);
    });

    it("refuses a batch of more than MAX_BATCH PKPs", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addPkps(1n, new Array(65).fill(pkpA1)))
        .to.be.revertedWithCustomError(registry, "TooManyEntries")
        .withArgs(65n, 64n);
    });

    it("refuses a removal batch of more than MAX_BATCH PKPs", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).removePkps(1n, new Array(65).fill(pkpA1)))
        .to.be.revertedWithCustomError(registry, "TooManyEntries")
        .withArgs(65n, 64n);
    });

    it("refuses the PKP beyond MAX_PKPS_PER_GROUP", async function () {
      const { registry, ownerA, deployment } = await loadFixture(twoAccountsFixture);
      const chainId = BigInt(deployment.chainId);
      for (let i = 0; i < 255; i++) await registry.connect(ownerA).createPkp("", "");
      // PKPs 1..257 of account A exist now (2 from the fixture).
      const ids = Array.from({ length: 257 }, (_, i) =>
        expectedPkpId(chainId, deployment.registry, 1n, BigInt(i + 1)),
      );
      for (let start = 0; start < 256; start += 64)
        await registry.connect(ownerA).addPkps(1n, ids.slice(start, start + 64));
      await expect(registry.connect(ownerA).addPkp(1n, ids[256]))
        .to.be.revertedWithCustomError(registry, "TooManyMembers")
        .withArgs(1n, 256n);
    });

    it("a reader lists the PKP members from the events, and isPkpInGroup agrees", async function () {
      const { registry, ownerA, pkpA1, pkpA2 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkps(1n, [pkpA2, pkpA1]);
      await registry.connect(ownerA).removePkp(1n, pkpA2);
      const group = (await readAccount(registry, 1n)).groups.get(1)!;
      expect([
        [...group.pkps],
        await registry.isPkpInGroup(1n, 1n, pkpA1),
        await registry.isPkpInGroup(1n, 1n, pkpA2),
      ]).to.deep.equal([[pkpA1.toLowerCase()], true, false]);
    });

    it("isPkpInGroup is false for another account's PKP", async function () {
      const { registry, pkpB1 } = await loadFixture(twoAccountsFixture);
      expect(await registry.isPkpInGroup(1n, 1n, pkpB1)).to.equal(false);
    });
  });

  describe("group views", function () {
    it("getGroup returns the header and member counts", async function () {
      const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).addPkp(1n, pkpA1);
      const group = await registry.getGroup(1n, 1n);
      expect([group.id, group.accountId, group.pkpCount, group.actionCount]).to.deep.equal([1n, 1n, 1n, 0n]);
    });

    it("a reader gets the group's name and description from GroupCreated", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      const group = (await readAccount(registry, 1n)).groups.get(1)!;
      expect([group.name, group.description]).to.deep.equal(["target", "the group under test"]);
    });

    it("getGroup of another account's id reverts UnknownGroup", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      await expect(registry.getGroup(2n, 2n))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(2n, 2n);
    });

    it("listGroups pages through live groups", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      const [items, total] = await registry.listGroups(1n, 1n, 1n);
      expect([items.map((group) => group.id), total]).to.deep.equal([[2n], 2n]);
    });

    it("listGroups refuses a page larger than MAX_PAGE_SIZE", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      await expect(registry.listGroups(1n, 0n, 101n))
        .to.be.revertedWithCustomError(registry, "PageTooLarge")
        .withArgs(101n, 100n);
    });

    it("lists of an account that does not exist are empty", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      const [groups, groupTotal] = await registry.listGroups(9n, 0n, 10n);
      const [pkps, pkpTotal] = await registry.listPkps(9n, 0n, 10n);
      expect([groups.length, groupTotal, pkps.length, pkpTotal]).to.deep.equal([0, 0n, 0, 0n]);
    });
  });

  describe("canExecute and canExecuteAction", function () {
    async function listed() {
      const ctx = await loadFixture(twoAccountsFixture);
      await ctx.registry.connect(ctx.ownerA).addPkp(1n, ctx.pkpA1);
      await ctx.registry.connect(ctx.ownerA).addAction(1n, CID_HELLO);
      await ctx.registry.connect(ctx.ownerA).addPkp(2n, ctx.pkpA2);
      await ctx.registry.connect(ctx.ownerA).addAction(2n, CID_EMPTY);
      return ctx;
    }

    it("needs one group listing both the CID and the PKP", async function () {
      const { registry, ownerA, keySigners, pkpA2 } = await listed();
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [1, 2] }));
      // CID_HELLO is in group 1 and pkpA2 in group 2, but no single group lists both.
      expect(await registry.canExecute(keySigners[0].address, cidHash(CID_HELLO), pkpA2)).to.equal(false);
    });

    it("is false for a PKP of another account, even one listed nowhere", async function () {
      const { registry, ownerA, keySigners, pkpB1 } = await listed();
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [0] }));
      expect(await registry.canExecute(keySigners[0].address, cidHash(CID_HELLO), pkpB1)).to.equal(false);
    });

    it("is false once the PKP is removed from the group", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await listed();
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [1] }));
      await registry.connect(ownerA).removePkp(1n, pkpA1);
      expect(await registry.canExecute(keySigners[0].address, cidHash(CID_HELLO), pkpA1)).to.equal(false);
    });

    it("is false once the CID is removed from the group", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await listed();
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [0] }));
      await registry.connect(ownerA).removeAction(1n, CID_HELLO);
      expect(await registry.canExecute(keySigners[0].address, cidHash(CID_HELLO), pkpA1)).to.equal(false);
    });

    it("is false for an address that is not a key", async function () {
      const { registry, outsider, pkpA1 } = await listed();
      expect(await registry.canExecute(outsider.address, cidHash(CID_HELLO), pkpA1)).to.equal(false);
    });

    it("a wildcard key reaches groups created after the grant", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await listed();
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [0] }));
      await registry.connect(ownerA).createGroup("later", "", [pkpA1], [CID_EMPTY]);
      expect(await registry.canExecute(keySigners[0].address, cidHash(CID_EMPTY), pkpA1)).to.equal(true);
    });

    it("canExecuteAction needs execute on a group listing the CID", async function () {
      const { registry, ownerA, keySigners } = await listed();
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [2], ManageActions: [1] }));
      expect(await registry.canExecuteAction(keySigners[0].address, cidHash(CID_EMPTY))).to.equal(true);
      expect(await registry.canExecuteAction(keySigners[0].address, cidHash(CID_HELLO))).to.equal(false);
    });

    it("canExecuteAction answers a wildcard key and the owner", async function () {
      const { registry, ownerA, keySigners } = await listed();
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [0] }));
      expect(await registry.canExecuteAction(keySigners[0].address, cidHash(CID_HELLO))).to.equal(true);
      expect(await registry.canExecuteAction(ownerA.address, cidHash(CID_EMPTY))).to.equal(true);
      expect(await registry.canExecuteAction(ownerA.address, cidHash("QmUnlisted"))).to.equal(false);
    });
  });

  describe("group bound", function () {
    it("refuses a live group beyond MAX_GROUPS_PER_ACCOUNT, and accepts one after a deletion", async function () {
      this.timeout(300_000);
      const { registry, ownerB } = await loadFixture(twoAccountsFixture);
      const max = Number(await registry.MAX_GROUPS_PER_ACCOUNT());
      // Account B has one group; fill it up to the bound.
      for (let i = 1; i < max; i++) await registry.connect(ownerB).createGroup("", "", [], []);
      await expect(registry.connect(ownerB).createGroup("", "", [], []))
        .to.be.revertedWithCustomError(registry, "TooManyGroups")
        .withArgs(2n, BigInt(max));
      await registry.connect(ownerB).deleteGroup(1n);
      await expect(registry.connect(ownerB).createGroup("", "", [], []))
        .to.emit(registry, "GroupCreated")
        .withArgs(2n, BigInt(max + 1), "", "");
    });
  });
  describe("bounded gas", function () {
    it("deleting a full group (256 PKPs and 256 CIDs) stays under 5M gas", async function () {
      this.timeout(300_000);
      const { registry, ownerA, deployment } = await loadFixture(twoAccountsFixture);
      const chainId = BigInt(deployment.chainId);
      for (let i = 0; i < 254; i++) await registry.connect(ownerA).createPkp("", "");
      const ids = Array.from({ length: 256 }, (_, i) =>
        expectedPkpId(chainId, deployment.registry, 1n, BigInt(i + 1)),
      );
      for (let start = 0; start < 256; start += 64) {
        await registry.connect(ownerA).addPkps(1n, ids.slice(start, start + 64));
        await registry.connect(ownerA).addActions(
          1n,
          Array.from({ length: 64 }, (_, i) => fakeCid(start + i)),
        );
      }
      const receipt = await (await registry.connect(ownerA).deleteGroup(1n)).wait();
      expect(receipt!.gasUsed).to.be.lessThan(5_000_000n);
    });

    it("canExecute for a wildcard key scanning 1024 groups stays under 8M gas", async function () {
      this.timeout(300_000);
      const { registry, ownerB, keySigners, pkpB1 } = await loadFixture(twoAccountsFixture);
      for (let i = 1; i < 1024; i++) await registry.connect(ownerB).createGroup("", "", [], []);
      await grantKey(registry, ownerB, keySigners[0], scopes({ Execute: [0] }));
      // No group lists the CID: the scan visits every group.
      const gas = await registry.canExecute.estimateGas(keySigners[0].address, cidHash(CID_HELLO), pkpB1);
      expect(gas).to.be.lessThan(8_000_000n);
    });
  });
});
