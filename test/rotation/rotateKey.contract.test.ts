/**
 * AccountRegistry.rotateKey on the in-process Hardhat network: one call registers the successor with the
 * old key's exact scopes and sets the old key's end, or changes nothing at all.
 */
import { expect } from "chai";
import fc from "fast-check";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import { MAX_ROTATION_OVERLAP_SECONDS } from "../../relayer/routes/rotation";
import {
  pinnedNow,
  Scope,
  scopes,
  twoAccountsFixture,
  type KeyScopes,
  type TwoAccounts,
} from "../contracts/fixtures";

const KEY_HASH = ethers.id("uk_" + "cd".repeat(32));
const NEW_KEY_HASH = ethers.id("uk_" + "ef".repeat(32));
const ALL_SCOPE_INDEXES = Object.values(Scope);

/** What the registry's views say `key` may do, for every scope on every group id in `groupIds`. */
async function viewsOf(ctx: TwoAccounts, key: string, groupIds: bigint[]): Promise<boolean[]> {
  const out: boolean[] = [];
  for (const scope of ALL_SCOPE_INDEXES)
    for (const g of groupIds) out.push(await ctx.registry.hasScope(key, scope, g));
  return out;
}

async function addOldKey(ctx: TwoAccounts, s: KeyScopes, expiration = 0n): Promise<string> {
  const old = ethers.Wallet.createRandom().address;
  await ctx.registry.connect(ctx.ownerA).addKey(old, KEY_HASH, "server", "the old one", expiration, s);
  return old;
}

function rotate(ctx: TwoAccounts, old: string, overlap: bigint | number, s: KeyScopes, newKey?: string) {
  const fresh = newKey ?? ethers.Wallet.createRandom().address;
  return {
    newKey: fresh,
    tx: ctx.registry
      .connect(ctx.ownerA)
      .rotateKey(old, overlap, fresh, NEW_KEY_HASH, "server", "the old one", 0n, s),
  };
}

const EXECUTE_TARGET = scopes({ Execute: [1], CreatePkp: true });

