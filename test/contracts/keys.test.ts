/**
 * Usage keys: registration, validation, views, full-replace updates, removal and expiration.
 */
import { expect } from "chai";
import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import {
  pinnedNow,
  ALL_SCOPES,
  CID_HELLO,
  Scope,
  cidHash,
  grantKey,
  readAccount,
  scopes,
  twoAccountsFixture,
} from "./fixtures";

const KEY_HASH = ethers.id("uk_" + "ab".repeat(32));

/** The scopes part of a KeyInfo, as plain values. */
function scopesOf(
  info: Awaited<ReturnType<Awaited<ReturnType<typeof twoAccountsFixture>>["registry"]["getKey"]>>,
) {
  const s = info.scopes;
  return {
    canCreateGroups: s.canCreateGroups,
    canDeleteGroups: s.canDeleteGroups,
    canCreatePkps: s.canCreatePkps,
    manageIpfsIdsInGroups: [...s.manageIpfsIdsInGroups],
    addPkpToGroups: [...s.addPkpToGroups],
    removePkpFromGroups: [...s.removePkpFromGroups],
    executeInGroups: [...s.executeInGroups],
  };
}

describe("AccountRegistry: usage keys", function () {
  describe("addKey", function () {
    it("emits KeyAdded with the key, its hash, metadata, expiration and scopes", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const grant = scopes({ CreatePkp: true, Execute: [1], AddPkp: [0] });
      const expiration = (await pinnedNow()) + 1000n;
      await expect(
        registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "server", "prod", expiration, grant),
      )
        .to.emit(registry, "KeyAdded")
        .withArgs(1n, keySigners[0].address, KEY_HASH, "server", "prod", expiration, Object.values(grant));
    });

    it("a reader gets the key's hash, name and description from KeyAdded", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await registry.connect(ownerA).addKey(key, KEY_HASH, "server", "prod", 0, scopes());
      const record = (await readAccount(registry, 1n)).keys.get(key)!;
      expect([record.keyHash, record.name, record.description]).to.deep.equal([
        KEY_HASH.toLowerCase(),
        "server",
        "prod",
      ]);
    });

    it("getKey returns what was registered", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      const tx = await registry
        .connect(ownerA)
        .addKey(key, KEY_HASH, "server", "prod", 0, scopes({ CreateGroup: true, ManageActions: [2, 1] }));
      const block = await ethers.provider.getBlock((await tx.wait())!.blockNumber);
      const info = await registry.getKey(key);
      expect([info.key, info.accountId, info.expiration]).to.deep.equal([key, 1n, 0n]);
      expect(info.createdAt).to.equal(BigInt(block!.timestamp));
      // Ids come in live-group order (the registry keeps no per-key list), not in the order granted.
      expect(scopesOf(info)).to.deep.equal({
        canCreateGroups: true,
        canDeleteGroups: false,
        canCreatePkps: false,
        manageIpfsIdsInGroups: [1n, 2n],
        addPkpToGroups: [],
        removePkpFromGroups: [],
        executeInGroups: [],
      });
    });

    it("getKey returns each per-group array with the ids granted in it", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(
        registry,
        ownerA,
        keySigners[0],
        scopes({ Execute: [1, 0], ManageActions: [2], AddPkp: [0], RemovePkp: [1, 2] }),
      );
      const info = scopesOf(await registry.getKey(keySigners[0].address));
      expect([
        info.executeInGroups,
        info.manageIpfsIdsInGroups,
        info.addPkpToGroups,
        info.removePkpFromGroups,
      ]).to.deep.equal([[0n, 1n], [2n], [0n], [1n, 2n]]);
    });

    it("treats duplicate ids in an array as one", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [1, 1, 1] }));
      expect(scopesOf(await registry.getKey(keySigners[0].address)).executeInGroups).to.deep.equal([1n]);
    });

    it("empty arrays and false flags grant nothing", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      for (const scope of Object.values(Scope)) {
        for (const groupId of [0n, 1n, 2n]) {
          expect(await registry.hasScope(keySigners[0].address, scope, groupId)).to.equal(false);
        }
      }
    });

    it("increments the account's key count and lists the key", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      expect((await registry.getAccount(1n)).keyCount).to.equal(1n);
      expect(await registry.accountOfKey(keySigners[0].address)).to.equal(1n);
    });

    it("refuses the zero address", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(
        registry.connect(ownerA).addKey(ethers.ZeroAddress, KEY_HASH, "k", "", 0, scopes()),
      ).to.be.revertedWithCustomError(registry, "ZeroAddress");
    });

    it("refuses a key already registered in another account", async function () {
      const { registry, ownerA, ownerB, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerB, keySigners[0], scopes());
      await expect(registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes()))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(keySigners[0].address);
    });

    it("refuses a key already registered in the same account", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      await expect(registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes()))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(keySigners[0].address);
    });

    it("refuses an address that owns an account", async function () {
      const { registry, ownerA, ownerB } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addKey(ownerB.address, KEY_HASH, "k", "", 0, scopes()))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(ownerB.address);
    });

    it("refuses the account's master key", async function () {
      const { registry, ownerA, masterKeyA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).addKey(masterKeyA.address, KEY_HASH, "k", "", 0, scopes()))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(masterKeyA.address);
    });

    it("refuses an expiration in the past", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const past = (await pinnedNow()) - 1n;
      await expect(registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "", past, scopes()))
        .to.be.revertedWithCustomError(registry, "ExpirationInPast")
        .withArgs(past);
    });

    it("refuses an expiration equal to the block time", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const next = (await pinnedNow()) + 10n;
      await time.setNextBlockTimestamp(next);
      await expect(registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "", next, scopes()))
        .to.be.revertedWithCustomError(registry, "ExpirationInPast")
        .withArgs(next);
    });

    for (const [scope, field] of [
      ["Execute", "executeInGroups"],
      ["ManageActions", "manageIpfsIdsInGroups"],
      ["AddPkp", "addPkpToGroups"],
      ["RemovePkp", "removePkpFromGroups"],
    ] as const) {
      it(`refuses a group id in ${field} that is not a group of the account`, async function () {
        const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
        await expect(
          registry
            .connect(ownerA)
            .addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes({ [scope]: [1, 3] })),
        )
          .to.be.revertedWithCustomError(registry, "UnknownGroup")
          .withArgs(1n, 3n);
      });

      it(`refuses more than MAX_SCOPE_ENTRIES ids in ${field}`, async function () {
        const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
        const ids = new Array(65).fill(1);
        await expect(
          registry
            .connect(ownerA)
            .addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes({ [scope]: ids })),
        )
          .to.be.revertedWithCustomError(registry, "TooManyEntries")
          .withArgs(65n, 64n);
      });
    }

    it("accepts exactly MAX_SCOPE_ENTRIES ids", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      expect(await registry.MAX_SCOPE_ENTRIES()).to.equal(64n);
      await expect(
        registry
          .connect(ownerA)
          .addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes({ Execute: new Array(64).fill(2) })),
      ).to.emit(registry, "KeyAdded");
    });

    describe("the largest scope set fits in one transaction", function () {
      /** Account A with `count` live groups (ids 1..count): the fixture's 2 plus new ones. */
      async function withGroups(count: number) {
        const ctx = await loadFixture(twoAccountsFixture);
        for (let i = 2; i < count; i++) await ctx.registry.connect(ctx.ownerA).createGroup("g", "", [], []);
        return ctx;
      }
      const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => BigInt(from + i));
      /** Four arrays of `each` distinct ids, none shared: the costliest shape (one mask slot per entry). */
      const distinct = (each: number, offset = 0) =>
        scopes({
          Execute: range(1 + offset, each),
          ManageActions: range(1 + offset + each, each),
          AddPkp: range(1 + offset + 2 * each, each),
          RemovePkp: range(1 + offset + 3 * each, each),
        });
      // EIP-7825 (in force on this Hardhat network and on mainnet): no transaction may use more gas.
      const TX_GAS_CAP = 16_777_216n;

      it("refuses more than MAX_SCOPE_ENTRIES_PER_KEY entries across the four arrays", async function () {
        const { registry, ownerA, keySigners } = await withGroups(132);
        expect(await registry.MAX_SCOPE_ENTRIES_PER_KEY()).to.equal(128n);
        const grant = distinct(32);
        (grant.removePkpFromGroups as bigint[]).push(129n);
        await expect(registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "", 0, grant))
          .to.be.revertedWithCustomError(registry, "TooManyEntries")
          .withArgs(129n, 128n);
      });

      it("updateKey refuses more than MAX_SCOPE_ENTRIES_PER_KEY entries too", async function () {
        const { registry, ownerA, keySigners } = await withGroups(132);
        await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [1] }));
        const grant = distinct(32);
        (grant.executeInGroups as bigint[]).push(130n);
        await expect(registry.connect(ownerA).updateKey(keySigners[0].address, "k", "", 0, grant))
          .to.be.revertedWithCustomError(registry, "TooManyEntries")
          .withArgs(129n, 128n);
      });

      it("addKey with MAX_SCOPE_ENTRIES_PER_KEY distinct ids, then updateKey replacing them all, stay under the transaction gas cap", async function () {
        const { registry, ownerA, keySigners } = await withGroups(256);
        const added = await (
          await registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "", 0, distinct(32))
        ).wait();
        expect(added!.gasUsed).to.be.lessThan(TX_GAS_CAP);
        const updated = await (
          await registry.connect(ownerA).updateKey(keySigners[0].address, "k", "", 0, distinct(32, 128))
        ).wait();
        expect(updated!.gasUsed).to.be.lessThan(TX_GAS_CAP);
        expect(scopesOf(await registry.getKey(keySigners[0].address)).removePkpFromGroups).to.deep.equal(
          range(225, 32),
        );
      });
    });

    it("refuses a group id of a deleted group", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).deleteGroup(2n);
      await expect(
        registry
          .connect(ownerA)
          .addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes({ Execute: [2] })),
      )
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 2n);
    });

    it("refuses a group id that exists only in another account", async function () {
      const { registry, ownerB, keySigners } = await loadFixture(twoAccountsFixture);
      await expect(
        registry.connect(ownerB).addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes({ AddPkp: [2] })),
      )
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(2n, 2n);
    });

    it("refuses a name longer than MAX_STRING_BYTES", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await expect(
        registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "n".repeat(300), "", 0, scopes()),
      )
        .to.be.revertedWithCustomError(registry, "StringTooLong")
        .withArgs(300n, 256n);
    });

    it("refuses a description longer than MAX_STRING_BYTES", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await expect(
        registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "d".repeat(257), 0, scopes()),
      )
        .to.be.revertedWithCustomError(registry, "StringTooLong")
        .withArgs(257n, 256n);
    });
  });

  describe("updateKey (full replace)", function () {
    it("replaces every scope: old grants are gone, new ones hold", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await registry.connect(ownerA).updateKey(key, "k", "", 0, scopes({ Execute: [2] }));
      expect(scopesOf(await registry.getKey(key))).to.deep.equal(scopes({ Execute: [2n] }));
      expect(await registry.hasScope(key, Scope.ManageActions, 1n)).to.equal(false);
      expect(await registry.hasScope(key, Scope.CreatePkp, 0n)).to.equal(false);
      expect(await registry.hasScope(key, Scope.Execute, 1n)).to.equal(false);
      expect(await registry.hasScope(key, Scope.Execute, 2n)).to.equal(true);
    });

    it("clears the wildcard of a scope left out", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0];
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [0] }));
      await registry.connect(ownerA).updateKey(key.address, "k", "", 0, scopes({ AddPkp: [1] }));
      await expect(registry.connect(key).addAction(1n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 1n, Scope.ManageActions, 1n);
    });

    it("resets fields left out: empty arrays and false flags grant nothing afterwards", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await registry.connect(ownerA).updateKey(key, "", "", 0, scopes());
      expect(scopesOf(await registry.getKey(key))).to.deep.equal(scopes());
    });

    it("replaces name, description and expiration, keeping keyHash and createdAt", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await registry.connect(ownerA).addKey(key, KEY_HASH, "old", "old desc", 0, scopes());
      const createdAt = (await registry.getKey(key)).createdAt;
      const expiration = (await pinnedNow()) + 500n;
      await expect(
        registry.connect(ownerA).updateKey(key, "new", "new desc", expiration, scopes({ Execute: [1] })),
      )
        .to.emit(registry, "KeyUpdated")
        .withArgs(1n, key, "new", "new desc", expiration, Object.values(scopes({ Execute: [1] })));
      const info = await registry.getKey(key);
      const record = (await readAccount(registry, 1n)).keys.get(key)!;
      expect([
        record.name,
        record.description,
        info.expiration,
        record.keyHash,
        info.createdAt,
      ]).to.deep.equal(["new", "new desc", expiration, KEY_HASH.toLowerCase(), createdAt]);
    });

    it("refuses a key that is not registered", async function () {
      const { registry, ownerA, outsider } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).updateKey(outsider.address, "k", "", 0, scopes()))
        .to.be.revertedWithCustomError(registry, "UnknownKey")
        .withArgs(outsider.address);
    });

    it("refuses a key of another account", async function () {
      const { registry, ownerA, ownerB, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerB, keySigners[0], scopes());
      await expect(registry.connect(ownerA).updateKey(keySigners[0].address, "k", "", 0, ALL_SCOPES))
        .to.be.revertedWithCustomError(registry, "UnknownKey")
        .withArgs(keySigners[0].address);
    });

    it("refuses an expired key", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const expiration = (await pinnedNow()) + 60n;
      await grantKey(registry, ownerA, keySigners[0], scopes(), expiration);
      await time.increaseTo(expiration);
      await expect(registry.connect(ownerA).updateKey(keySigners[0].address, "k", "", 0, scopes()))
        .to.be.revertedWithCustomError(registry, "KeyExpired")
        .withArgs(keySigners[0].address, expiration);
    });

    it("validates the new scopes like addKey", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      await expect(
        registry.connect(ownerA).updateKey(keySigners[0].address, "k", "", 0, scopes({ RemovePkp: [7] })),
      )
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, 7n);
    });
  });

  describe("updateKeyMetadata", function () {
    it("changes name and description and leaves the scopes alone", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await expect(registry.connect(ownerA).updateKeyMetadata(key, "renamed", "described"))
        .to.emit(registry, "KeyMetadataUpdated")
        .withArgs(1n, key, "renamed", "described");
      const info = await registry.getKey(key);
      const record = (await readAccount(registry, 1n)).keys.get(key)!;
      expect([record.name, record.description]).to.deep.equal(["renamed", "described"]);
      expect(scopesOf(info)).to.deep.equal(
        scopes({
          CreatePkp: true,
          CreateGroup: true,
          DeleteGroup: true,
          Execute: [0n],
          ManageActions: [0n],
          AddPkp: [0n],
          RemovePkp: [0n],
        }),
      );
    });

    it("refuses a key of another account", async function () {
      const { registry, ownerA, ownerB, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerB, keySigners[0], scopes());
      await expect(registry.connect(ownerA).updateKeyMetadata(keySigners[0].address, "k", ""))
        .to.be.revertedWithCustomError(registry, "UnknownKey")
        .withArgs(keySigners[0].address);
    });

    it("refuses a name longer than MAX_STRING_BYTES", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      await expect(registry.connect(ownerA).updateKeyMetadata(keySigners[0].address, "k".repeat(257), ""))
        .to.be.revertedWithCustomError(registry, "StringTooLong")
        .withArgs(257n, 256n);
    });
  });

  describe("removeKey", function () {
    it("refuses the key on its very next call", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0];
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await registry.connect(key).createPkp("before", "");
      await registry.connect(ownerA).removeKey(key.address);
      await expect(registry.connect(key).createPkp("after", ""))
        .to.be.revertedWithCustomError(registry, "NoAccount")
        .withArgs(key.address);
    });

    it("makes the key absent from every view", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await registry.connect(ownerA).createGroup("g", "", [pkpA1], [CID_HELLO]);
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await registry.connect(ownerA).removeKey(key);
      await expect(registry.getKey(key)).to.be.revertedWithCustomError(registry, "UnknownKey").withArgs(key);
      expect(await registry.accountOfKey(key)).to.equal(0n);
      expect(await registry.hasScope(key, Scope.Execute, 0n)).to.equal(false);
      expect(await registry.canExecute(key, cidHash(CID_HELLO), pkpA1)).to.equal(false);
      expect((await readAccount(registry, 1n)).keys.has(key)).to.equal(false);
      expect((await registry.getAccount(1n)).keyCount).to.equal(0n);
    });

    it("does not affect other keys", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], ALL_SCOPES);
      await grantKey(registry, ownerA, keySigners[1], scopes({ CreatePkp: true }));
      await registry.connect(ownerA).removeKey(keySigners[0].address);
      await expect(registry.connect(keySigners[1]).createPkp("still works", "")).to.emit(
        registry,
        "PkpCreated",
      );
    });

    it("frees the address: re-registering starts from the new scopes only", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await registry.connect(ownerA).removeKey(key);
      await grantKey(registry, ownerA, key, scopes({ Execute: [1] }));
      expect(scopesOf(await registry.getKey(key))).to.deep.equal(scopes({ Execute: [1n] }));
    });

    it("a removed wildcard key re-registered by another account carries nothing over", async function () {
      const { registry, ownerA, ownerB, keySigners, groupB } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0];
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await registry.connect(ownerA).removeKey(key.address);
      await grantKey(registry, ownerB, key, scopes());
      expect(scopesOf(await registry.getKey(key.address))).to.deep.equal(scopes());
      await expect(registry.connect(key).addAction(groupB, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 2n, Scope.ManageActions, groupB);
      await expect(registry.connect(key).createPkp("no", ""))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 2n, Scope.CreatePkp, 0n);
    });

    it("accepts an expired key, so its address can be freed", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const expiration = (await pinnedNow()) + 60n;
      await grantKey(registry, ownerA, keySigners[0], scopes(), expiration);
      await time.increaseTo(expiration);
      await expect(registry.connect(ownerA).removeKey(keySigners[0].address))
        .to.emit(registry, "KeyRemoved")
        .withArgs(1n, keySigners[0].address);
    });

    it("refuses a key of another account", async function () {
      const { registry, ownerA, ownerB, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerB, keySigners[0], scopes());
      await expect(registry.connect(ownerA).removeKey(keySigners[0].address))
        .to.be.revertedWithCustomError(registry, "UnknownKey")
        .withArgs(keySigners[0].address);
    });

    it("refuses a key removed already", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      await registry.connect(ownerA).removeKey(keySigners[0].address);
      await expect(registry.connect(ownerA).removeKey(keySigners[0].address))
        .to.be.revertedWithCustomError(registry, "UnknownKey")
        .withArgs(keySigners[0].address);
    });
  });

  describe("expiration", function () {
    it("a key works until its expiration", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const expiration = (await pinnedNow()) + 3600n;
      await grantKey(registry, ownerA, keySigners[0], scopes({ CreatePkp: true }), expiration);
      await time.setNextBlockTimestamp(expiration - 1n);
      await expect(registry.connect(keySigners[0]).createPkp("last second", "")).to.emit(
        registry,
        "PkpCreated",
      );
    });

    it("a key is refused with KeyExpired from its expiration on", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const expiration = (await pinnedNow()) + 3600n;
      await grantKey(registry, ownerA, keySigners[0], scopes({ CreatePkp: true }), expiration);
      await time.setNextBlockTimestamp(expiration);
      await expect(registry.connect(keySigners[0]).createPkp("too late", ""))
        .to.be.revertedWithCustomError(registry, "KeyExpired")
        .withArgs(keySigners[0].address, expiration);
    });

    it("an expired key is absent from every view", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await registry.connect(ownerA).createGroup("g", "", [pkpA1], [CID_HELLO]);
      const expiration = (await pinnedNow()) + 3600n;
      await grantKey(registry, ownerA, key, ALL_SCOPES, expiration);
      expect(await registry.canExecute(key, cidHash(CID_HELLO), pkpA1)).to.equal(true);
      await time.increaseTo(expiration);
      await expect(registry.getKey(key)).to.be.revertedWithCustomError(registry, "UnknownKey").withArgs(key);
      expect(await registry.accountOfKey(key)).to.equal(0n);
      expect(await registry.hasScope(key, Scope.CreatePkp, 0n)).to.equal(false);
      expect(await registry.canExecute(key, cidHash(CID_HELLO), pkpA1)).to.equal(false);
      expect(await registry.canExecuteAction(key, cidHash(CID_HELLO))).to.equal(false);
      // Until removed it still counts as registered (it occupies its address).
      expect((await registry.getAccount(1n)).keyCount).to.equal(1n);
    });

    it("an expired key still occupies its address until removed", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const expiration = (await pinnedNow()) + 60n;
      await grantKey(registry, ownerA, keySigners[0], scopes(), expiration);
      await time.increaseTo(expiration);
      await expect(registry.connect(ownerA).addKey(keySigners[0].address, KEY_HASH, "k", "", 0, scopes()))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(keySigners[0].address);
    });
  });

  describe("the key list (from the events)", function () {
    it("a reader lists the account's keys in registration order, without removed ones", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      for (const key of keySigners.slice(0, 4)) await grantKey(registry, ownerA, key, scopes());
      await registry.connect(ownerA).removeKey(keySigners[1].address);
      expect([...(await readAccount(registry, 1n)).keys.keys()]).to.deep.equal(
        [0, 2, 3].map((i) => keySigners[i].address),
      );
      expect((await registry.getAccount(1n)).keyCount).to.equal(3n);
    });

    it("lists only the account's own keys", async function () {
      const { registry, ownerA, ownerB, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      await grantKey(registry, ownerB, keySigners[1], scopes());
      expect([...(await readAccount(registry, 2n)).keys.keys()]).to.deep.equal([keySigners[1].address]);
    });
  });

  describe("scope epochs: replaced masks never count again", function () {
    it("updateKey drops the masks of groups left out of the new scopes", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [1, 2] }));
      await registry.connect(ownerA).updateKey(key, "key", "", 0, scopes({ ManageActions: [2] }));
      expect([
        await registry.hasScope(key, Scope.ManageActions, 1n),
        await registry.hasScope(key, Scope.ManageActions, 2n),
      ]).to.deep.equal([false, true]);
      await expect(registry.connect(keySigners[0]).addAction(1n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key, 1n, Scope.ManageActions, 1n);
    });

    it("updateKey with unchanged scopes keeps them and still applies the new expiration", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      const grant = scopes({ Execute: [1], AddPkp: [0], CreatePkp: true });
      await grantKey(registry, ownerA, key, grant);
      const expiration = (await pinnedNow()) + 900n;
      await registry.connect(ownerA).updateKey(key, "key", "", expiration, grant);
      const info = await registry.getKey(key);
      expect([info.expiration, scopesOf(info)]).to.deep.equal([
        expiration,
        { ...grant, executeInGroups: [1n], addPkpToGroups: [0n] },
      ]);
    });

    it("a removed key registered again starts with only its new scopes", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      await grantKey(registry, ownerA, key, ALL_SCOPES);
      await registry.connect(ownerA).removeKey(key);
      await grantKey(registry, ownerA, key, scopes({ Execute: [1] }));
      expect([
        await registry.hasScope(key, Scope.ManageActions, 1n),
        await registry.hasScope(key, Scope.Execute, 2n),
        await registry.hasScope(key, Scope.Execute, 1n),
      ]).to.deep.equal([false, false, true]);
    });

    it("a key moved to another account keeps nothing of its scopes in the first", async function () {
      const { registry, ownerA, ownerB, keySigners } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0].address;
      // Group 1 exists in both accounts: a mask left behind in A must not count in B.
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [1] }));
      await registry.connect(ownerA).removeKey(key);
      await grantKey(registry, ownerB, key, scopes());
      expect(await registry.hasScope(key, Scope.ManageActions, 1n)).to.equal(false);
      await expect(registry.connect(keySigners[0]).addAction(1n, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key, 2n, Scope.ManageActions, 1n);
    });
  });

  describe("hasScope", function () {
    it("answers account-wide scopes from the flags, whatever the group id", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes({ CreateGroup: true }));
      expect(await registry.hasScope(keySigners[0].address, Scope.CreateGroup, 0n)).to.equal(true);
      expect(await registry.hasScope(keySigners[0].address, Scope.CreateGroup, 5n)).to.equal(true);
      expect(await registry.hasScope(keySigners[0].address, Scope.DeleteGroup, 0n)).to.equal(false);
    });

    it("answers group 0 with whether the key holds the wildcard", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [1], AddPkp: [0] }));
      expect(await registry.hasScope(keySigners[0].address, Scope.Execute, 0n)).to.equal(false);
      expect(await registry.hasScope(keySigners[0].address, Scope.AddPkp, 0n)).to.equal(true);
    });

    it("a wildcard covers every live group of the account", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes({ RemovePkp: [0] }));
      await registry.connect(ownerA).createGroup("later", "", [], []);
      for (const groupId of [1n, 2n, 3n]) {
        expect(await registry.hasScope(keySigners[0].address, Scope.RemovePkp, groupId)).to.equal(true);
      }
    });

    it("is false for a deleted group", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes({ ManageActions: [2] }));
      await registry.connect(ownerA).deleteGroup(2n);
      expect(await registry.hasScope(keySigners[0].address, Scope.ManageActions, 2n)).to.equal(false);
    });

    it("is false for a group id the account does not have, even with a wildcard", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes({ Execute: [0] }));
      expect(await registry.hasScope(keySigners[0].address, Scope.Execute, 9n)).to.equal(false);
    });
  });

  // hasScope and the writes share one rule: a per-group scope counts only for a live group of the key's account.
  describe("scope on a group that is not live: writes agree with hasScope", function () {
    it("a key scoped on a deleted group gets MissingScope for a write on it", async function () {
      const { registry, ownerA, keySigners, other } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0];
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [other] }));
      await registry.connect(ownerA).deleteGroup(other);
      expect(await registry.hasScope(key.address, Scope.ManageActions, other)).to.equal(false);
      await expect(registry.connect(key).addAction(other, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 1n, Scope.ManageActions, other);
    });

    it("a wildcard key gets MissingScope for a write on a group id its account does not have", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0];
      await grantKey(registry, ownerA, key, scopes({ AddPkp: [0] }));
      expect(await registry.hasScope(key.address, Scope.AddPkp, 9n)).to.equal(false);
      await expect(registry.connect(key).addPkp(9n, pkpA1))
        .to.be.revertedWithCustomError(registry, "MissingScope")
        .withArgs(key.address, 1n, Scope.AddPkp, 9n);
    });

    it("a wildcard key may still write on a live group", async function () {
      const { registry, ownerA, keySigners, target } = await loadFixture(twoAccountsFixture);
      const key = keySigners[0];
      await grantKey(registry, ownerA, key, scopes({ ManageActions: [0] }));
      expect(await registry.hasScope(key.address, Scope.ManageActions, target)).to.equal(true);
      await expect(registry.connect(key).addAction(target, CID_HELLO)).to.emit(registry, "ActionAdded");
    });

    it("the owner still learns UnknownGroup for a deleted group", async function () {
      const { registry, ownerA, other } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).deleteGroup(other);
      await expect(registry.connect(ownerA).addAction(other, CID_HELLO))
        .to.be.revertedWithCustomError(registry, "UnknownGroup")
        .withArgs(1n, other);
    });
  });
});
