/**
 * A group's signing policy on chain: `setGroupPolicy` stores the hash of a policy document's CID (the string
 * is in `GroupPolicySet`), `groupPolicy` answers it. Who may write it is the ManageActions row of the
 * permission matrix (permissions.test.ts); path A is in forwarder.test.ts. This file holds what is
 * particular to policies: validation, clearing, replacement and what a deleted group answers.
 */
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import { CID_EMPTY, CID_HELLO, Scope, cidHash, grantKey, scopes, twoAccountsFixture } from "./fixtures";

describe("AccountRegistry: group signing policies", function () {
  describe("setGroupPolicy", function () {
    it("stores the hash of the CID, the same hash addAction uses", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      await registry.connect(ownerA).addAction(1n, CID_HELLO);
      expect(await registry.groupPolicy(1n, 1n)).to.equal(cidHash(CID_HELLO));
      expect(await registry.isActionInGroup(1n, 1n, await registry.groupPolicy(1n, 1n))).to.equal(true);
    });

    it("replaces a policy the group already has", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_EMPTY);
      expect(await registry.groupPolicy(1n, 1n)).to.equal(cidHash(CID_EMPTY));
    });

    it("accepts the policy the group already has, emitting it again", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      await expect(registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO))
        .to.emit(registry, "GroupPolicySet")
        .withArgs(1n, 1n, cidHash(CID_HELLO), CID_HELLO);
    });

    it("sets the policy of one group only", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      expect(await registry.groupPolicy(1n, 2n)).to.equal(ethers.ZeroHash);
    });

    it("sets the policy in the caller's account only (account B's group 1 keeps none)", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      expect(await registry.groupPolicy(2n, 1n)).to.equal(ethers.ZeroHash);
    });

    it("accepts a CID of exactly MAX_CID_BYTES", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      const cid = "b".repeat(128);
      await registry.connect(ownerA).setGroupPolicy(1n, cid);
      expect(await registry.groupPolicy(1n, 1n)).to.equal(cidHash(cid));
    });

    it("refuses a CID longer than MAX_CID_BYTES with CidTooLong, like addAction", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).setGroupPolicy(1n, "b".repeat(129)))
        .to.be.revertedWithCustomError(registry, "CidTooLong")
        .withArgs(129n, 128n);
    });

    it("refuses a group that does not exist", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).setGroupPolicy(9n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 9n);
    });

    it("refuses the wildcard id 0", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).setGroupPolicy(0n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 0n);
    });

    it("refuses the owner on a deleted group", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).deleteGroup(2n);
      await expect(registry.connect(ownerA).setGroupPolicy(2n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 2n);
    });

    it("refuses a wildcard key on a deleted group with MissingScope", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [0] }));
      await registry.connect(ownerA).deleteGroup(2n);
      await expect(registry.connect(key).setGroupPolicy(2n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 1n, Scope.ManageActions, 2n);
    });
  });

  describe("clearing", function () {
    it("an empty CID clears the policy", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      await registry.connect(ownerA).setGroupPolicy(1n, "");
      expect(await registry.groupPolicy(1n, 1n)).to.equal(ethers.ZeroHash);
    });

    it("a clear emits GroupPolicySet with a zero hash and an empty CID", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      await expect(registry.connect(ownerA).setGroupPolicy(1n, ""))
        .to.emit(registry, "GroupPolicySet")
        .withArgs(1n, 1n, ethers.ZeroHash, "");
    });

    it("a key holding manageActions on the group may clear it", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [1] }));
      await registry.connect(key).setGroupPolicy(1n, "");
      expect(await registry.groupPolicy(1n, 1n)).to.equal(ethers.ZeroHash);
    });

    it("a key scoped to another group may not clear it", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await registry.connect(ownerA).setGroupPolicy(1n, CID_HELLO);
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [2] }));
      await expect(registry.connect(key).setGroupPolicy(1n, ""))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 1n, Scope.ManageActions, 1n);
    });
  });

  describe("groupPolicy", function () {
    it("is zero for a group that never had a policy", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      expect(await registry.groupPolicy(1n, 1n)).to.equal(ethers.ZeroHash);
    });

    it("is zero for a group that does not exist", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      expect(await registry.groupPolicy(1n, 9n)).to.equal(ethers.ZeroHash);
    });

    it("is zero once the group is deleted: the policy ends with its group", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(2n, CID_HELLO);
      await registry.connect(ownerA).deleteGroup(2n);
      expect(await registry.groupPolicy(1n, 2n)).to.equal(ethers.ZeroHash);
    });

    it("a group created after a deletion takes a new id and starts without a policy", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).setGroupPolicy(2n, CID_HELLO);
      await registry.connect(ownerA).deleteGroup(2n);
      await registry.connect(ownerA).createGroup("after", "", [], []);
      const [groups] = await registry.listGroups(1n, 0n, 10n);
      const created = groups[groups.length - 1].id;
      expect([created, await registry.groupPolicy(1n, created)]).to.deep.equal([3n, ethers.ZeroHash]);
    });
  });
});
