/**
 * Accounts: creation, the one-role-per-address rule, views, and two-step ownership transfer.
 */
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import {
  ALL_SCOPES,
  CID_HELLO,
  cidHash,
  deployFixture,
  grantKey,
  scopes,
  twoAccountsFixture,
} from "./fixtures";

describe("AccountRegistry: accounts", function () {
  describe("createAccount", function () {
    it("accepts an empty name and reads it back empty", async function () {
      const { registry, ownerA } = await loadFixture(deployFixture);
      await registry.connect(ownerA).createAccount("", ethers.ZeroAddress);
      expect((await registry.getAccount(1n)).name).to.equal("");
    });

    it("makes the caller the owner of a new account and emits AccountCreated", async function () {
      const { registry, ownerA } = await loadFixture(deployFixture);
      const masterKey = ethers.Wallet.createRandom().address;
      await expect(registry.connect(ownerA).createAccount("Acme", masterKey))
        .to.emit(registry, "AccountCreated")
        .withArgs(1n, ownerA.address, masterKey, "Acme");
    });

    it("records the account in the views", async function () {
      const { registry, ownerA } = await loadFixture(deployFixture);
      const masterKey = ethers.Wallet.createRandom().address;
      await registry.connect(ownerA).createAccount("Acme", masterKey);
      const account = await registry.getAccount(1n);
      expect([
        account.id,
        account.owner,
        account.pendingOwner,
        account.masterKey,
        account.name,
      ]).to.deep.equal([1n, ownerA.address, ethers.ZeroAddress, masterKey, "Acme"]);
      expect([account.groupCount, account.pkpCount, account.keyCount]).to.deep.equal([0n, 0n, 0n]);
      expect(await registry.accountOfOwner(ownerA.address)).to.equal(1n);
      expect(await registry.accountOfMasterKey(masterKey)).to.equal(1n);
    });

    it("assigns sequential ids from 1", async function () {
      const { registry, ownerA, ownerB } = await loadFixture(deployFixture);
      await registry.connect(ownerA).createAccount("first", ethers.ZeroAddress);
      await expect(registry.connect(ownerB).createAccount("second", ethers.ZeroAddress))
        .to.emit(registry, "AccountCreated")
        .withArgs(2n, ownerB.address, ethers.ZeroAddress, "second");
    });

    it("accepts a zero master key for an account created from a wallet or Safe", async function () {
      const { registry, ownerA } = await loadFixture(deployFixture);
      await registry.connect(ownerA).createAccount("wallet account", ethers.ZeroAddress);
      expect((await registry.getAccount(1n)).masterKey).to.equal(ethers.ZeroAddress);
      expect(await registry.accountOfMasterKey(ethers.ZeroAddress)).to.equal(0n);
    });

    it("refuses a second account for the same owner", async function () {
      const { registry, ownerA } = await loadFixture(deployFixture);
      await registry.connect(ownerA).createAccount("first", ethers.ZeroAddress);
      await expect(registry.connect(ownerA).createAccount("second", ethers.ZeroAddress))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(ownerA.address);
    });

    it("refuses a master key that is already another account's master key", async function () {
      const { registry, ownerA, ownerB } = await loadFixture(deployFixture);
      const masterKey = ethers.Wallet.createRandom().address;
      await registry.connect(ownerA).createAccount("first", masterKey);
      await expect(registry.connect(ownerB).createAccount("second", masterKey))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(masterKey);
    });

    it("refuses a master key equal to the owner", async function () {
      const { registry, ownerA } = await loadFixture(deployFixture);
      await expect(registry.connect(ownerA).createAccount("self", ownerA.address))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(ownerA.address);
    });

    it("refuses a master key that owns an account", async function () {
      const { registry, ownerA, ownerB } = await loadFixture(deployFixture);
      await registry.connect(ownerA).createAccount("first", ethers.ZeroAddress);
      await expect(registry.connect(ownerB).createAccount("second", ownerA.address))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(ownerA.address);
    });

    it("refuses a caller that is a usage key", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await grantKey(registry, ownerA, key, scopes());
      await expect(registry.connect(key).createAccount("mine", ethers.ZeroAddress))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(key.address);
    });

    it("refuses a caller that is a master key", async function () {
      const { registry, masterKeyA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(masterKeyA).createAccount("mine", ethers.ZeroAddress))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(masterKeyA.address);
    });

    it("refuses a name longer than MAX_STRING_BYTES", async function () {
      const { registry, ownerA } = await loadFixture(deployFixture);
      await expect(registry.connect(ownerA).createAccount("x".repeat(257), ethers.ZeroAddress))
        .to.be.revertedWithCustomError(registry, "StringTooLong")
        .withArgs(257n, 256n);
    });
  });

  describe("views", function () {
    it("getAccount reverts UnknownAccount for id 0", async function () {
      const { registry } = await loadFixture(deployFixture);
      await expect(registry.getAccount(0n))
        .to.be.revertedWithCustomError(registry, "UnknownAccount")
        .withArgs(0n);
    });

    it("getAccount reverts UnknownAccount past the last id", async function () {
      const { registry } = await loadFixture(twoAccountsFixture);
      await expect(registry.getAccount(3n))
        .to.be.revertedWithCustomError(registry, "UnknownAccount")
        .withArgs(3n);
    });

    it("getAccount counts groups, PKPs and keys", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      const account = await registry.getAccount(1n);
      expect([account.groupCount, account.pkpCount, account.keyCount]).to.deep.equal([2n, 2n, 1n]);
    });

    it("accountOfOwner is 0 for an address owning nothing", async function () {
      const { registry, outsider } = await loadFixture(twoAccountsFixture);
      expect(await registry.accountOfOwner(outsider.address)).to.equal(0n);
    });

    it("forwarder returns the trusted forwarder", async function () {
      const { registry, forwarder } = await loadFixture(deployFixture);
      expect(await registry.forwarder()).to.equal(await forwarder.getAddress());
      expect(await registry.isTrustedForwarder(await forwarder.getAddress())).to.equal(true);
    });

    it("registryVersion answers the layout version, 3", async function () {
      const { registry } = await loadFixture(deployFixture);
      expect([await registry.registryVersion(), await registry.REGISTRY_VERSION()]).to.deep.equal([3n, 3n]);
    });

    it("the constructor refuses a zero forwarder", async function () {
      const { registry } = await loadFixture(deployFixture);
      const factory = await ethers.getContractFactory("AccountRegistry");
      await expect(factory.deploy(ethers.ZeroAddress, ethers.ZeroAddress)).to.be.revertedWithCustomError(
        registry,
        "ZeroAddress",
      );
    });

    it("binds PKP ids to its own address when deployed without a PKP id domain", async function () {
      const { registry } = await loadFixture(deployFixture);
      expect(await registry.pkpIdDomain()).to.equal(await registry.getAddress());
    });

    it("a registry continuing another's PKP id domain gives each account's PKPs the same ids", async function () {
      const { registry, forwarder } = await loadFixture(deployFixture);
      const [, , , , , owner] = await ethers.getSigners();
      const factory = await ethers.getContractFactory("AccountRegistry");
      const successor = await factory.deploy(await forwarder.getAddress(), await registry.getAddress());
      const ids = [];
      for (const r of [registry, successor]) {
        await r.connect(owner).createAccount("same", ethers.ZeroAddress);
        await r.connect(owner).createPkp("first", "");
        await r.connect(owner).createPkp("second", "");
        ids.push((await r.listPkps(1n, 0n, 10n))[0].map((p) => p.id));
      }
      expect([await successor.pkpIdDomain(), ids[1]]).to.deep.equal([await registry.getAddress(), ids[0]]);
    });
  });

  describe("two-step ownership transfer", function () {
    it("transferOwnership records the pending owner and changes nothing else", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const newOwner = keySigners[5];
      await expect(registry.connect(ownerA).transferOwnership(newOwner.address))
        .to.emit(registry, "OwnershipTransferStarted")
        .withArgs(1n, ownerA.address, newOwner.address);
      const account = await registry.getAccount(1n);
      expect([account.owner, account.pendingOwner]).to.deep.equal([ownerA.address, newOwner.address]);
    });

    it("the pending owner has no power before accepting", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const newOwner = keySigners[5];
      await registry.connect(ownerA).transferOwnership(newOwner.address);
      await expect(registry.connect(newOwner).createGroup("g", "", [], []))
        .to.be.revertedWithCustomError(registry, "NoAccount")
        .withArgs(newOwner.address);
    });

    it("the old owner keeps every power until acceptance", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).transferOwnership(keySigners[5].address);
      await expect(
        registry.connect(ownerA).addKey(keySigners[0].address, ethers.ZeroHash, "k", "", 0, ALL_SCOPES),
      ).to.emit(registry, "KeyAdded");
    });

    it("acceptOwnership moves the account to the pending owner", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const newOwner = keySigners[5];
      await registry.connect(ownerA).transferOwnership(newOwner.address);
      await expect(registry.connect(newOwner).acceptOwnership(1n))
        .to.emit(registry, "OwnershipTransferred")
        .withArgs(1n, ownerA.address, newOwner.address);
      const account = await registry.getAccount(1n);
      expect([account.owner, account.pendingOwner]).to.deep.equal([newOwner.address, ethers.ZeroAddress]);
      expect(await registry.accountOfOwner(newOwner.address)).to.equal(1n);
      expect(await registry.accountOfOwner(ownerA.address)).to.equal(0n);
    });

    it("the old owner loses owner-only powers after acceptance", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const newOwner = keySigners[5];
      await registry.connect(ownerA).transferOwnership(newOwner.address);
      await registry.connect(newOwner).acceptOwnership(1n);
      await expect(
        registry.connect(ownerA).addKey(keySigners[0].address, ethers.ZeroHash, "k", "", 0, ALL_SCOPES),
      )
        .to.be.revertedWithCustomError(registry, "NoAccount")
        .withArgs(ownerA.address);
    });

    it("the old owner loses execution in the account after acceptance", async function () {
      const { registry, ownerA, keySigners, pkpA1 } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).createGroup("g", "", [pkpA1], [CID_HELLO]);
      await registry.connect(ownerA).transferOwnership(keySigners[5].address);
      await registry.connect(keySigners[5]).acceptOwnership(1n);
      expect(await registry.canExecute(ownerA.address, cidHash(CID_HELLO), pkpA1)).to.equal(false);
      expect(await registry.canExecute(keySigners[5].address, cidHash(CID_HELLO), pkpA1)).to.equal(true);
    });

    it("the new owner has every owner-only power after acceptance", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const newOwner = keySigners[5];
      await registry.connect(ownerA).transferOwnership(newOwner.address);
      await registry.connect(newOwner).acceptOwnership(1n);
      await expect(
        registry.connect(newOwner).addKey(keySigners[0].address, ethers.ZeroHash, "k", "", 0, ALL_SCOPES),
      )
        .to.emit(registry, "KeyAdded")
        .withArgs(1n, keySigners[0].address, ethers.ZeroHash, "k", "", 0n, Object.values(ALL_SCOPES));
    });

    it("keys registered before the transfer keep working", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const [key] = keySigners;
      await grantKey(registry, ownerA, key, scopes({ CreateGroup: true }));
      await registry.connect(ownerA).transferOwnership(keySigners[5].address);
      await registry.connect(keySigners[5]).acceptOwnership(1n);
      await expect(registry.connect(key).createGroup("g", "", [], []))
        .to.emit(registry, "GroupCreated")
        .withArgs(1n, 3n, "g", "");
    });

    it("acceptOwnership is refused to anyone but the pending owner", async function () {
      const { registry, ownerA, outsider, keySigners } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).transferOwnership(keySigners[5].address);
      await expect(registry.connect(outsider).acceptOwnership(1n))
        .to.be.revertedWithCustomError(registry, "NotPendingOwner")
        .withArgs(outsider.address, 1n);
    });

    it("acceptOwnership without a pending transfer reverts NoPendingTransfer", async function () {
      const { registry, outsider } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(outsider).acceptOwnership(1n))
        .to.be.revertedWithCustomError(registry, "NoPendingTransfer")
        .withArgs(1n);
    });

    it("acceptOwnership of an unknown account reverts UnknownAccount", async function () {
      const { registry, outsider } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(outsider).acceptOwnership(9n))
        .to.be.revertedWithCustomError(registry, "UnknownAccount")
        .withArgs(9n);
    });

    it("acceptOwnership is refused if the pending owner took another role meanwhile", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      const newOwner = keySigners[5];
      await registry.connect(ownerA).transferOwnership(newOwner.address);
      await registry.connect(newOwner).createAccount("its own", ethers.ZeroAddress);
      await expect(registry.connect(newOwner).acceptOwnership(1n))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(newOwner.address);
    });

    it("transferOwnership refuses the zero address", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(
        registry.connect(ownerA).transferOwnership(ethers.ZeroAddress),
      ).to.be.revertedWithCustomError(registry, "ZeroAddress");
    });

    it("transferOwnership refuses an address that already owns an account", async function () {
      const { registry, ownerA, ownerB } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).transferOwnership(ownerB.address))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(ownerB.address);
    });

    it("transferOwnership refuses a usage key", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await grantKey(registry, ownerA, keySigners[0], scopes());
      await expect(registry.connect(ownerA).transferOwnership(keySigners[0].address))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(keySigners[0].address);
    });

    it("transferOwnership refuses a master key", async function () {
      const { registry, ownerA, masterKeyA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).transferOwnership(masterKeyA.address))
        .to.be.revertedWithCustomError(registry, "AddressInUse")
        .withArgs(masterKeyA.address);
    });

    it("a second transferOwnership replaces the pending owner", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).transferOwnership(keySigners[5].address);
      await registry.connect(ownerA).transferOwnership(keySigners[6].address);
      await expect(registry.connect(keySigners[5]).acceptOwnership(1n))
        .to.be.revertedWithCustomError(registry, "NotPendingOwner")
        .withArgs(keySigners[5].address, 1n);
    });

    it("cancelOwnershipTransfer withdraws the proposal", async function () {
      const { registry, ownerA, keySigners } = await loadFixture(twoAccountsFixture);
      await registry.connect(ownerA).transferOwnership(keySigners[5].address);
      await expect(registry.connect(ownerA).cancelOwnershipTransfer())
        .to.emit(registry, "OwnershipTransferCanceled")
        .withArgs(1n, keySigners[5].address);
      await expect(registry.connect(keySigners[5]).acceptOwnership(1n))
        .to.be.revertedWithCustomError(registry, "NoPendingTransfer")
        .withArgs(1n);
    });

    it("cancelOwnershipTransfer without a pending transfer reverts NoPendingTransfer", async function () {
      const { registry, ownerA } = await loadFixture(twoAccountsFixture);
      await expect(registry.connect(ownerA).cancelOwnershipTransfer())
        .to.be.revertedWithCustomError(registry, "NoPendingTransfer")
        .withArgs(1n);
    });
  });
});
