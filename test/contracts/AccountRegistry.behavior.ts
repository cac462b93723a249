/**
 * Shared behaviours of the SPEC 5.4 matrix, in the style of OpenZeppelin's AccessControl.behavior.js: one
 * function per kind of operation, instantiated for every operation of that kind, one behaviour per `it`.
 */
import { expect } from "chai";
import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import type { ContractTransactionResponse } from "ethers";
import type { AccountRegistry } from "../../typechain-types";
import {
  pinnedNow,
  ALL_SCOPES,
  PER_GROUP,
  Scope,
  type ScopeName,
  type TwoAccounts,
  allScopesExcept,
  grantKey,
  scopes,
  twoAccountsFixture,
} from "./fixtures";

/** An operation that the owner, or a key holding `scope`, may perform. */
export interface ScopedOperation {
  name: string;
  scope: ScopeName;
  event: string;
  /** Owner-side state the operation needs to succeed on `groupId` (e.g. a CID to remove). */
  prepare?: (ctx: TwoAccounts, groupId: bigint) => Promise<void>;
  send: (
    registry: AccountRegistry,
    ctx: TwoAccounts,
    groupId: bigint,
  ) => Promise<ContractTransactionResponse>;
  /** Arguments of `event` when performed in `accountId` on `groupId`. */
  eventArgs: (ctx: TwoAccounts, accountId: bigint, groupId: bigint) => Promise<unknown[]>;
}

/** An operation only the owner may perform. */
export interface OwnerOnlyOperation {
  name: string;
  event: string;
  prepare?: (ctx: TwoAccounts) => Promise<void>;
  send: (registry: AccountRegistry, ctx: TwoAccounts) => Promise<ContractTransactionResponse>;
}

