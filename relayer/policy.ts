/**
 * The relayer's one authorization policy: every rule that decides whether an authenticated caller may
 * write, execute or manage, for the route pre-checks, the executor's in-run callbacks and the mode checks.
 * Nothing else in the relayer decides authorization; routes and callbacks ask here.
 *
 * The rules are the registry's (docs/contracts.md, "Who may call what"), read from the permission cache,
 * so a refusal costs no gas and names the missing scope precisely. The registry stays authoritative: a
 * write allowed here is checked again on chain, and test/relayer/policy.property.test.ts checks that the
 * two agree for generated keys, scopes, groups, PKPs and requests.
 *
 *  - The account key acts as the account's owner, which it can only do while the owner is still the
 *    service-managed address derived from its master key (API mode). Once the owner is another address
 *    (ChainSecured), the account key can neither write nor execute: 409 account_chain_secured.
 *  - A usage key needs the scope. Account-wide scopes (pkp:create, group:create, group:delete) are flags;
 *    a per-group scope on id 0 is the wildcard, and on any other id counts only while that id is a live
 *    group of the key's account (a deleted group's scope entries grant nothing).
 *  - A usage key executes only in some live group it may execute in that lists the action's CID and, when
 *    the request names one, the PKP. The owner (account key in API mode) runs any code, inline or by CID,
 *    with any PKP of its own account, no group needed (owner-direct, docs/api.md).
 *  - Key management and ownership transfer are the owner's only: 403 owner_only for a usage key.
 */
import type { Enclave } from "../enclave";
import { FLAG_SCOPES, GROUP_SCOPES } from "../vocabulary/scopes";
import { SCOPE_NAMES, Scope } from "./chain/abi";
import { registryRefusal } from "./chain/registryErrors";
import type { AccountProjection, GroupRecord, KeyRecord } from "./permissions/projection";
import { ApiError } from "./errors";

export type ScopeIndex = (typeof Scope)[keyof typeof Scope];

export type AccountMode = "api" | "chain_secured";

/** What the policy needs to know about an authenticated caller (a subset of the AuthContext). */
export interface Caller {
  principal: { kind: "account" | "usage" };
  mode: AccountMode;
  account: AccountProjection;
  /** The usage key's record (kind "usage"). */
  key?: KeyRecord;
  /** Set for the on-chain owner signed in with a wallet (read-only; relayer/http/siwe.ts). */
  ownerSession?: unknown;
}

/**
 * API mode while the owner is the service-managed address of the account's master key. The enclave
 * memoises owner addresses (public data), so this is a map lookup on every request.
 */
export function accountMode(enclave: Enclave, account: AccountProjection): AccountMode {
  return account.masterKey !== null && account.owner === enclave.ownerAddress(account.masterKey)
    ? "api"
    : "chain_secured";
}

const PER_GROUP = new Set<number>(GROUP_SCOPES.map((s) => s.index));

/** The registry's `hasScope` for a live key of `account`. */
export function keyHasScope(
  key: KeyRecord,
  account: AccountProjection,
  scope: ScopeIndex,
  groupId: number,
): boolean {
  const flag = FLAG_SCOPES.find((w) => w.index === scope);
  if (flag) return key.scopes[flag.struct];
  const ids = perGroupIds(key, scope);
  if (groupId === 0) return ids.includes(0);
  return account.groups.has(groupId) && (ids.includes(0) || ids.includes(groupId));
}

function perGroupIds(key: KeyRecord, scope: ScopeIndex): number[] {
  const words = GROUP_SCOPES.find((w) => w.index === scope);
  return words ? key.scopes[words.struct] : [];
}

/**
 * Why the caller may not make a write needing `scope` on `groupId` (0 for account-wide scopes and for a new
 * group's initial members, which need the wildcard), or null if it may.
 */
export function writeRefusal(caller: Caller, scope: ScopeIndex, groupId: number): ApiError | null {
  if (caller.principal.kind === "account") return apiModeRefusal(caller);
  if (caller.key && keyHasScope(caller.key, caller.account, scope, groupId)) return null;
  // An account-wide scope is refused as the registry refuses it: on group 0, whatever group was asked.
  return registryRefusal.missingScope(SCOPE_NAMES[scope], PER_GROUP.has(scope) ? groupId : 0);
}

