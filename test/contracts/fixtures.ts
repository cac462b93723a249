/**
 * Shared fixtures and helpers for the registry tests. Fixtures are loaded with `loadFixture`, so every test
 * starts from the same snapshot and no state leaks between tests.
 */
import { ethers } from "hardhat";
import { mine, time } from "@nomicfoundation/hardhat-network-helpers";
import type { HardhatEthersSigner } from "@nomicfoundation/hardhat-ethers/signers";
import { deploySigil } from "../../scripts/deploy";
import {
  AccountRegistry,
  AccountRegistry__factory,
  SigilForwarder,
  SigilForwarder__factory,
} from "../../typechain-types";
import type { IAccountRegistry } from "../../typechain-types/contracts/AccountRegistry";
import { emptyAccount, replayAccount } from "../../relayer/permissions/accountHistory";
import type { AccountProjection } from "../../relayer/permissions/projection";

/** The `Scope` enum of IAccountRegistry, by name. */
export const Scope = {
  CreatePkp: 0,
  CreateGroup: 1,
  DeleteGroup: 2,
  Execute: 3,
  ManageActions: 4,
  AddPkp: 5,
  RemovePkp: 6,
} as const;
export type ScopeName = keyof typeof Scope;
export const SCOPE_NAMES = Object.keys(Scope) as ScopeName[];
export const ACCOUNT_WIDE: ScopeName[] = ["CreatePkp", "CreateGroup", "DeleteGroup"];
export const PER_GROUP: ScopeName[] = ["Execute", "ManageActions", "AddPkp", "RemovePkp"];

/** Real CIDv0 strings (see TOOLCHAIN.md: "hello world\n" and the empty file). */
export const CID_HELLO = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
export const CID_EMPTY = "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH";
export const cidHash = (cid: string): string => ethers.keccak256(ethers.toUtf8Bytes(cid));

export type KeyScopes = IAccountRegistry.KeyScopesStruct;

/** Scopes in the shape of the contract's struct, everything off unless given. */
export type Grant = Partial<Record<ScopeName, boolean | Array<number | bigint>>>;

export function scopes(grant: Grant = {}): KeyScopes {
  const ids = (name: ScopeName): Array<number | bigint> => {
    const value = grant[name];
    return Array.isArray(value) ? value : [];
  };
  return {
    canCreateGroups: grant.CreateGroup === true,
    canDeleteGroups: grant.DeleteGroup === true,
    canCreatePkps: grant.CreatePkp === true,
    manageIpfsIdsInGroups: ids("ManageActions"),
    addPkpToGroups: ids("AddPkp"),
    removePkpFromGroups: ids("RemovePkp"),
    executeInGroups: ids("Execute"),
  };
}

/** Every scope, per-group ones through the wildcard. */
export const ALL_SCOPES = scopes({
  CreatePkp: true,
  CreateGroup: true,
  DeleteGroup: true,
  Execute: [0],
  ManageActions: [0],
  AddPkp: [0],
  RemovePkp: [0],
});

/** Every scope except `missing`; per-group ones through the wildcard. */
export function allScopesExcept(missing: ScopeName): KeyScopes {
  const grant: Grant = {};
  for (const name of ACCOUNT_WIDE) if (name !== missing) grant[name] = true;
  for (const name of PER_GROUP) if (name !== missing) grant[name] = [0];
  return scopes(grant);
}

/** The PKP id the registry assigns: keccak256(abi.encode(chainid, registry, accountId, counter)). */
export function expectedPkpId(chainId: bigint, registry: string, accountId: bigint, counter: bigint): string {
  return ethers.keccak256(
    ethers.AbiCoder.defaultAbiCoder().encode(
      ["uint256", "address", "uint64", "uint256"],
      [chainId, registry, accountId, counter],
    ),
  );
}

/** A deterministic address nobody holds a key for (master keys, unknown callers in views). */
export const labelAddress = (label: string): string =>
  ethers.getAddress(ethers.dataSlice(ethers.id(label), 12));

