/**
 * The relayer's authorization policy (relayer/policy.ts) equals the registry's view. fast-check generates
 * an account (API mode or ChainSecured), PKPs, groups with members (some deleted afterwards), and usage
 * keys with scopes (the wildcard 0 included, granted before their groups were deleted), builds them on a
 * real registry on anvil, loads the account's projection with the real permission cache, and then asks
 * every request of the generated world both ways:
 *  - every scope on every group id (0, live, deleted, never created): `keyHasScope` against `hasScope`;
 *  - every write, simulated with eth_call as the address the relayer would sign as (the usage key, or the
 *    service-managed owner for the account key): `canWrite` against "the write does not revert with an
 *    authorization error" (MissingScope, NoAccount, NotOwner, KeyExpired);
 *  - every CID with every PKP and without one: `canExecute` against `canExecute` / `canExecuteAction`.
 * Each world is built after an evm_snapshot and reverted afterwards.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import fc from "fast-check";
import { keccak256, NonceManager, parseEther, toUtf8Bytes, Wallet, type JsonRpcProvider } from "ethers";
import { Enclave } from "../../enclave";
import { Scope } from "../../relayer/chain/abi";
import { RegistryReader, RegistryRevert } from "../../relayer/chain/registryReader";
import { PermissionCache } from "../../relayer/permissions/permissionCache";
import {
  accountMode,
  canExecute,
  canWrite,
  keyHasScope,
  type Caller,
  type ScopeIndex,
} from "../../relayer/policy";
import { deploySigil, type SigilDeployment } from "../../scripts/deploy";
import { AccountRegistry__factory, type AccountRegistry } from "../../typechain-types";
import { DEV_KEY, startChain, type TestChain } from "../helpers/anvil";
import { quietLogger, testProvider } from "../helpers/stack";

const CIDS = [
  "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
  "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o",
  "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
];
/** Reverts that mean "not authorized"; anything else (UnknownGroup, PkpNotInAccount, …) comes after. */
const AUTH_ERRORS = new Set(["MissingScope", "NoAccount", "NotOwner", "KeyExpired"]);
const SCOPES: ScopeIndex[] = Object.values(Scope);

interface World {
  chainSecured: boolean;
  pkpCount: number;
  groups: { pkps: number[]; cids: number[]; deleted: boolean }[];
  keys: {
    canCreateGroups: boolean;
    canDeleteGroups: boolean;
    canCreatePkps: boolean;
    /** Indexes into the group list, or -1 for the wildcard 0. */
    execute: number[];
    manage: number[];
    addPkp: number[];
    removePkp: number[];
  }[];
}

const MAX_GROUPS = 4;
const MAX_PKPS = 3;
const scopedOn = fc.uniqueArray(fc.integer({ min: -1, max: MAX_GROUPS - 1 }), { maxLength: 3 });
const worldArb: fc.Arbitrary<World> = fc.record({
  chainSecured: fc.boolean(),
  pkpCount: fc.integer({ min: 1, max: MAX_PKPS }),
  groups: fc.array(
    fc.record({
      pkps: fc.uniqueArray(fc.integer({ min: 0, max: MAX_PKPS - 1 }), { maxLength: 2 }),
      cids: fc.uniqueArray(fc.integer({ min: 0, max: CIDS.length - 2 }), { maxLength: 2 }),
      deleted: fc.boolean(),
    }),
    { minLength: 1, maxLength: MAX_GROUPS },
  ),
  keys: fc.array(
    fc.record({
      canCreateGroups: fc.boolean(),
      canDeleteGroups: fc.boolean(),
      canCreatePkps: fc.boolean(),
      execute: scopedOn,
      manage: scopedOn,
      addPkp: scopedOn,
      removePkp: scopedOn,
    }),
    { minLength: 1, maxLength: 3 },
  ),
});