export function canWrite(caller: Caller, scope: ScopeIndex, groupId: number): boolean {
  return writeRefusal(caller, scope, groupId) === null;
}

/** Throws the refusal of `writeRefusal`. */
export function requireWriteScope(caller: Caller, scope: ScopeIndex, groupId: number): void {
  const refusal = writeRefusal(caller, scope, groupId);
  if (refusal) throw refusal;
}

/** Owner-only operations (key management, ownership transfer): the account key in API mode only. */
export function requireOwner(caller: Caller): void {
  if (caller.principal.kind !== "account") throw registryRefusal.ownerOnly();
  const refusal = apiModeRefusal(caller);
  if (refusal) throw refusal;
}

/**
 * Who may rotate a usage key (POST /rotate_usage_api_key): the owner only, like every key-management
 * write. A usage key may not rotate even itself. The registry has no manage-keys scope and `rotateKey`
 * is owner-only on chain, and the relayer never holds the account key to sign as the owner on a usage
 * key's behalf; a leaked usage key therefore cannot mint a successor that outlives its revocation.
 */
export function requireRotator(caller: Caller): void {
  if (caller.principal.kind !== "account")
    throw new ApiError(
      "owner_only",
      "Only the account owner may rotate usage keys; a usage key cannot rotate itself, whatever its scopes.",
    );
  requireOwner(caller);
}

/**
 * Owner-only reads (the usage-key list): the account key in API mode, or the on-chain owner itself
 * signed in with a wallet in any mode (it can only read; its changes are its own transactions).
 */
export function requireOwnerRead(caller: Caller): void {
  if (caller.principal.kind === "account" && caller.ownerSession) return;
  requireOwner(caller);
}

/** The account key acts for the account only in API mode. */
function apiModeRefusal(caller: Caller): ApiError | null {
  if (caller.mode === "api") return null;
  return new ApiError(
    "account_chain_secured",
    "This account is ChainSecured: its owner is no longer the service-managed address, so the account key cannot write or execute for it. Use the owner wallet (path B), or a usage key the owner registered.",
  );
}

/** The group, or 404 group_not_found (route pre-check: a precise answer before the scope check). */
export function requireGroup(account: AccountProjection, groupId: number): GroupRecord {
  const g = account.groups.get(groupId);
  if (!g) throw registryRefusal.groupNotFound(groupId);
  return g;
}

/** The live groups this caller may execute in. */
export function executableGroups(caller: Caller): GroupRecord[] {
  const groups = [...caller.account.groups.values()];
  if (caller.principal.kind === "account") return caller.mode === "api" ? groups : [];
  const ids = caller.key?.scopes.executeInGroups ?? [];
  if (ids.includes(0)) return groups;
  return groups.filter((g) => ids.includes(g.id));
}

/** The registry's `canExecute` (with a PKP) / `canExecuteAction` (without) for this caller. */
export function canExecute(caller: Caller, cidHash: string, pkpId?: string): boolean {
  return executableGroups(caller).some(
    (g) => g.actions.has(cidHash) && (pkpId === undefined || g.pkps.has(pkpId)),
  );
}

/**
 * The groups whose signing policies bind a run of `cidHash` by this caller with `pkpId`
 * (docs/policies.md, "Which policies apply"): for a usage key, the groups it may execute in that list
 * both the action and the PKP (the groups that grant the run); for the owner, which needs no group,
 * every group that holds the PKP, so a policy binds a PKP whoever runs it. Empty: no policy applies.
 */
export function grantingGroups(caller: Caller, cidHash: string, pkpId: string): GroupRecord[] {
  if (caller.principal.kind === "account")
    return [...caller.account.groups.values()].filter((g) => g.pkps.has(pkpId));
  return executableGroups(caller).filter((g) => g.actions.has(cidHash) && g.pkps.has(pkpId));
}

