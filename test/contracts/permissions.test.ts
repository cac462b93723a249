/**
 * The docs/background.md §5.4 matrix, operation by operation (behaviours in AccountRegistry.behavior.ts).
 */
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import {
  type OwnerOnlyOperation,
  type ScopedOperation,
  shouldBehaveLikeOwnerOnlyOperation,
  shouldBehaveLikeScopedOperation,
} from "./AccountRegistry.behavior";
import {
  ALL_SCOPES,
  CID_EMPTY,
  CID_HELLO,
  type TwoAccounts,
  cidHash,
  grantKey,
  nextPkpId,
  scopes,
  twoAccountsFixture,
} from "./fixtures";

const ownerOf = (ctx: TwoAccounts, accountId: bigint) =>
  accountId === ctx.accountA ? ctx.ownerA : ctx.ownerB;

/** Owner-side preparation: list CID_HELLO and CID_EMPTY in the group. */
const withActions = async (ctx: TwoAccounts, groupId: bigint) => {
  await ctx.registry.connect(ctx.ownerA).addActions(groupId, [CID_HELLO, CID_EMPTY]);
};
/** Owner-side preparation: add both PKPs of A to the group. */
const withPkps = async (ctx: TwoAccounts, groupId: bigint) => {
  await ctx.registry.connect(ctx.ownerA).addPkps(groupId, [ctx.pkpA1, ctx.pkpA2]);
};

const scopedOperations: ScopedOperation[] = [
  {
    name: "createPkp",
    scope: "CreatePkp",
    event: "PkpCreated",
    send: (registry) => registry.createPkp("new pkp", "made in a test"),
    eventArgs: async (ctx, accountId) => [
      accountId,
      await nextPkpId(ctx, accountId),
      "new pkp",
      "made in a test",
    ],
  },
  {
    name: "createGroup",
    scope: "CreateGroup",
    event: "GroupCreated",
    send: (registry) => registry.createGroup("new group", "made in a test", [], []),
    eventArgs: async (ctx, accountId) => {
      const account = await ctx.registry.getAccount(accountId);
      return [accountId, account.groupCount + 1n, "new group", "made in a test"];
    },
  },
  {
    name: "deleteGroup",
    scope: "DeleteGroup",
    event: "GroupDeleted",
    prepare: withActions,
    send: (registry, _ctx, groupId) => registry.deleteGroup(groupId),
    eventArgs: async (_ctx, accountId, groupId) => [accountId, groupId],
  },
  {
    name: "addAction",
    scope: "ManageActions",
    event: "ActionAdded",
    send: (registry, _ctx, groupId) => registry.addAction(groupId, CID_HELLO),
    eventArgs: async (_ctx, accountId, groupId) => [accountId, groupId, cidHash(CID_HELLO), CID_HELLO],
  },
  {
    name: "removeAction",
    scope: "ManageActions",
    event: "ActionRemoved",
    prepare: withActions,
    send: (registry, _ctx, groupId) => registry.removeAction(groupId, CID_HELLO),
    eventArgs: async (_ctx, accountId, groupId) => [accountId, groupId, cidHash(CID_HELLO)],
  },
  {
    name: "addActions",
    scope: "ManageActions",
    event: "ActionAdded",
    send: (registry, _ctx, groupId) => registry.addActions(groupId, [CID_EMPTY, CID_HELLO]),
    eventArgs: async (_ctx, accountId, groupId) => [accountId, groupId, cidHash(CID_HELLO), CID_HELLO],
  },
  {
    name: "removeActions",
    scope: "ManageActions",
    event: "ActionRemoved",
    prepare: withActions,
    send: (registry, _ctx, groupId) => registry.removeActions(groupId, [CID_EMPTY, CID_HELLO]),
    eventArgs: async (_ctx, accountId, groupId) => [accountId, groupId, cidHash(CID_HELLO)],
  },
  {
    name: "setGroupPolicy",
    scope: "ManageActions",
    event: "GroupPolicySet",
    send: (registry, _ctx, groupId) => registry.setGroupPolicy(groupId, CID_HELLO),
    eventArgs: async (_ctx, accountId, groupId) => [accountId, groupId, cidHash(CID_HELLO), CID_HELLO],
  },
  {
    name: "addPkp",
    scope: "AddPkp",
    event: "PkpAdded",
    send: (registry, ctx, groupId) => registry.addPkp(groupId, ctx.pkpA1),
    eventArgs: async (ctx, accountId, groupId) => [accountId, groupId, ctx.pkpA1],
  },
  {
    name: "removePkp",
    scope: "RemovePkp",
    event: "PkpRemoved",
    prepare: withPkps,
    send: (registry, ctx, groupId) => registry.removePkp(groupId, ctx.pkpA1),
    eventArgs: async (ctx, accountId, groupId) => [accountId, groupId, ctx.pkpA1],
  },
  {
    name: "addPkps",
    scope: "AddPkp",
    event: "PkpAdded",
    send: (registry, ctx, groupId) => registry.addPkps(groupId, [ctx.pkpA2, ctx.pkpA1]),
    eventArgs: async (ctx, accountId, groupId) => [accountId, groupId, ctx.pkpA1],
  },
  {
    name: "removePkps",
    scope: "RemovePkp",
    event: "PkpRemoved",
    prepare: withPkps,
    send: (registry, ctx, groupId) => registry.removePkps(groupId, [ctx.pkpA2, ctx.pkpA1]),
    eventArgs: async (ctx, accountId, groupId) => [accountId, groupId, ctx.pkpA1],
  },
];

