/**
 * scripts/migrate: an old (layout 2) registry's accounts rebuilt in a new registry that continues its PKP id
 * domain, on Hardhat's network. The old registry is the real layout-2 bytecode (test/fixtures).
 */
import fs from "node:fs";
import path from "node:path";
import { expect } from "chai";
import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import {
  Contract,
  Interface,
  NonceManager,
  Wallet,
  type Signer,
  type TransactionRequest,
  type TransactionResponse,
} from "ethers";
import { deploySigil } from "../../scripts/deploy";
import { AccountRegistry__factory, SigilForwarder__factory } from "../../typechain-types";
import {
  emptyState,
  migrateRegistry,
  walletRequestSigner,
  type MigrationState,
} from "../../scripts/migrate/migrate";
import { CID_EMPTY, CID_HELLO, cidHash, scopes } from "./fixtures";

const V2 = JSON.parse(
  fs.readFileSync(path.join(__dirname, "..", "fixtures", "accountRegistryV2.json"), "utf8"),
) as { abi: string[]; bytecode: string };
const v2Interface = new Interface(V2.abi);
const CID_Z = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG";

/**
 * A layout-2 registry with: account 1 in API mode (owner `apiOwner`, whom the migrator can sign for), with
 * three PKPs, a deleted group between two live ones, members added and removed, a key with scopes, a
 * removed key and a key that has expired; account 2 owned by a wallet the migrator cannot sign for.
 */
async function oldRegistryFixture() {
  const [deployer, apiOwner, walletOwner, masterKey, ...others] = await ethers.getSigners();
  const forwarder = await new SigilForwarder__factory(deployer).deploy();
  const deployBlock = await ethers.provider.getBlockNumber();
  const factory = new ethers.ContractFactory(V2.abi, V2.bytecode, deployer);
  const old = (await factory.deploy(await forwarder.getAddress())) as Contract;
  await old.waitForDeployment();
  const a = old.connect(apiOwner) as Contract;
  await a.createAccount("api account", masterKey.address);
  for (const name of ["one", "two", "three"]) await a.createPkp(name, `${name} description`);
  const pkps = (await old.listPkps(1n, 0n, 10n))[0].map((p: { id: string }) => p.id) as string[];
  await a.createGroup("first", "", [pkps[0], pkps[1]], [CID_HELLO, CID_EMPTY]);
  await a.createGroup("deleted", "", [], []);
  await a.createGroup("third", "", [pkps[2]], [CID_Z]);
  const [kept, removed, expiring] = [others[0], others[1], others[2]];
  // Scoped on group 2 too, which is deleted below: the copy leaves it out, as getKey does.
  await a.addKey(
    kept.address,
    ethers.id("kept"),
    "kept",
    "",
    0n,
    scopes({ Execute: [1, 2], ManageActions: [3], CreatePkp: true }),
  );
  await a.deleteGroup(2n);
  await a.removeAction(1n, CID_EMPTY);
  await a.removePkp(1n, pkps[0]);
  await a.updateKeyMetadata(kept.address, "kept, renamed", "now described");
  await a.addKey(removed.address, ethers.id("removed"), "removed", "", 0n, scopes({ Execute: [0] }));
  await a.removeKey(removed.address);
  await a.addKey(
    expiring.address,
    ethers.id("expiring"),
    "expiring",
    "",
    (await time.latest()) + 100,
    scopes(),
  );

  const b = old.connect(walletOwner) as Contract;
  await b.createAccount("wallet account", ethers.ZeroAddress);
  await b.createPkp("b one", "");
  await b.createGroup("b group", "", [], [CID_HELLO]);
  await b.addKey(others[3].address, ethers.ZeroHash, "b key", "", 0n, scopes({ Execute: [0] }));
  await time.increase(200);

  const next = await deploySigil(deployer, {
    continues: { pkpIdDomain: await old.getAddress(), forwarder: await forwarder.getAddress() },
  });
  const registry = AccountRegistry__factory.connect(next.registry, deployer);
  return {
    deployer,
    apiOwner,
    walletOwner,
    old,
    forwarder,
    deployBlock,
    registry,
    pkps,
    kept,
    expiring,
    others,
  };
}

type Fixture = Awaited<ReturnType<typeof oldRegistryFixture>>;

/** A payer that sends `batches` transactions, then fails: an interruption in the middle of an account. */
class InterruptingPayer extends NonceManager {
  constructor(
    signer: Signer,
    private batches: number,
  ) {
    super(signer);
  }