describe("AccountRegistry: rotateKey", function () {
  it("registers the new key and sets the old key's expiration to the block time plus the overlap", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const old = await addOldKey(ctx, EXECUTE_TARGET);
    const { newKey, tx } = rotate(ctx, old, 600, EXECUTE_TARGET);
    const receipt = await (await tx).wait();
    const at = BigInt((await ethers.provider.getBlock(receipt!.blockNumber))!.timestamp);
    expect((await ctx.registry.getKey(old)).expiration).to.equal(at + 600n);
    expect((await ctx.registry.getKey(newKey)).expiration).to.equal(0n);
    expect(await ctx.registry.accountOfKey(newKey)).to.equal(ctx.accountA);
  });

  it("emits KeyAdded for the new key, then KeyUpdated for the old one with its new expiration", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const old = await addOldKey(ctx, EXECUTE_TARGET);
    const { newKey, tx } = rotate(ctx, old, 60, EXECUTE_TARGET);
    const receipt = await (await tx).wait();
    const names = receipt!.logs.map((l) => ctx.registry.interface.parseLog(l)?.name);
    expect(names).to.deep.equal(["KeyAdded", "KeyUpdated"]);
    const at = BigInt((await ethers.provider.getBlock(receipt!.blockNumber))!.timestamp);
    await expect(tx)
      .to.emit(ctx.registry, "KeyAdded")
      .withArgs(ctx.accountA, newKey, NEW_KEY_HASH, "server", "the old one", 0n, (s: unknown) => !!s);
    await expect(tx)
      .to.emit(ctx.registry, "KeyUpdated")
      .withArgs(ctx.accountA, old, "server", "the old one", at + 60n, (s: unknown) => !!s);
  });

  it("keeps the old key's own expiration when it is sooner than the overlap's end", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    // Pinned: the fixture's snapshot may be minutes old, and the next block would take the wall clock.
    const soon = (await pinnedNow()) + 100n;
    const old = await addOldKey(ctx, EXECUTE_TARGET, soon);
    await (await rotate(ctx, old, 3600, EXECUTE_TARGET).tx).wait();
    expect((await ctx.registry.getKey(old)).expiration).to.equal(soon);
  });

  it("with overlap 0 the old key is expired from the rotation's own block on", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const old = await addOldKey(ctx, EXECUTE_TARGET);
    const { newKey, tx } = rotate(ctx, old, 0, EXECUTE_TARGET);
    await (await tx).wait();
    expect(await ctx.registry.hasScope(old, Scope.Execute, 1n)).to.equal(false);
    expect(await ctx.registry.hasScope(newKey, Scope.Execute, 1n)).to.equal(true);
    await expect(ctx.registry.getKey(old)).to.be.revertedWithCustomError(ctx.registry, "UnknownKey");
  });

  it("refuses scopes other than the ones the old key holds, and changes nothing", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const old = await addOldKey(ctx, EXECUTE_TARGET);
    const wider = scopes({ Execute: [0], CreatePkp: true });
    const { newKey, tx } = rotate(ctx, old, 60, wider);
    await expect(tx).to.be.revertedWithCustomError(ctx.registry, "ScopesMismatch").withArgs(old);
    expect(await ctx.registry.accountOfKey(newKey)).to.equal(0n);
    expect((await ctx.registry.getKey(old)).expiration).to.equal(0n);
  });

  it("is owner-only: a key with every scope is refused NotOwner", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const [signer] = ctx.keySigners;
    await ctx.registry
      .connect(ctx.ownerA)
      .addKey(signer.address, KEY_HASH, "self", "", 0n, scopes({ Execute: [0], CreatePkp: true }));
    const fresh = ethers.Wallet.createRandom().address;
    await expect(
      ctx.registry
        .connect(signer)
        .rotateKey(
          signer.address,
          60,
          fresh,
          NEW_KEY_HASH,
          "self",
          "",
          0n,
          scopes({ Execute: [0], CreatePkp: true }),
        ),
    )
      .to.be.revertedWithCustomError(ctx.registry, "NotOwner")
      .withArgs(signer.address, ctx.accountA);
  });

  it("refuses an overlap above MAX_ROTATION_OVERLAP, which is the relayer's maximum too", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    expect(await ctx.registry.MAX_ROTATION_OVERLAP()).to.equal(BigInt(MAX_ROTATION_OVERLAP_SECONDS));
    const old = await addOldKey(ctx, EXECUTE_TARGET);
    await expect(rotate(ctx, old, MAX_ROTATION_OVERLAP_SECONDS + 1, EXECUTE_TARGET).tx)
      .to.be.revertedWithCustomError(ctx.registry, "OverlapTooLong")
      .withArgs(MAX_ROTATION_OVERLAP_SECONDS + 1, MAX_ROTATION_OVERLAP_SECONDS);
  });

  it("refuses a removed old key as UnknownKey", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const old = await addOldKey(ctx, EXECUTE_TARGET);
    await ctx.registry.connect(ctx.ownerA).removeKey(old);
    await expect(rotate(ctx, old, 60, EXECUTE_TARGET).tx)
      .to.be.revertedWithCustomError(ctx.registry, "UnknownKey")
      .withArgs(old);
  });

  it("refuses a new key address already in use", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    const old = await addOldKey(ctx, EXECUTE_TARGET);
    const taken = await addOldKey(ctx, EXECUTE_TARGET);
    await expect(rotate(ctx, old, 60, EXECUTE_TARGET, taken).tx)
      .to.be.revertedWithCustomError(ctx.registry, "AddressInUse")
      .withArgs(taken);
  });

  it("property: the new key's views equal the old key's for random scope sets, deleted groups included", async function () {
    const ctx = await loadFixture(twoAccountsFixture);
    // -1 stands for a group created for the run; `deleteIt` deletes it before the rotation (its scope
    // entries then grant nothing, and the copy keeps them).
    const idsArb = fc.array(fc.constantFrom(0n, 1n, 2n, -1n), { maxLength: 4 });
    const runArb = fc.record({
      canCreateGroups: fc.boolean(),
      canDeleteGroups: fc.boolean(),
      canCreatePkps: fc.boolean(),
      manageIpfsIdsInGroups: idsArb,
      addPkpToGroups: idsArb,
      removePkpFromGroups: idsArb,
      executeInGroups: idsArb,
      deleteIt: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(runArb, async ({ deleteIt, ...raw }) => {
        const fresh = (await ctx.registry.getAccount(ctx.accountA)).groupCount + 1n;
        await ctx.registry.connect(ctx.ownerA).createGroup("run", "", [], []);
        const ids = (xs: bigint[]) => xs.map((g) => (g === -1n ? fresh : g));
        const s: KeyScopes = {
          ...raw,
          manageIpfsIdsInGroups: ids(raw.manageIpfsIdsInGroups),
          addPkpToGroups: ids(raw.addPkpToGroups),
          removePkpFromGroups: ids(raw.removePkpFromGroups),
          executeInGroups: ids(raw.executeInGroups),
        };
        const old = await addOldKey(ctx, s);
        if (deleteIt) await ctx.registry.connect(ctx.ownerA).deleteGroup(fresh);
        const groups = [0n, 1n, 2n, fresh, fresh + 1n];
        const before = await viewsOf(ctx, old, groups);
        const { newKey, tx } = rotate(ctx, old, 3600, s);
        await (await tx).wait();
        expect(await viewsOf(ctx, newKey, groups)).to.deep.equal(before);
        expect(await viewsOf(ctx, old, groups)).to.deep.equal(before);
      }),
      { numRuns: 25 },
    );
  });
});
