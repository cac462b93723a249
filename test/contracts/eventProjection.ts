/**
 * The registry's state rebuilt from its events alone, the way an off-chain indexer (the relayer's permission
 * cache) must be able to: if a state change emitted no event, or an event lacked a field, the projection and
 * the views disagree. `expectProjectionMatchesViews` compares the two for every account, key and group (what
 * the registry keeps only in events, names and CID strings, has no view to compare with; the relayer's
 * replay of them is tested against the API).
 */
import { expect } from "chai";
import type { AccountRegistry } from "../../typechain-types";
import type { Log } from "ethers";

interface ProjectedKey {
  accountId: bigint;
  keyHash: string;
  name: string;
  description: string;
  expiration: bigint;
  flags: [boolean, boolean, boolean];
  /** executeInGroups, manageIpfsIdsInGroups, addPkpToGroups, removePkpFromGroups: sorted, deduplicated. */
  ids: [string[], string[], string[], string[]];
}

interface ProjectedGroup {
  name: string;
  description: string;
  pkps: Set<string>;
  actions: Map<string, string>;
  /** The signing policy's CID hash from the last GroupPolicySet (zero when cleared or never set). */
  policy: string;
}

interface ProjectedAccount {
  owner: string;
  pendingOwner: string;
  masterKey: string;
  name: string;
  groupCount: bigint;
  pkpCount: bigint;
}

const ZERO = "0x0000000000000000000000000000000000000000";
const ZERO_HASH = "0x0000000000000000000000000000000000000000000000000000000000000000";

const idSet = (ids: readonly bigint[]): string[] =>
  [...new Set(ids.map((id) => id.toString()))].sort((a, b) => Number(a) - Number(b));

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function scopesOf(s: any): Pick<ProjectedKey, "flags" | "ids"> {
  return {
    flags: [s.canCreateGroups, s.canDeleteGroups, s.canCreatePkps],
    ids: [
      idSet(s.executeInGroups),
      idSet(s.manageIpfsIdsInGroups),
      idSet(s.addPkpToGroups),
      idSet(s.removePkpFromGroups),
    ],
  };
}

export async function projectFromEvents(registry: AccountRegistry) {
  const accounts = new Map<bigint, ProjectedAccount>();
  const keys = new Map<string, ProjectedKey>();
  const groups = new Map<string, ProjectedGroup>();
  const groupKey = (accountId: bigint, groupId: bigint) => `${accountId}:${groupId}`;
  const seenPkps = new Map<bigint, Set<string>>();
  const seenCids = new Map<bigint, Set<string>>();
  const seen = (m: Map<bigint, Set<string>>, accountId: bigint, id: string) =>
    m.set(accountId, (m.get(accountId) ?? new Set()).add(id));

  const logs = await registry.queryFilter("*" as never, 0, "latest");
  for (const log of logs) {
    if (!("args" in log)) throw new Error(`undecodable registry log in block ${(log as Log).blockNumber}`);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const a = log.args as any;
    const account = accounts.get(a.accountId);
    switch (log.eventName) {
      case "AccountCreated":
        accounts.set(a.accountId, {
          owner: a.owner,
          pendingOwner: ZERO,
          masterKey: a.masterKey,
          name: a.name,
          groupCount: 0n,
          pkpCount: 0n,
        });
        break;
      case "OwnershipTransferStarted":
        account!.pendingOwner = a.newOwner;
        break;
      case "OwnershipTransferCanceled":
        account!.pendingOwner = ZERO;
        break;
      case "OwnershipTransferred":
        account!.owner = a.newOwner;
        account!.pendingOwner = ZERO;
        break;
      case "KeyAdded":
        keys.set(a.key, {
          accountId: a.accountId,
          keyHash: a.keyHash,
          name: a.name,
          description: a.description,
          expiration: a.expiration,
          ...scopesOf(a.scopes),
        });
        break;
      case "KeyUpdated":
        Object.assign(keys.get(a.key)!, {
          name: a.name,
          description: a.description,
          expiration: a.expiration,
          ...scopesOf(a.scopes),
        });
        break;
      case "KeyMetadataUpdated":
        Object.assign(keys.get(a.key)!, { name: a.name, description: a.description });
        break;
      case "KeyRemoved":
        keys.delete(a.key);
        break;
      case "PkpCreated":
        account!.pkpCount++;
        break;
      case "GroupCreated":
        account!.groupCount = a.groupId;
        groups.set(groupKey(a.accountId, a.groupId), {
          name: a.name,
          description: a.description,
          pkps: new Set(),
          actions: new Map(),
          policy: ZERO_HASH,
        });
        break;
      case "GroupPolicySet":
        groups.get(groupKey(a.accountId, a.groupId))!.policy = a.cidHash;
        break;
      case "GroupDeleted":
        groups.delete(groupKey(a.accountId, a.groupId));
        break;
      case "ActionAdded":
        groups.get(groupKey(a.accountId, a.groupId))!.actions.set(a.cidHash, a.cid);
        seen(seenCids, a.accountId, a.cidHash);
        break;
      case "ActionRemoved":
        groups.get(groupKey(a.accountId, a.groupId))!.actions.delete(a.cidHash);
        break;
      case "PkpAdded":
        groups.get(groupKey(a.accountId, a.groupId))!.pkps.add(a.pkpId);
        seen(seenPkps, a.accountId, a.pkpId);
        break;
      case "PkpRemoved":
        groups.get(groupKey(a.accountId, a.groupId))!.pkps.delete(a.pkpId);
        break;
      default:
        throw new Error(`the projection does not know event ${log.eventName}`);
    }
  }
  return { accounts, keys, groups, seenPkps, seenCids };
}