  override async sendTransaction(tx: TransactionRequest): Promise<TransactionResponse> {
    if (this.batches-- <= 0) throw new Error("interrupted");
    return super.sendTransaction(tx);
  }
}

async function migrate(
  f: Fixture,
  state: MigrationState = emptyState(),
  stopAfter?: bigint,
  payer: Signer = f.deployer,
  batchSize?: number,
) {
  return migrateRegistry({
    provider: ethers.provider,
    payer,
    batchSize,
    old: { address: await f.old.getAddress(), iface: v2Interface, fromBlock: f.deployBlock },
    newRegistry: await f.registry.getAddress(),
    forwarder: await f.forwarder.getAddress(),
    ownerSigner: (owner) =>
      owner === f.apiOwner.address ? walletRequestSigner(asWallet(f.apiOwner)) : undefined,
    state,
    save: () => {},
    progress: (accountId) => {
      if (accountId === stopAfter) throw new Error("interrupted");
    },
  });
}

/** The message a promise rejects with ("resolved" when it does not). */
async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return (error as Error).message;
  }
  return "resolved";
}

/** Hardhat's signers sign typed data like a Wallet; the migrator only needs address and signTypedData. */
function asWallet(signer: Awaited<ReturnType<typeof ethers.getSigners>>[number]): Wallet {
  return signer as unknown as Wallet;
}

async function migratedFixture() {
  const f = await oldRegistryFixture();
  const outcomes = await migrate(f);
  return { ...f, outcomes };
}

/**
 * A current-layout registry as the old one (it has signing policies): account 1 with three groups, the
 * first's policy set then replaced, the second's set then cleared, the third's never set.
 */
async function policyRegistryFixture() {
  const [deployer, apiOwner, masterKey] = await ethers.getSigners();
  const before = await deploySigil(deployer);
  const old = AccountRegistry__factory.connect(before.registry, apiOwner);
  await old.createAccount("policies", masterKey.address);
  for (const name of ["replaced", "cleared", "none"]) await old.createGroup(name, "", [], []);
  await old.setGroupPolicy(1n, CID_HELLO);
  await old.setGroupPolicy(1n, CID_Z);
  await old.setGroupPolicy(2n, CID_EMPTY);
  await old.setGroupPolicy(2n, "");
  const next = await deploySigil(deployer, {
    continues: { pkpIdDomain: before.registry, forwarder: before.forwarder },
  });
  const f = {
    deployer,
    apiOwner,
    old: old as unknown as Contract,
    forwarder: SigilForwarder__factory.connect(before.forwarder, deployer),
    deployBlock: before.deployBlock,
    registry: AccountRegistry__factory.connect(next.registry, deployer),
  };
  await migrateRegistry({
    provider: ethers.provider,
    payer: deployer,
    old: {
      address: before.registry,
      iface: AccountRegistry__factory.createInterface(),
      fromBlock: f.deployBlock,
    },
    newRegistry: next.registry,
    forwarder: before.forwarder,
    ownerSigner: (owner) =>
      owner === apiOwner.address ? walletRequestSigner(asWallet(apiOwner)) : undefined,
    state: emptyState(),
    save: () => {},
    progress: () => {},
  });
  return f;
}

