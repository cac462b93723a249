/**
 * rotateKey: a successor with exactly the old key's scopes and the old key's end, in one call. Who may call
 * it is in permissions.test.ts (owner only); this file holds what it does and every refusal.
 */
import { expect } from "chai";
import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import {
  Scope,
  type KeyScopes,
  type TwoAccounts,
  grantKey,
  pinnedNow,
  scopes,
  twoAccountsFixture,
} from "./fixtures";

const DAY = 24n * 3600n;
const GRANT: KeyScopes = scopes({ Execute: [1], ManageActions: [0], CreatePkp: true });
const NEW_HASH = ethers.id("new key string");

/** Account A with `old` holding GRANT (expiring at `expiration`, 0 = never) and a fresh `fresh` address. */
async function withOldKey(expiration = 0n): Promise<TwoAccounts & { old: string; fresh: string }> {
  const ctx = await loadFixture(twoAccountsFixture);
  const [oldKey, freshKey] = ctx.keySigners;
  await grantKey(ctx.registry, ctx.ownerA, oldKey, GRANT, expiration);
  return { ...ctx, old: oldKey.address, fresh: freshKey.address };
}

/** The rotation call with defaults; `overrides` replaces any argument. */
function rotate(
  ctx: TwoAccounts & { old: string; fresh: string },
  overrides: Partial<{
    old: string;
    overlap: bigint;
    fresh: string;
    name: string;
    newExpiration: bigint;
    scopes: KeyScopes;
  }> = {},
) {
  return ctx.registry
    .connect(ctx.ownerA)
    .rotateKey(
      overrides.old ?? ctx.old,
      overrides.overlap ?? DAY,
      overrides.fresh ?? ctx.fresh,
      NEW_HASH,
      overrides.name ?? "rotated",
      "successor",
      overrides.newExpiration ?? 0n,
      overrides.scopes ?? GRANT,
    );
}

describe("AccountRegistry: rotateKey", function () {
  describe("what it does", function () {
    it("registers the new key with the old key's scopes", async function () {
      const ctx = await withOldKey();
      await rotate(ctx);
      const answers = [];
      for (const [scope, group] of [
        [Scope.Execute, 1n],
        [Scope.Execute, 2n],
        [Scope.ManageActions, 2n],
        [Scope.CreatePkp, 0n],
        [Scope.AddPkp, 1n],
      ] as const) {
        answers.push(await ctx.registry.hasScope(ctx.fresh, scope, group));
      }
      expect(answers).to.deep.equal([true, false, true, true, false]);
    });

    it("emits KeyAdded for the new key with its hash, name and expiration", async function () {
      const ctx = await withOldKey();
      const expiration = (await pinnedNow()) + 90n * DAY;
      await expect(rotate(ctx, { newExpiration: expiration }))
        .to.emit(ctx.registry, "KeyAdded")
        .withArgs(1n, ctx.fresh, NEW_HASH, "rotated", "successor", expiration, Object.values(GRANT));
    });

    it("ends a key without expiration overlap seconds from the rotation's block", async function () {
      const ctx = await withOldKey();
      const now = (await pinnedNow()) + 1n;
      await time.setNextBlockTimestamp(now);
      await expect(rotate(ctx, { overlap: DAY }))
        .to.emit(ctx.registry, "KeyUpdated")
        .withArgs(1n, ctx.old, "rotated", "successor", now + DAY, Object.values(GRANT));
    });

    it("brings a later expiration forward to the end of the overlap", async function () {
      const ctx = await withOldKey((await pinnedNow()) + 10n * DAY);
      const now = (await pinnedNow()) + 1n;
      await time.setNextBlockTimestamp(now);
      await rotate(ctx, { overlap: DAY });
      expect((await ctx.registry.getKey(ctx.old)).expiration).to.equal(now + DAY);
    });

    it("keeps an expiration that comes before the end of the overlap (never extends a key)", async function () {
      const expiration = (await pinnedNow()) + 3600n;
      const ctx = await withOldKey(expiration);
      await rotate(ctx, { overlap: DAY });
      expect((await ctx.registry.getKey(ctx.old)).expiration).to.equal(expiration);
    });

    it("with overlap 0 refuses the old key from the rotation's block on", async function () {
      const ctx = await withOldKey();
      await rotate(ctx, { overlap: 0n });
      expect([
        await ctx.registry.accountOfKey(ctx.old),
        await ctx.registry.accountOfKey(ctx.fresh),
      ]).to.deep.equal([0n, 1n]);
    });

    it("counts the new key in the account's keyCount", async function () {
      const ctx = await withOldKey();
      await rotate(ctx);
      expect((await ctx.registry.getAccount(1n)).keyCount).to.equal(2n);
    });
  });

  describe("refusals", function () {
    it("refuses an overlap longer than MAX_ROTATION_OVERLAP", async function () {
      const ctx = await withOldKey();
      await expect(rotate(ctx, { overlap: 30n * DAY + 1n }))
        .to.be.revertedWithCustomError(ctx.registry, "OverlapTooLong")
        .withArgs(30n * DAY + 1n, 30n * DAY);
    });

    it("refuses scopes other than the old key's with ScopesMismatch", async function () {
      const ctx = await withOldKey();
      await expect(rotate(ctx, { scopes: scopes({ Execute: [1] }) }))
        .to.be.revertedWithCustomError(ctx.registry, "ScopesMismatch")
        .withArgs(ctx.old);
    });

    it("refuses the zero address as the new key", async function () {
      const ctx = await withOldKey();
      await expect(rotate(ctx, { fresh: ethers.ZeroAddress })).to.be.revertedWithCustomError(
        ctx.registry,
        "ZeroAddress",
      );
    });

    it("refuses a new key address that already has a role", async function () {
      const ctx = await withOldKey();
      await expect(rotate(ctx, { fresh: ctx.ownerB.address }))
        .to.be.revertedWithCustomError(ctx.registry, "AddressInUse")
        .withArgs(ctx.ownerB.address);
    });

    it("refuses a new key expiration in the past", async function () {
      const ctx = await withOldKey();
      const past = (await pinnedNow()) - 1n;
      await expect(rotate(ctx, { newExpiration: past }))
        .to.be.revertedWithCustomError(ctx.registry, "ExpirationInPast")
        .withArgs(past);
    });

    it("refuses a name longer than MAX_STRING_BYTES", async function () {
      const ctx = await withOldKey();
      await expect(rotate(ctx, { name: "n".repeat(257) }))
        .to.be.revertedWithCustomError(ctx.registry, "StringTooLong")
        .withArgs(257n, 256n);
    });

    it("refuses an old key that is not a key of the account", async function () {
      const ctx = await withOldKey();
      await expect(rotate(ctx, { old: ctx.outsider.address }))
        .to.be.revertedWithCustomError(ctx.registry, "UnknownKey")
        .withArgs(ctx.outsider.address);
    });

    it("refuses an old key that has expired", async function () {
      const expiration = (await pinnedNow()) + 60n;
      const ctx = await withOldKey(expiration);
      await time.increaseTo(expiration);
      await expect(rotate(ctx))
        .to.be.revertedWithCustomError(ctx.registry, "KeyExpired")
        .withArgs(ctx.old, expiration);
    });
  });
});
