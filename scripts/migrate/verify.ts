/**
 * Checks, on chain, that an account rebuilt in the new registry reads the same as in the old one: the
 * header (name, master key, counters), every PKP (id, name, description, in order), every live group (id,
 * member counts, in listGroups order, signing policy), every PKP and CID the groups ever named, and every copied key's
 * scopes and expiration. Returns the differences (empty when the account matches).
 */
import { Contract, type Interface, type Provider } from "ethers";
import { AccountRegistry__factory } from "../../typechain-types";
import { scopesOf } from "./keyScopes";
import type { AccountPlan } from "./plan";

const PAGE = 100n;

async function pages<T>(read: (offset: bigint) => Promise<[T[], bigint]>): Promise<T[]> {
  const items: T[] = [];
  for (let offset = 0n; ; offset += PAGE) {
    const [page, total] = await read(offset);
    items.push(...page);
    if (offset + PAGE >= total) return items;
  }
}

interface PkpInfo {
  id: string;
  name: string;
  description: string;
}

interface GroupInfo {
  id: bigint;
  pkpCount: bigint;
  actionCount: bigint;
}

const json = (value: unknown) =>
  JSON.stringify(value, (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v));

export async function verifyAccount(
  provider: Provider,
  oldRegistry: { address: string; iface: Interface },
  newRegistryAddress: string,
  plan: AccountPlan,
): Promise<string[]> {
  const before = new Contract(oldRegistry.address, oldRegistry.iface, provider);
  const after = new Contract(newRegistryAddress, AccountRegistry__factory.createInterface(), provider);
  const id = plan.accountId;
  const problems: string[] = [];
  const same = (what: string, a: unknown, b: unknown) => {
    if (json(a) !== json(b)) problems.push(`account ${id}: ${what} differs: old ${json(a)}, new ${json(b)}`);
  };

  const o = await before.getAccount(id);
  const n = await after.getAccount(id);
  same(
    "name, master key, group and PKP counters",
    [o.name, o.masterKey, o.groupCount, o.pkpCount],
    [n.name, n.masterKey, n.groupCount, n.pkpCount],
  );
  same(
    "key count (expired keys are not copied)",
    BigInt(o.keyCount) - BigInt(plan.skippedKeys.length),
    n.keyCount,
  );

  const pkpsOf = async (r: Contract) =>
    (await pages<PkpInfo>((offset) => r.listPkps(id, offset, PAGE))).map((p) => [
      p.id,
      p.name,
      p.description,
    ]);
  same("PKPs", await pkpsOf(before), await pkpsOf(after));

  const groupsOf = async (r: Contract) =>
    (await pages<GroupInfo>((offset) => r.listGroups(id, offset, PAGE))).map((g) => [
      g.id,
      g.pkpCount,
      g.actionCount,
    ]);
  const groups = await groupsOf(before);
  same("live groups", groups, await groupsOf(after));

  // A registry from before signing policies has no groupPolicy view: its groups had none to copy.
  const hasPolicies = oldRegistry.iface.getFunction("groupPolicy") !== null;
  for (const [groupId] of groups) {
    if (hasPolicies)
      same(
        `signing policy of group ${groupId}`,
        await before.groupPolicy(id, groupId),
        await after.groupPolicy(id, groupId),
      );
    for (const pkpId of plan.pkpIdsNamed)
      same(
        `PKP ${pkpId} in group ${groupId}`,
        await before.isPkpInGroup(id, groupId, pkpId),
        await after.isPkpInGroup(id, groupId, pkpId),
      );
    for (const cidHash of plan.cidHashesNamed)
      same(
        `CID ${cidHash} in group ${groupId}`,
        await before.isActionInGroup(id, groupId, cidHash),
        await after.isActionInGroup(id, groupId, cidHash),
      );
  }

  for (const write of plan.writes.filter((w) => w.fn === "addKey")) {
    const key = write.args[0] as string;
    const o = await before.getKey(key);
    const n = await after.getKey(key);
    same(
      `key ${key} (account, expiration, scopes)`,
      [o.accountId, o.expiration, scopesOf(o.scopes)],
      [n.accountId, n.expiration, scopesOf(n.scopes)],
    );
  }
  return problems;
}
