/**
 * A small TypeScript model of the registry's permission rules (docs/background.md §5.4, design §3, docs/background.md), used by the
 * property tests: every write returns either "ok" or the exact custom error (name and arguments) the contract
 * must revert with, checked in the same order as the contract. Expiration, bounds and string lengths are left
 * out: the example tests cover them; this model is about who may do what to which group.
 */

export const SCOPE = {
  CreatePkp: 0n,
  CreateGroup: 1n,
  DeleteGroup: 2n,
  Execute: 3n,
  ManageActions: 4n,
  AddPkp: 5n,
  RemovePkp: 6n,
};
const BIT = { Execute: 1, ManageActions: 2, AddPkp: 4, RemovePkp: 8 } as const;
type PerGroup = keyof typeof BIT;

export interface Grant {
  canCreateGroups: boolean;
  canDeleteGroups: boolean;
  canCreatePkps: boolean;
  manageIpfsIdsInGroups: bigint[];
  addPkpToGroups: bigint[];
  removePkpFromGroups: bigint[];
  executeInGroups: bigint[];
}

export type Outcome = { ok: true } | { ok: false; error: string; args: unknown[] };
const ok: Outcome = { ok: true };
const fail = (error: string, ...args: unknown[]): Outcome => ({ ok: false, error, args });

interface GroupState {
  pkps: Set<string>;
  cids: Set<string>;
  /** The signing policy's CID, when the group has one. */
  policy?: string;
}
interface AccountState {
  groupCount: bigint;
  groups: Map<bigint, GroupState>;
  pkpCount: bigint;
}
interface KeyState {
  account: bigint;
  grant: Grant;
  /** Per group id (0 = wildcard) the 4-bit mask. Entries of deleted groups stay, as in the contract. */
  masks: Map<bigint, number>;
}

export class RegistryModel {
  private readonly accounts = new Map<bigint, AccountState>();
  private readonly owners = new Map<string, bigint>();
  private readonly keys = new Map<string, KeyState>();
  /** pkpId → account, filled by `createPkp` with the id the caller computed. */
  private readonly pkpAccount = new Map<string, bigint>();

  /** Mirror of createAccount for the fixture's accounts (no master key involved in the properties). */
  addAccount(accountId: bigint, owner: string, groupCount: bigint, pkps: string[]): void {
    const groups = new Map<bigint, GroupState>();
    for (let id = 1n; id <= groupCount; id++) groups.set(id, { pkps: new Set(), cids: new Set() });
    this.accounts.set(accountId, { groupCount, groups, pkpCount: BigInt(pkps.length) });
    this.owners.set(owner, accountId);
    for (const pkp of pkps) this.pkpAccount.set(pkp, accountId);
  }

  /** The id the next createPkp of `accountId` will get, as a counter (the caller hashes it). */
  pkpCounter(accountId: bigint): bigint {
    return this.accounts.get(accountId)!.pkpCount + 1n;
  }

  private resolve(caller: string): { account: bigint; isOwner: boolean } | Outcome {
    const owned = this.owners.get(caller);
    if (owned !== undefined) return { account: owned, isOwner: true };
    const key = this.keys.get(caller);
    if (!key) return fail("NoAccount", caller);
    return { account: key.account, isOwner: false };
  }

  private keyAllows(caller: string, scope: keyof typeof SCOPE, groupId: bigint): boolean {
    const key = this.keys.get(caller)!;
    if (scope === "CreatePkp") return key.grant.canCreatePkps;
    if (scope === "CreateGroup") return key.grant.canCreateGroups;
    if (scope === "DeleteGroup") return key.grant.canDeleteGroups;
    const bit = BIT[scope as PerGroup];
    if (groupId === 0n) return ((key.masks.get(0n) ?? 0) & bit) !== 0;
    // A per-group scope counts only for a live group of the key's account (a deleted group's masks linger).
    if (!this.accounts.get(key.account)!.groups.has(groupId)) return false;
    return (((key.masks.get(0n) ?? 0) | (key.masks.get(groupId) ?? 0)) & bit) !== 0;
  }

