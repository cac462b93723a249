/**
 * Scope pre-checks from the permission cache (DESIGN.md section 4 step 2): precise 403s without spending
 * gas. The registry stays authoritative: a write that passes here is still checked on chain. These are
 * the same rules as the contract (SPEC 5.4): the owner may do everything; a usage key needs the scope,
 * and group id 0 in any of the four arrays is the wildcard for every group.
 */
import { SCOPE_NAMES, Scope } from "./chain/abi";
import type { AccountProjection, GroupRecord, KeyRecord } from "./permissions/projection";
import type { AuthContext } from "./auth";
import { ApiError } from "./errors";

type ScopeIndex = (typeof Scope)[keyof typeof Scope];

export function keyHasScope(key: KeyRecord, scope: ScopeIndex, groupId: number): boolean {
  const s = key.scopes;
  switch (scope) {
    case Scope.CreatePkp:
      return s.canCreatePkps;
    case Scope.CreateGroup:
      return s.canCreateGroups;
    case Scope.DeleteGroup:
      return s.canDeleteGroups;
    case Scope.Execute:
      return s.executeInGroups.includes(0) || s.executeInGroups.includes(groupId);
    case Scope.ManageActions:
      return s.manageIpfsIdsInGroups.includes(0) || s.manageIpfsIdsInGroups.includes(groupId);
    case Scope.AddPkp:
      return s.addPkpToGroups.includes(0) || s.addPkpToGroups.includes(groupId);
    case Scope.RemovePkp:
      return s.removePkpFromGroups.includes(0) || s.removePkpFromGroups.includes(groupId);
  }
  return false;
}

/**
 * Throws unless the caller may make a write needing `scope` on `groupId` (0 = account-wide). The account
 * key writes as the owner, which only works while the account is in API mode.
 */
export function requireWriteScope(auth: AuthContext, scope: ScopeIndex, groupId: number): void {
  if (auth.principal.kind === "account") {
    requireApiMode(auth);
    return;
  }
  if (!auth.key || !keyHasScope(auth.key, scope, groupId)) {
    const name = SCOPE_NAMES[scope];
    throw new ApiError(
      403,
      "missing_scope",
      groupId === 0
        ? `The key lacks the ${name} scope.`
        : `The key lacks the ${name} scope on group ${groupId}.`,
      {
        details: { scope: name, group_id: groupId },
      },
    );
  }
}

/** Owner-only operations (key management, ownership transfer): account key in API mode only. */
export function requireOwner(auth: AuthContext): void {
  if (auth.principal.kind !== "account")
    throw new ApiError(403, "owner_only", "Only the account owner may do this; a usage key never can.");
  requireApiMode(auth);
}

export function requireApiMode(auth: AuthContext): void {
  if (auth.mode !== "api") {
    throw new ApiError(
      409,
      "account_chain_secured",
      "This account is ChainSecured: its owner is no longer the service-managed address, so the account key cannot act for it. Use the owner wallet (path B).",
    );
  }
}

export function requireGroup(account: AccountProjection, groupId: number): GroupRecord {
  const g = account.groups.get(groupId);
  if (!g)
    throw new ApiError(404, "group_not_found", `Group ${groupId} does not exist in this account.`, {
      details: { group_id: groupId },
    });
  return g;
}

/** The groups this caller may execute in (SPEC 4.3). */
export function executableGroups(
  auth: Pick<AuthContext, "principal" | "mode" | "account" | "key">,
): GroupRecord[] {
  const groups = [...auth.account.groups.values()];
  if (auth.principal.kind === "account") return auth.mode === "api" ? groups : [];
  const ids = auth.key?.scopes.executeInGroups ?? [];
  if (ids.includes(0)) return groups;
  return groups.filter((g) => ids.includes(g.id));
}

/** Some group the caller may execute in lists the CID (by hash) and, if given, the PKP. */
export function canExecute(
  auth: Pick<AuthContext, "principal" | "mode" | "account" | "key">,
  cidHash: string,
  pkpId?: string,
): boolean {
  return executableGroups(auth).some(
    (g) => g.actions.has(cidHash) && (pkpId === undefined || g.pkps.has(pkpId)),
  );
}

/**
 * Who may pin code (POST /actions, or have the relayer fetch a CID from IPFS and store it): the account
 * key, in any mode (pins are off chain and billed to the account), or a usage key that can use stored
 * code, i.e. one that may manage the actions of some group or execute in some group. A key with
 * neither scope has no use for stored code, and must not be able to fill the account's pin quota and
 * spend its credits (docs/actions.md, "Pinning: quota and price").
 */
export function canPin(auth: Pick<AuthContext, "principal" | "key">): boolean {
  if (auth.principal.kind === "account") return true;
  const s = auth.key?.scopes;
  return s !== undefined && (s.manageIpfsIdsInGroups.length > 0 || s.executeInGroups.length > 0);
}