/** Every view of every account, of each address in `keyAddresses`, and of every live group equals the projection. */
export async function expectProjectionMatchesViews(
  registry: AccountRegistry,
  keyAddresses: readonly string[],
): Promise<void> {
  const { accounts, keys, groups, seenPkps, seenCids } = await projectFromEvents(registry);

  for (const [id, p] of accounts) {
    const view = await registry.getAccount(id);
    const keyCount = [...keys.values()].filter((k) => k.accountId === id).length;
    expect(
      {
        owner: view.owner,
        pendingOwner: view.pendingOwner,
        masterKey: view.masterKey,
        name: view.name,
        groupCount: view.groupCount,
        pkpCount: view.pkpCount,
        keyCount: view.keyCount,
      },
      `account ${id}`,
    ).to.deep.equal({ ...p, keyCount: BigInt(keyCount) });
    expect(await registry.accountOfOwner(p.owner), `owner of ${id}`).to.equal(id);

    const [live] = await registry.listGroups(id, 0, 100);
    const projected = [...groups.keys()].filter((k) => k.startsWith(`${id}:`)).sort();
    expect(live.map((g) => `${id}:${g.id}`).sort(), `live groups of ${id}`).to.deep.equal(projected);
    for (const g of live) {
      const pg = groups.get(`${id}:${g.id}`)!;
      expect([g.pkpCount, g.actionCount], `member counts of ${id}:${g.id}`).to.deep.equal([
        BigInt(pg.pkps.size),
        BigInt(pg.actions.size),
      ]);
      expect(await registry.groupPolicy(id, g.id), `policy of ${id}:${g.id}`).to.equal(pg.policy);
      // Every PKP and CID the account ever named in a group: a member exactly when the events say so.
      for (const pkpId of seenPkps.get(id) ?? []) {
        expect(await registry.isPkpInGroup(id, g.id, pkpId), `PKP ${pkpId} in ${id}:${g.id}`).to.equal(
          pg.pkps.has(pkpId),
        );
      }
      for (const cidHash of seenCids.get(id) ?? []) {
        expect(await registry.isActionInGroup(id, g.id, cidHash), `CID ${cidHash} in ${id}:${g.id}`).to.equal(
          pg.actions.has(cidHash),
        );
      }
    }
  }

  for (const address of keyAddresses) {
    const p = keys.get(address);
    if (!p) {
      expect(await registry.accountOfKey(address), `key ${address} is absent`).to.equal(0n);
      continue;
    }
    const view = await registry.getKey(address);
    // The view lists only ids that still count: the wildcard and live groups of the key's account.
    const counts = (ids: string[]) => ids.filter((g) => g === "0" || groups.has(`${p.accountId}:${g}`));
    expect(
      { accountId: view.accountId, expiration: view.expiration, ...scopesOf(view.scopes) },
      `key ${address}`,
    ).to.deep.equal({
      accountId: p.accountId,
      expiration: p.expiration,
      flags: p.flags,
      ids: p.ids.map(counts),
    });
  }
}