  /** The caller's account if it is the owner or holds `scope` on `groupId`; else the contract's error. */
  private authorize(caller: string, scope: keyof typeof SCOPE, groupId: bigint): bigint | Outcome {
    const who = this.resolve(caller);
    if ("ok" in who) return who;
    if (!who.isOwner && !this.keyAllows(caller, scope, groupId)) {
      return fail(
        "MissingScope",
        caller,
        who.account,
        SCOPE[scope],
        PER_GROUP_SCOPES.has(scope) ? groupId : 0n,
      );
    }
    return who.account;
  }

  private requireOwner(caller: string): bigint | Outcome {
    const who = this.resolve(caller);
    if ("ok" in who) return who;
    if (!who.isOwner) return fail("NotOwner", caller, who.account);
    return who.account;
  }

  private group(account: bigint, groupId: bigint): GroupState | Outcome {
    return this.accounts.get(account)!.groups.get(groupId) ?? fail("UnknownGroup", account, groupId);
  }

  createPkp(caller: string, pkpIdOf: (account: bigint, counter: bigint) => string): Outcome {
    const account = this.authorize(caller, "CreatePkp", 0n);
    if (typeof account !== "bigint") return account;
    const state = this.accounts.get(account)!;
    state.pkpCount += 1n;
    this.pkpAccount.set(pkpIdOf(account, state.pkpCount), account);
    return ok;
  }

  createGroup(caller: string, pkps: string[], cids: string[]): Outcome {
    const who = this.resolve(caller);
    if ("ok" in who) return who;
    const account = who.account;
    if (!who.isOwner && !this.keyAllows(caller, "CreateGroup", 0n))
      return fail("MissingScope", caller, account, SCOPE.CreateGroup, 0n);
    const state = this.accounts.get(account)!;
    const groupId = state.groupCount + 1n;
    if (pkps.length && !who.isOwner && !this.keyAllows(caller, "AddPkp", groupId)) {
      return fail("MissingScope", caller, account, SCOPE.AddPkp, groupId);
    }
    if (cids.length && !who.isOwner && !this.keyAllows(caller, "ManageActions", groupId)) {
      return fail("MissingScope", caller, account, SCOPE.ManageActions, groupId);
    }
    const group: GroupState = { pkps: new Set(), cids: new Set() };
    for (const pkp of pkps) {
      if (this.pkpAccount.get(pkp) !== account) return fail("PkpNotInAccount", pkp, account);
      if (group.pkps.has(pkp)) return fail("PkpAlreadyInGroup", groupId, pkp);
      group.pkps.add(pkp);
    }
    for (const cid of cids) {
      if (group.cids.has(cid)) return fail("ActionAlreadyInGroup", groupId, cid);
      group.cids.add(cid);
    }
    state.groupCount = groupId;
    state.groups.set(groupId, group);
    return ok;
  }

  deleteGroup(caller: string, groupId: bigint): Outcome {
    const account = this.authorize(caller, "DeleteGroup", groupId);
    if (typeof account !== "bigint") return account;
    const group = this.group(account, groupId);
    if ("ok" in group) return group;
    this.accounts.get(account)!.groups.delete(groupId);
    return ok;
  }

  addAction(caller: string, groupId: bigint, cid: string): Outcome {
    const account = this.authorize(caller, "ManageActions", groupId);
    if (typeof account !== "bigint") return account;
    const group = this.group(account, groupId);
    if ("ok" in group) return group;
    if (group.cids.has(cid)) return fail("ActionAlreadyInGroup", groupId, cid);
    group.cids.add(cid);
    return ok;
  }

  removeAction(caller: string, groupId: bigint, cid: string): Outcome {
    const account = this.authorize(caller, "ManageActions", groupId);
    if (typeof account !== "bigint") return account;
    const group = this.group(account, groupId);
    if ("ok" in group) return group;
    if (!group.cids.delete(cid)) return fail("ActionNotInGroup", groupId, cid);
    return ok;
  }

  /** setGroupPolicy: governed like addAction; "" clears. */
  setGroupPolicy(caller: string, groupId: bigint, cid: string): Outcome {
    const account = this.authorize(caller, "ManageActions", groupId);
    if (typeof account !== "bigint") return account;
    const group = this.group(account, groupId);
    if ("ok" in group) return group;
    group.policy = cid === "" ? undefined : cid;
    return ok;
  }