export async function deployFixture() {
  const [deployer, ownerA, ownerB, relayer, outsider, ...keySigners] = await ethers.getSigners();
  const deployment = await deploySigil(deployer);
  const registry: AccountRegistry = AccountRegistry__factory.connect(deployment.registry, deployer);
  const forwarder: SigilForwarder = SigilForwarder__factory.connect(deployment.forwarder, deployer);
  return { deployment, registry, forwarder, deployer, ownerA, ownerB, relayer, outsider, keySigners };
}

/**
 * Two accounts. A (id 1, with a master key) has groups 1 ("target") and 2 ("other") and PKPs pkpA1, pkpA2;
 * B (id 2, from a wallet) has group 1 and PKP pkpB1. Because B has no group 2, B's keys calling on group 2
 * prove that a wildcard never reaches A's groups.
 */
export async function twoAccountsFixture() {
  const base = await deployFixture();
  const { registry, ownerA, ownerB, deployment, keySigners } = base;
  // A signer, so tests can show that the master key itself has no power on chain.
  const masterKeyA = keySigners[keySigners.length - 1];
  await registry.connect(ownerA).createAccount("Account A", masterKeyA.address);
  await registry.connect(ownerB).createAccount("Account B", ethers.ZeroAddress);
  await registry.connect(ownerA).createGroup("target", "the group under test", [], []);
  await registry.connect(ownerA).createGroup("other", "a second group of A", [], []);
  await registry.connect(ownerB).createGroup("B's group", "", [], []);
  await registry.connect(ownerA).createPkp("pkp A1", "");
  await registry.connect(ownerA).createPkp("pkp A2", "");
  await registry.connect(ownerB).createPkp("pkp B1", "");
  const chainId = BigInt(deployment.chainId);
  return {
    ...base,
    masterKeyA,
    accountA: 1n,
    accountB: 2n,
    target: 1n,
    other: 2n,
    groupB: 1n,
    pkpA1: expectedPkpId(chainId, deployment.registry, 1n, 1n),
    pkpA2: expectedPkpId(chainId, deployment.registry, 1n, 2n),
    pkpB1: expectedPkpId(chainId, deployment.registry, 2n, 1n),
  };
}

export type TwoAccounts = Awaited<ReturnType<typeof twoAccountsFixture>>;

/** The id the next `createPkp` of `accountId` will return. */
export async function nextPkpId(ctx: TwoAccounts, accountId: bigint): Promise<string> {
  const account = await ctx.registry.getAccount(accountId);
  return expectedPkpId(
    BigInt(ctx.deployment.chainId),
    ctx.deployment.registry,
    accountId,
    account.pkpCount + 1n,
  );
}

/** Register `key` under `owner`'s account with `grant`, no expiration. */
export async function grantKey(
  registry: AccountRegistry,
  owner: HardhatEthersSigner,
  key: HardhatEthersSigner | string,
  grant: KeyScopes,
  expiration = 0n,
): Promise<void> {
  const address = typeof key === "string" ? key : key.address;
  await registry.connect(owner).addKey(address, ethers.ZeroHash, "key", "", expiration, grant);
}

/**
 * Pin the chain clock: mine a block one second after the latest and return its timestamp. Fixtures are
 * snapshots, so without this "latest + 60" can already be in the past on a slow run (e.g. under coverage),
 * because the next block takes the wall clock.
 */
export async function pinnedNow(): Promise<bigint> {
  const now = BigInt(await time.latest()) + 1n;
  await time.setNextBlockTimestamp(now);
  await mine();
  return now;
}

/**
 * An account as a reader sees it: the registry's events replayed from block 0 (the relayer's and the Safe
 * tool's code path), with names, descriptions, CID strings and member lists, none of which the registry
 * stores.
 */
export async function readAccount(registry: AccountRegistry, accountId: bigint): Promise<AccountProjection> {
  const head = await ethers.provider.getBlockNumber();
  const acc = emptyAccount(Number(accountId));
  return replayAccount(ethers.provider, await registry.getAddress(), acc, 0, head);
}