export function shouldBehaveLikeScopedOperation(op: ScopedOperation): void {
  // Per-group scopes are checked on the group concerned; account-wide ones report group 0.
  const perGroup = PER_GROUP.includes(op.scope);
  const exactGrant = perGroup
    ? (groupId: bigint) => scopes({ [op.scope]: [Number(groupId)] })
    : () => scopes({ [op.scope]: true });

  async function prepared(): Promise<TwoAccounts> {
    const ctx = await loadFixture(twoAccountsFixture);
    await op.prepare?.(ctx, ctx.target);
    return ctx;
  }

  async function expectSuccess(
    ctx: TwoAccounts,
    registry: AccountRegistry,
    accountId = ctx.accountA,
  ): Promise<void> {
    const args = await op.eventArgs(ctx, accountId, ctx.target);
    await expect(op.send(registry, ctx, ctx.target))
      .to.emit(ctx.registry, op.event)
      .withArgs(...args);
  }

  describe(`${op.name} (${op.scope})`, function () {
    it("is allowed to the owner", async function () {
      const ctx = await prepared();
      await expectSuccess(ctx, ctx.registry.connect(ctx.ownerA));
    });

    it(`is allowed to a key holding exactly ${op.scope}${perGroup ? " on the group" : ""}`, async function () {
      const ctx = await prepared();
      const [key] = ctx.keySigners;
      await grantKey(ctx.registry, ctx.ownerA, key, exactGrant(ctx.target));
      await expectSuccess(ctx, ctx.registry.connect(key));
    });

    if (perGroup) {
      it(`is allowed to a key holding ${op.scope} through the wildcard 0`, async function () {
        const ctx = await prepared();
        const [key] = ctx.keySigners;
        await grantKey(ctx.registry, ctx.ownerA, key, scopes({ [op.scope]: [0] }));
        await expectSuccess(ctx, ctx.registry.connect(key));
      });

      it(`is refused to a key holding ${op.scope} on another group only`, async function () {
        const ctx = await prepared();
        const [key] = ctx.keySigners;
        await grantKey(ctx.registry, ctx.ownerA, key, scopes({ [op.scope]: [Number(ctx.other)] }));
        await expect(op.send(ctx.registry.connect(key), ctx, ctx.target))
          .to.be.revertedWithCustomError(ctx.registry, "MissingScope")
          .withArgs(key.address, ctx.accountA, Scope[op.scope], ctx.target);
      });
    }

    it(`is refused to a key holding every scope but ${op.scope}`, async function () {
      const ctx = await prepared();
      const [key] = ctx.keySigners;
      await grantKey(ctx.registry, ctx.ownerA, key, allScopesExcept(op.scope));
      await expect(op.send(ctx.registry.connect(key), ctx, ctx.target))
        .to.be.revertedWithCustomError(ctx.registry, "MissingScope")
        .withArgs(key.address, ctx.accountA, Scope[op.scope], perGroup ? ctx.target : 0n);
    });

    it("is refused to an address that is neither an owner nor a key", async function () {
      const ctx = await prepared();
      await expect(op.send(ctx.registry.connect(ctx.outsider), ctx, ctx.target))
        .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
        .withArgs(ctx.outsider.address);
    });

    it("is refused to the account's master key, which has no power on chain", async function () {
      const ctx = await prepared();
      await expect(op.send(ctx.registry.connect(ctx.masterKeyA), ctx, ctx.target))
        .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
        .withArgs(ctx.masterKeyA.address);
    });

    it(`is refused to a key removed after it was granted ${op.scope}`, async function () {
      const ctx = await prepared();
      const [key] = ctx.keySigners;
      await grantKey(ctx.registry, ctx.ownerA, key, ALL_SCOPES);
      await ctx.registry.connect(ctx.ownerA).removeKey(key.address);
      await expect(op.send(ctx.registry.connect(key), ctx, ctx.target))
        .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
        .withArgs(key.address);
    });

    it(`is refused to a key holding ${op.scope} once it has expired`, async function () {
      const ctx = await prepared();
      const [key] = ctx.keySigners;
      const expiration = (await pinnedNow()) + 3600n;
      await grantKey(ctx.registry, ctx.ownerA, key, ALL_SCOPES, expiration);
      await time.increaseTo(expiration);
      await expect(op.send(ctx.registry.connect(key), ctx, ctx.target))
        .to.be.revertedWithCustomError(ctx.registry, "KeyExpired")
        .withArgs(key.address, expiration);
    });

    if (perGroup) {
      it("never reaches another account's group, even through a wildcard", async function () {
        const ctx = await prepared();
        const [key] = ctx.keySigners;
        // Account B has no group 2: its key, holding everything, addresses its own account's group 2 only,
        // and a per-group scope (the wildcard too) counts only for a live group of the key's account.
        await grantKey(ctx.registry, ctx.ownerB, key, ALL_SCOPES);
        await expect(op.send(ctx.registry.connect(key), ctx, ctx.other))
          .to.be.revertedWithCustomError(ctx.registry, "MissingScope")
          .withArgs(key.address, ctx.accountB, Scope[op.scope], ctx.other);
      });
    } else if (op.scope === "DeleteGroup") {
      it("never reaches another account's group", async function () {
        const ctx = await prepared();
        const [key] = ctx.keySigners;
        // Account B has no group 2: its key, holding everything, addresses its own account's group 2 only.
        await grantKey(ctx.registry, ctx.ownerB, key, ALL_SCOPES);
        await expect(op.send(ctx.registry.connect(key), ctx, ctx.other))
          .to.be.revertedWithCustomError(ctx.registry, "UnknownGroup")
          .withArgs(ctx.accountB, ctx.other);
      });
    } else {
      it("by a key of another account acts on that key's own account", async function () {
        const ctx = await prepared();
        const [key] = ctx.keySigners;
        await grantKey(ctx.registry, ctx.ownerB, key, ALL_SCOPES);
        await expectSuccess(ctx, ctx.registry.connect(key), ctx.accountB);
      });
    }
  });
}

export function shouldBehaveLikeOwnerOnlyOperation(op: OwnerOnlyOperation): void {
  async function prepared(): Promise<TwoAccounts> {
    const ctx = await loadFixture(twoAccountsFixture);
    await op.prepare?.(ctx);
    return ctx;
  }

  describe(`${op.name} (owner only)`, function () {
    it("is allowed to the owner", async function () {
      const ctx = await prepared();
      await expect(op.send(ctx.registry.connect(ctx.ownerA), ctx)).to.emit(ctx.registry, op.event);
    });

    it("is refused to a key holding all seven scopes", async function () {
      const ctx = await prepared();
      const key = ctx.keySigners[1];
      await grantKey(ctx.registry, ctx.ownerA, key, ALL_SCOPES);
      await expect(op.send(ctx.registry.connect(key), ctx))
        .to.be.revertedWithCustomError(ctx.registry, "NotOwner")
        .withArgs(key.address, ctx.accountA);
    });

    it("is refused to an address that is neither an owner nor a key", async function () {
      const ctx = await prepared();
      await expect(op.send(ctx.registry.connect(ctx.outsider), ctx))
        .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
        .withArgs(ctx.outsider.address);
    });

    it("is refused to the account's master key", async function () {
      const ctx = await prepared();
      await expect(op.send(ctx.registry.connect(ctx.masterKeyA), ctx))
        .to.be.revertedWithCustomError(ctx.registry, "NoAccount")
        .withArgs(ctx.masterKeyA.address);
    });
  });
}