/** The usage key that owner-only operations act on. */
const subjectKey = (ctx: TwoAccounts) => ctx.keySigners[2];
const withSubjectKey = async (ctx: TwoAccounts) => {
  await grantKey(ctx.registry, ctx.ownerA, subjectKey(ctx), scopes({ Execute: [1] }));
};

const ownerOnlyOperations: OwnerOnlyOperation[] = [
  {
    name: "addKey",
    event: "KeyAdded",
    send: (registry, ctx) =>
      registry.addKey(subjectKey(ctx).address, ethers.ZeroHash, "k", "", 0, ALL_SCOPES),
  },
  {
    name: "updateKey",
    event: "KeyUpdated",
    prepare: withSubjectKey,
    send: (registry, ctx) => registry.updateKey(subjectKey(ctx).address, "k2", "", 0, ALL_SCOPES),
  },
  {
    name: "updateKeyMetadata",
    event: "KeyMetadataUpdated",
    prepare: withSubjectKey,
    send: (registry, ctx) => registry.updateKeyMetadata(subjectKey(ctx).address, "k2", "renamed"),
  },
  {
    name: "removeKey",
    event: "KeyRemoved",
    prepare: withSubjectKey,
    send: (registry, ctx) => registry.removeKey(subjectKey(ctx).address),
  },
  {
    name: "transferOwnership",
    event: "OwnershipTransferStarted",
    send: (registry, ctx) => registry.transferOwnership(ctx.keySigners[3].address),
  },
  {
    name: "cancelOwnershipTransfer",
    event: "OwnershipTransferCanceled",
    prepare: async (ctx) => {
      await ctx.registry.connect(ctx.ownerA).transferOwnership(ctx.keySigners[3].address);
    },
    send: (registry) => registry.cancelOwnershipTransfer(),
  },
];

describe("AccountRegistry: the docs/background.md §5.4 permission matrix", function () {
  for (const op of scopedOperations) shouldBehaveLikeScopedOperation(op);
  for (const op of ownerOnlyOperations) shouldBehaveLikeOwnerOnlyOperation(op);

  describe("invoke action with PKP (execute)", function () {
    async function executable(): Promise<TwoAccounts> {
      const ctx = await loadFixture(twoAccountsFixture);
      await withActions(ctx, ctx.target);
      await withPkps(ctx, ctx.target);
      await withActions(ctx, ctx.other);
      return ctx;
    }

    it("is allowed to the owner in every group of its account", async function () {
      const ctx = await executable();
      expect(await ctx.registry.canExecute(ctx.ownerA.address, cidHash(CID_HELLO), ctx.pkpA1)).to.equal(true);
    });

    it("is allowed to a key holding exactly execute on a group listing the CID and the PKP", async function () {
      const ctx = await executable();
      const [key] = ctx.keySigners;
      await grantKey(ctx.registry, ctx.ownerA, key, scopes({ Execute: [Number(ctx.target)] }));
      expect(await ctx.registry.canExecute(key.address, cidHash(CID_HELLO), ctx.pkpA1)).to.equal(true);
    });

    it("is allowed to a key holding execute through the wildcard 0", async function () {
      const ctx = await executable();
      const [key] = ctx.keySigners;
      await grantKey(ctx.registry, ctx.ownerA, key, scopes({ Execute: [0] }));
      expect(await ctx.registry.canExecute(key.address, cidHash(CID_HELLO), ctx.pkpA1)).to.equal(true);
    });

    it("is refused to a key holding execute on another group only", async function () {
      const ctx = await executable();
      const [key] = ctx.keySigners;
      await grantKey(ctx.registry, ctx.ownerA, key, scopes({ Execute: [Number(ctx.other)] }));
      // The other group lists the CID but not the PKP.
      expect(await ctx.registry.canExecute(key.address, cidHash(CID_HELLO), ctx.pkpA1)).to.equal(false);
    });

    it("is refused to a key holding every scope but execute", async function () {
      const ctx = await executable();
      const [key] = ctx.keySigners;
      await grantKey(
        ctx.registry,
        ctx.ownerA,
        key,
        scopes({
          CreatePkp: true,
          CreateGroup: true,
          DeleteGroup: true,
          ManageActions: [0],
          AddPkp: [0],
          RemovePkp: [0],
        }),
      );
      expect(await ctx.registry.canExecute(key.address, cidHash(CID_HELLO), ctx.pkpA1)).to.equal(false);
    });

    it("is refused to a wildcard key of another account, even for the same CID", async function () {
      const ctx = await executable();
      const [key] = ctx.keySigners;
      await grantKey(ctx.registry, ctx.ownerB, key, scopes({ Execute: [0] }));
      await ctx.registry.connect(ctx.ownerB).addActions(ctx.groupB, [CID_HELLO]);
      expect(await ctx.registry.canExecute(key.address, cidHash(CID_HELLO), ctx.pkpA1)).to.equal(false);
    });

    it("is refused to the owner of another account", async function () {
      const ctx = await executable();
      expect(
        await ctx.registry.canExecute(ownerOf(ctx, ctx.accountB).address, cidHash(CID_HELLO), ctx.pkpA1),
      ).to.equal(false);
    });
  });
});