  /** The policy CID of a live group, or undefined (no policy, or no such live group). */
  policyOf(account: bigint, groupId: bigint): string | undefined {
    return this.accounts.get(account)?.groups.get(groupId)?.policy;
  }

  addPkp(caller: string, groupId: bigint, pkp: string): Outcome {
    const account = this.authorize(caller, "AddPkp", groupId);
    if (typeof account !== "bigint") return account;
    const group = this.group(account, groupId);
    if ("ok" in group) return group;
    if (this.pkpAccount.get(pkp) !== account) return fail("PkpNotInAccount", pkp, account);
    if (group.pkps.has(pkp)) return fail("PkpAlreadyInGroup", groupId, pkp);
    group.pkps.add(pkp);
    return ok;
  }

  removePkp(caller: string, groupId: bigint, pkp: string): Outcome {
    const account = this.authorize(caller, "RemovePkp", groupId);
    if (typeof account !== "bigint") return account;
    const group = this.group(account, groupId);
    if ("ok" in group) return group;
    if (!group.pkps.delete(pkp)) return fail("PkpNotInGroup", groupId, pkp);
    return ok;
  }

  private checkGrant(account: bigint, grant: Grant): Outcome | undefined {
    const groups = this.accounts.get(account)!.groups;
    for (const ids of [
      grant.manageIpfsIdsInGroups,
      grant.addPkpToGroups,
      grant.removePkpFromGroups,
      grant.executeInGroups,
    ]) {
      for (const id of ids) if (id !== 0n && !groups.has(id)) return fail("UnknownGroup", account, id);
    }
    return undefined;
  }

  private static masksOf(grant: Grant): Map<bigint, number> {
    const masks = new Map<bigint, number>();
    const set = (ids: bigint[], bit: number) =>
      ids.forEach((id) => masks.set(id, (masks.get(id) ?? 0) | bit));
    set(grant.executeInGroups, BIT.Execute);
    set(grant.manageIpfsIdsInGroups, BIT.ManageActions);
    set(grant.addPkpToGroups, BIT.AddPkp);
    set(grant.removePkpFromGroups, BIT.RemovePkp);
    return masks;
  }

  addKey(caller: string, key: string, grant: Grant): Outcome {
    const account = this.requireOwner(caller);
    if (typeof account !== "bigint") return account;
    if (this.owners.has(key) || this.keys.has(key)) return fail("AddressInUse", key);
    const invalid = this.checkGrant(account, grant);
    if (invalid) return invalid;
    this.keys.set(key, { account, grant, masks: RegistryModel.masksOf(grant) });
    return ok;
  }

  updateKey(caller: string, key: string, grant: Grant): Outcome {
    const account = this.requireOwner(caller);
    if (typeof account !== "bigint") return account;
    if (this.keys.get(key)?.account !== account) return fail("UnknownKey", key);
    const invalid = this.checkGrant(account, grant);
    if (invalid) return invalid;
    this.keys.set(key, { account, grant, masks: RegistryModel.masksOf(grant) });
    return ok;
  }

  removeKey(caller: string, key: string): Outcome {
    const account = this.requireOwner(caller);
    if (typeof account !== "bigint") return account;
    if (this.keys.get(key)?.account !== account) return fail("UnknownKey", key);
    this.keys.delete(key);
    return ok;
  }

  /** docs/background.md §4.3: some live group the caller may execute in lists the CID (and the PKP when given). */
  canExecute(caller: string, cid: string, pkp?: string): boolean {
    let account = this.owners.get(caller);
    let mayUse: (groupId: bigint) => boolean = () => true;
    if (account === undefined) {
      const key = this.keys.get(caller);
      if (!key) return false;
      account = key.account;
      mayUse = (groupId) => (((key.masks.get(0n) ?? 0) | (key.masks.get(groupId) ?? 0)) & BIT.Execute) !== 0;
    }
    for (const [groupId, group] of this.accounts.get(account)!.groups) {
      if (mayUse(groupId) && group.cids.has(cid) && (pkp === undefined || group.pkps.has(pkp))) return true;
    }
    return false;
  }
}

const PER_GROUP_SCOPES = new Set<keyof typeof SCOPE>(["Execute", "ManageActions", "AddPkp", "RemovePkp"]);