describe("Registry migration (scripts/migrate)", function () {
  it("gives every PKP of every account the same id in the new registry", async function () {
    const { old, registry } = await loadFixture(migratedFixture);
    for (const id of [1n, 2n]) {
      const ids = async (r: Contract | typeof registry) =>
        (await r.listPkps(id, 0n, 10n))[0].map((p: { id: string }) => p.id);
      expect(await ids(registry)).to.deep.equal(await ids(old));
    }
  });

  it("keeps group ids, members and the deleted group's place", async function () {
    const { registry, pkps } = await loadFixture(migratedFixture);
    expect([
      (await registry.getAccount(1n)).groupCount,
      (await registry.listGroups(1n, 0n, 10n))[0].map((g) => [g.id, g.pkpCount, g.actionCount]),
      await registry.isPkpInGroup(1n, 1n, pkps[1]),
      await registry.isActionInGroup(1n, 3n, cidHash(CID_Z)),
      await registry.isActionInGroup(1n, 1n, cidHash(CID_EMPTY)),
    ]).to.deep.equal([
      3n,
      [
        [1n, 1n, 1n],
        [3n, 1n, 1n],
      ],
      true,
      true,
      false,
    ]);
  });

  it("copies the keys that still count with their scopes, and reports the expired one", async function () {
    const { old, registry, kept, expiring, outcomes } = await loadFixture(migratedFixture);
    const scopesOf = async (r: Contract | typeof registry) =>
      (await r.getKey(kept.address)).scopes.toString();
    expect([
      await scopesOf(registry),
      outcomes[0].skippedKeys.map((s) => s.key),
      await registry.accountOfKey(expiring.address),
    ]).to.deep.equal([await scopesOf(old), [expiring.address], 0n]);
  });

  it("lets a migrated usage key execute exactly where it could before", async function () {
    const { old, registry, kept, pkps } = await loadFixture(migratedFixture);
    const answers = async (r: Contract | typeof registry) => {
      const out = [];
      for (const cid of [CID_HELLO, CID_EMPTY, CID_Z])
        for (const pkp of pkps) out.push(await r.canExecute(kept.address, cidHash(cid), pkp));
      return out;
    };
    expect(await answers(registry)).to.deep.equal(await answers(old));
  });

  it("rebuilds an API-mode account as its own owner, and proposes a wallet's account to its owner", async function () {
    const { registry, apiOwner, walletOwner, outcomes } = await loadFixture(migratedFixture);
    const [api, wallet] = [await registry.getAccount(1n), await registry.getAccount(2n)];
    expect([
      api.owner,
      api.pendingOwner,
      wallet.pendingOwner,
      outcomes.map((o) => o.awaitingAcceptance),
    ]).to.deep.equal([
      apiOwner.address,
      ethers.ZeroAddress,
      walletOwner.address,
      [undefined, walletOwner.address],
    ]);
  });

  it("hands a wallet's account over with one acceptOwnership, leaving the temporary owner nothing", async function () {
    const { registry, walletOwner } = await loadFixture(migratedFixture);
    const temporary = (await registry.getAccount(2n)).owner;
    await registry.connect(walletOwner).acceptOwnership(2n);
    expect([(await registry.getAccount(2n)).owner, await registry.accountOfOwner(temporary)]).to.deep.equal([
      walletOwner.address,
      0n,
    ]);
  });

  it("resumes after an interruption, skipping the accounts already rebuilt", async function () {
    const f = await loadFixture(oldRegistryFixture);
    const state = emptyState();
    expect(await rejection(migrate(f, state, 1n))).to.equal("interrupted");
    const outcomes = await migrate(f, state);
    expect([
      state.done,
      outcomes.map((o) => o.accountId),
      (await f.registry.getAccount(2n)).name,
    ]).to.deep.equal([["1", "2"], [2n], "wallet account"]);
  });

  it("resumes an account interrupted between two batches at the write its owner's nonce reached", async function () {
    const f = await loadFixture(oldRegistryFixture);
    const state = emptyState();
    const payer = new InterruptingPayer(f.deployer, 1);
    expect(await rejection(migrate(f, state, undefined, payer, 2))).to.equal("interrupted");
    const written = (await f.registry.getAccount(1n)).pkpCount;
    await migrate(f, state, undefined, f.deployer, 2);
    expect([written, (await f.registry.getAccount(1n)).pkpCount, state.done]).to.deep.equal([
      1n,
      3n,
      ["1", "2"],
    ]);
  });

  it("refuses to go on when an account does not read the same (a registry that does not continue the PKP ids)", async function () {
    const f = await loadFixture(oldRegistryFixture);
    const fresh = await deploySigil(f.deployer, {
      continues: { pkpIdDomain: ethers.ZeroAddress, forwarder: await f.forwarder.getAddress() },
    });
    const other = { ...f, registry: AccountRegistry__factory.connect(fresh.registry, f.deployer) };
    expect(await rejection(migrate(other))).to.match(
      /^account 1 does not read the same after migration:\naccount 1: PKPs differs/,
    );
  });

  it("carries each group's signing policy over, the last one set (a cleared policy stays clear)", async function () {
    const { registry } = await loadFixture(policyRegistryFixture);
    expect([
      await registry.groupPolicy(1n, 1n),
      await registry.groupPolicy(1n, 2n),
      await registry.groupPolicy(1n, 3n),
    ]).to.deep.equal([cidHash(CID_Z), ethers.ZeroHash, ethers.ZeroHash]);
  });
});