/**
 * Why the caller may not run action `cid` (with `pkpId`, if given), or null. Asked when a request arrives
 * and again by every key operation of the run against the cache as it is then, so a revocation or a
 * switch to ChainSecured processed mid-run stops the run's next key operation.
 */
export function executionRefusal(
  caller: Caller,
  cid: string,
  cidHash: string,
  pkpId?: string,
): ApiError | null {
  if (caller.principal.kind === "account") {
    const refusal = apiModeRefusal(caller);
    if (refusal) return refusal;
    // Owner-direct (background.md §5.4: the owner may invoke actions with PKPs, no scope required): the account key
    // runs any code, inline or by CID, with any PKP of its own account, no group needed.
    if (pkpId === undefined || caller.account.pkps.has(pkpId)) return null;
    return new ApiError(
      "not_authorized_to_execute",
      `PKP ${pkpId} is not a PKP of this account: the account key runs code with its own account's PKPs only.`,
      { details: { cid, pkp_id: pkpId } },
    );
  }
  if (canExecute(caller, cidHash, pkpId)) return null;
  return usageKeyRefusal(caller, cid, cidHash, pkpId);
}

/**
 * A usage key's not_authorized_to_execute, saying what would make the run allowed: which group to add
 * the CID or the PKP to (a group the key already executes in), with the CLI command the owner runs.
 */
function usageKeyRefusal(caller: Caller, cid: string, cidHash: string, pkpId?: string): ApiError {
  const what = pkpId
    ? `No group that this key may execute in lists both action ${cid} and PKP ${pkpId}.`
    : `No group that this key may execute in lists action ${cid}.`;
  const groups = executableGroups(caller);
  const base = { cid, pkp_id: pkpId ?? null };
  if (groups.length === 0) {
    const id = caller.key?.address ?? "<key id>";
    const command = `npx sigil keys update ${id} --name <name> --execute <group id> (repeat the key's other permissions: update replaces them all)`;
    return new ApiError(
      "not_authorized_to_execute",
      `${what} This key may execute in no group: the account owner grants it execute on a group that lists the action${pkpId ? " and the PKP" : ""}: ${command}.`,
      { details: { ...base, group_id: null, missing: ["execute"], command } },
    );
  }
  const hasAction = (g: GroupRecord) => g.actions.has(cidHash);
  const hasPkp = (g: GroupRecord) => pkpId === undefined || g.pkps.has(pkpId);
  const g = groups.find(hasPkp) ?? groups.find(hasAction) ?? groups[0];
  const missing = [...(hasAction(g) ? [] : ["action"]), ...(hasPkp(g) ? [] : ["pkp"])];
  const command =
    `npx sigil groups add ${g.id}` +
    (missing.includes("action") ? ` --action ${cid}` : "") +
    (missing.includes("pkp") ? ` --pkp ${pkpId}` : "");
  const label = g.name ? `group ${g.id} (${JSON.stringify(g.name)})` : `group ${g.id}`;
  const items = missing.map((m) => (m === "action" ? "the action" : "the PKP")).join(" and ");
  return new ApiError(
    "not_authorized_to_execute",
    `${what} Add ${items} to ${label}, where this key may execute: ${command} (with the account key, or a key with that group's scopes).`,
    { details: { ...base, group_id: g.id, missing, command } },
  );
}

/**
 * Who may pin code (POST /actions, or have the relayer fetch a CID from IPFS and store it): the account
 * key, in any mode (pins are off chain and billed to the account), or a usage key that can use stored
 * code, i.e. one that may manage the actions of some group or execute in some group. A key with
 * neither scope has no use for stored code, and must not be able to fill the account's pin quota and
 * spend its credits (docs/actions.md, "Pinning: quota and price").
 */
export function canPin(auth: Pick<Caller, "principal" | "key">): boolean {
  if (auth.principal.kind === "account") return true;
  const s = auth.key?.scopes;
  return s !== undefined && (s.manageIpfsIdsInGroups.length > 0 || s.executeInGroups.length > 0);
}