describe("relayer: the authorization policy equals the registry's view (property)", function () {
  this.timeout(600_000);
  let chain: TestChain;
  let provider: JsonRpcProvider;
  let deployment: SigilDeployment;
  let registry: AccountRegistry;
  let reader: RegistryReader;
  const enclave = Enclave.fromRootKey(crypto.randomBytes(32).toString("hex"));

  before(async () => {
    chain = await startChain();
    provider = testProvider(chain.rpcUrl);
    deployment = await deploySigil(new NonceManager(new Wallet(DEV_KEY, provider)));
    registry = AccountRegistry__factory.connect(deployment.registry, provider);
    reader = new RegistryReader(provider, deployment.registry);
  });
  after(async () => {
    provider?.destroy();
    await chain?.stop();
  });

  /** A signer for any address: anvil sends for impersonated accounts (funded here). */
  async function actAs(address: string): Promise<AccountRegistry> {
    await provider.send("anvil_impersonateAccount", [address]);
    await provider.send("anvil_setBalance", [address, "0x" + parseEther("10").toString(16)]);
    return registry.connect(await provider.getSigner(address));
  }

  /** Whether the registry authorizes `data` sent by `from` (it may still refuse it for another reason). */
  async function chainAuthorizes(from: string, fn: string, args: unknown[]): Promise<boolean> {
    try {
      await reader.call(fn, args, undefined, from);
      return true;
    } catch (err) {
      if (!(err instanceof RegistryRevert)) throw err;
      return !AUTH_ERRORS.has(err.decoded?.name ?? "");
    }
  }

  /** The write each scope guards, on `groupId` (account-wide scopes ignore it, as the routes pass 0). */
  function writeFor(scope: ScopeIndex, groupId: number, pkpId: string): [string, unknown[]] | null {
    switch (scope) {
      case Scope.CreatePkp:
        return ["createPkp", ["p", ""]];
      case Scope.CreateGroup:
        return ["createGroup", ["g", "", [], []]];
      case Scope.DeleteGroup:
        return ["deleteGroup", [groupId]];
      case Scope.ManageActions:
        return ["addAction", [groupId, CIDS[CIDS.length - 1]]];
      case Scope.AddPkp:
        return ["addPkp", [groupId, pkpId]];
      case Scope.RemovePkp:
        return ["removePkp", [groupId, pkpId]];
      default:
        return null; // Execute: no write, checked through canExecute
    }
  }

  /** The group id the relayer's pre-check passes for a write on `groupId` (routes.ts: 0 for account-wide). */
  function relayerGroupArg(scope: ScopeIndex, groupId: number): number {
    return scope === Scope.CreatePkp || scope === Scope.CreateGroup || scope === Scope.DeleteGroup
      ? 0
      : groupId;
  }

  async function build(w: World) {
    const accountKey = enclave.generateAccountKey();
    const serviceOwner = enclave.ownerAddress(accountKey.address);
    const asOwner = await actAs(serviceOwner);
    await (await asOwner.createAccount("property", accountKey.address)).wait();
    const accountId = Number(await registry.accountOfOwner(serviceOwner));
    const pkps: string[] = [];
    for (let i = 0; i < w.pkpCount; i++) {
      const rc = await (await asOwner.createPkp(`p${i}`, "")).wait();
      pkps.push(registry.interface.parseLog(rc!.logs[0])!.args.pkpId as string);
    }
    const groupIds: number[] = [];
    for (const g of w.groups) {
      const members = g.pkps.filter((i) => i < pkps.length).map((i) => pkps[i]);
      const rc = await (
        await asOwner.createGroup(
          "g",
          "",
          members,
          g.cids.map((i) => CIDS[i]),
        )
      ).wait();
      groupIds.push(Number(registry.interface.parseLog(rc!.logs[0])!.args.groupId));
    }
    const ids = (picks: number[]) => [
      ...new Set(picks.filter((i) => i < groupIds.length).map((i) => (i === -1 ? 0 : groupIds[i]))),
    ];
    const usageKeys: string[] = [];
    for (const k of w.keys) {
      const gen = enclave.generateUsageKey();
      await (
        await asOwner.addKey(gen.address, gen.keyHash, "k", "", 0, {
          canCreateGroups: k.canCreateGroups,
          canDeleteGroups: k.canDeleteGroups,
          canCreatePkps: k.canCreatePkps,
          manageIpfsIdsInGroups: ids(k.manage),
          addPkpToGroups: ids(k.addPkp),
          removePkpFromGroups: ids(k.removePkp),
          executeInGroups: ids(k.execute),
        })
      ).wait();
      usageKeys.push(gen.address);
    }
    // Deleted after the keys were scoped on them: their scope entries linger in storage.
    for (let i = 0; i < w.groups.length; i++)
      if (w.groups[i].deleted) await (await asOwner.deleteGroup(groupIds[i])).wait();
    if (w.chainSecured) {
      const wallet = Wallet.createRandom().address;
      await (await asOwner.transferOwnership(wallet)).wait();
      await (await (await actAs(wallet)).acceptOwnership(accountId)).wait();
    }
    // A group id the account never had.
    const neverCreated = groupIds.length + 7;
    return { accountKey, serviceOwner, accountId, pkps, groupIds, neverCreated, usageKeys };
  }

  async function loadProjection(accountId: number) {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-policy-"));
    const cache = new PermissionCache({
      provider,
      reader,
      registry: deployment.registry,
      chainId: 31337,
      deployBlock: deployment.deployBlock,
      dataDir,
      pollIntervalMs: 1_000,
      logger: quietLogger(),
    });
    try {
      return await cache.account(accountId);
    } finally {
      await cache.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }

  it("decides every scope, write and execution as the registry does", async () => {
    let worlds = 0;
    let checks = 0;
    await fc.assert(
      fc.asyncProperty(worldArb, async (w) => {
        const snapshot = (await provider.send("evm_snapshot", [])) as string;
        try {
          const b = await build(w);
          const account = await loadProjection(b.accountId);
          const mode = accountMode(enclave, account);
          expect(mode).to.equal(w.chainSecured ? "chain_secured" : "api");
          const callers: { caller: Caller; signer: string }[] = [
            { caller: { principal: { kind: "account" }, mode, account }, signer: b.serviceOwner },
            ...b.usageKeys.map((address) => ({
              caller: {
                principal: { kind: "usage" as const },
                mode,
                account,
                key: account.keys.get(address)!,
              },
              signer: address,
            })),
          ];
          const groupIdsAsked = [0, ...b.groupIds, b.neverCreated];
          const pkp = b.pkps[0];
          for (const { caller, signer } of callers) {
            for (const scope of SCOPES) {
              for (const groupId of groupIdsAsked) {
                if (caller.key) {
                  const onChain = await registry.hasScope(signer, scope, groupId);
                  expect(
                    keyHasScope(caller.key, account, scope, groupId),
                    `hasScope ${scope} on ${groupId}`,
                  ).to.equal(onChain);
                  checks++;
                }
                const write = writeFor(scope, groupId, pkp);
                if (write) {
                  const onChain = await chainAuthorizes(signer, write[0], write[1]);
                  expect(
                    canWrite(caller, scope, relayerGroupArg(scope, groupId)),
                    `${caller.principal.kind} ${write[0]} on ${groupId}`,
                  ).to.equal(onChain);
                  checks++;
                }
              }
            }
            // A new group's initial members need the wildcard (the routes pass 0).
            for (const [scope, members] of [
              [Scope.AddPkp, [[pkp], []]],
              [Scope.ManageActions, [[], [CIDS[0]]]],
            ] as const) {
              const onChain = await chainAuthorizes(signer, "createGroup", ["g", "", ...members]);
              const relayer = canWrite(caller, Scope.CreateGroup, 0) && canWrite(caller, scope, 0);
              expect(relayer, `${caller.principal.kind} createGroup with members`).to.equal(onChain);
              checks++;
            }
            for (const cid of CIDS) {
              const hash = keccak256(toUtf8Bytes(cid));
              expect(canExecute(caller, hash), `canExecuteAction ${cid}`).to.equal(
                await registry.canExecuteAction(signer, hash),
              );
              checks++;
              for (const p of b.pkps) {
                expect(canExecute(caller, hash, p.toLowerCase()), `canExecute ${cid} ${p}`).to.equal(
                  await registry.canExecute(signer, hash, p),
                );
                checks++;
              }
            }
          }
          worlds++;
        } finally {
          await provider.send("evm_revert", [snapshot]);
        }
      }),
      {
        numRuns: Number(process.env.FC_RUNS ?? 20),
        seed: process.env.FC_SEED ? Number(process.env.FC_SEED) : 13,
      },
    );
    expect(worlds).to.equal(Number(process.env.FC_RUNS ?? 20));
    expect(checks).to.be.greaterThan(1_000);
  });
});
