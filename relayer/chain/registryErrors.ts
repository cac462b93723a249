/**
 * Turns the registry's custom errors (decoded from a simulation's revert data) into typed API errors
 * that say exactly what is missing, e.g. MissingScope → 403 missing_scope naming scope and group.
 */
import { ErrorDescription, getAddress } from "ethers";
import { ApiError } from "../errors";
import { forwarderInterface, registryInterface, SCOPE_NAMES } from "./abi";

export interface RevertContext {
  /** The address the write was signed as (usage key, or the service-managed owner). */
  principal: string;
  kind: "account" | "usage";
}

/**
 * Refusals the relayer also makes from the permission cache before writing (the policy's pre-checks in
 * policy.ts, routes/groups.ts, routes/rotation.ts), built here once so that a request answers the same
 * code, message and details whether the cache or the registry caught it.
 */
export const registryRefusal = {
  /** `groupId` 0: an account-wide scope, or the wildcard a new group's initial members need. */
  missingScope: (scope: string, groupId: number) =>
    new ApiError(
      "missing_scope",
      groupId === 0
        ? `The key lacks the ${scope} scope.`
        : `The key lacks the ${scope} scope on group ${groupId}.`,
      { details: { scope, group_id: groupId } },
    ),
  groupNotFound: (groupId: number) =>
    new ApiError("group_not_found", `Group ${groupId} does not exist in this account.`, {
      details: { group_id: groupId },
    }),
  ownerOnly: () => new ApiError("owner_only", "Only the account owner may do this; a usage key never can."),
  usageKeyExpired: (id: string, expiration: number) =>
    new ApiError("usage_key_expired", `Usage key ${id} expired at ${expiration}.`, {
      details: { id, expiration },
    }),
  pkpNotFound: (pkpId: string) =>
    new ApiError("pkp_not_found", `PKP ${pkpId} does not exist in this account.`, {
      details: { pkp_id: pkpId },
    }),
  pkpAlreadyInGroup: (groupId: number, pkpId: string) =>
    new ApiError("pkp_already_in_group", `PKP ${pkpId} is already in group ${groupId}.`, {
      details: { group_id: groupId, pkp_id: pkpId },
    }),
  pkpNotInGroup: (groupId: number, pkpId: string) =>
    new ApiError("pkp_not_in_group", `PKP ${pkpId} is not in group ${groupId}.`, {
      details: { group_id: groupId, pkp_id: pkpId },
    }),
  actionAlreadyInGroup: (groupId: number, cid: string) =>
    new ApiError("action_already_in_group", `Action ${cid} is already in group ${groupId}.`, {
      details: { group_id: groupId, cid },
    }),
  actionNotInGroup: (groupId: number, cid: string) =>
    new ApiError("action_not_in_group", `Action ${cid} is not in group ${groupId}.`, {
      details: { group_id: groupId, cid },
    }),
};

export function decodeRevert(data: string): ErrorDescription | null {
  try {
    return registryInterface.parseError(data) ?? forwarderInterface.parseError(data);
  } catch {
    return null;
  }
}

export function mapRevert(data: string | undefined, ctx: RevertContext): ApiError {
  const parsed = data ? decodeRevert(data) : null;
  if (!parsed) {
    return new ApiError("write_reverted", "The registry refused the write without a known reason.", {
      details: { revert_data: data ?? null },
    });
  }
  const a = parsed.args;
  const same = (x: unknown) => typeof x === "string" && getAddress(x) === getAddress(ctx.principal);
  switch (parsed.name) {
    case "NoAccount":
    case "NotOwner":
      if (ctx.kind === "account")
        return new ApiError(
          "account_chain_secured",
          "The account's owner is no longer the service-managed address; the account key cannot write.",
        );
      return parsed.name === "NoAccount"
        ? new ApiError("unknown_api_key", "The key is not a live key of any account.")
        : registryRefusal.ownerOnly();
    case "MissingScope":
      return registryRefusal.missingScope(SCOPE_NAMES[Number(a[2])] ?? `scope ${a[2]}`, Number(a[3]));
    case "AddressInUse":
      return new ApiError("address_in_use", `Address ${a[0]} already owns an account or is a key.`, {
        details: { address: a[0] },
      });
    case "ZeroAddress":
      return new ApiError("invalid_address", "The zero address is not allowed here.");
    case "UnknownAccount":
      return new ApiError("account_not_found", `Account ${a[0]} does not exist.`);
    case "UnknownKey":
      return new ApiError("usage_key_not_found", `No live usage key ${a[0]} in this account.`, {
        details: { id: a[0] },
      });
    case "KeyExpired":
      if (same(a[0])) return new ApiError("api_key_expired", "The key has expired.");
      return registryRefusal.usageKeyExpired(a[0], Number(a[1]));
    case "ExpirationInPast":
      return new ApiError("expiration_in_past", `Expiration ${a[0]} is not in the future.`);
    case "UnknownGroup":
      return registryRefusal.groupNotFound(Number(a[1]));
    case "PkpNotInAccount":
      return registryRefusal.pkpNotFound(a[0]);
    case "PkpAlreadyInGroup":
      return registryRefusal.pkpAlreadyInGroup(Number(a[0]), a[1]);
    case "PkpNotInGroup":
      return registryRefusal.pkpNotInGroup(Number(a[0]), a[1]);
    case "ActionAlreadyInGroup":
      return registryRefusal.actionAlreadyInGroup(Number(a[0]), a[1]);
    case "ActionNotInGroup":
      return registryRefusal.actionNotInGroup(Number(a[0]), a[1]);
    case "EmptyCid":
      return new ApiError("invalid_cid", "A CID is empty.");
    case "CidTooLong":
      return new ApiError("string_too_long", `A CID is ${a[0]} bytes long; the maximum is ${a[1]}.`, {
        details: { max: Number(a[1]) },
      });
    case "StringTooLong":
      return new ApiError(
        "string_too_long",
        `A name or description is ${a[0]} bytes long; the maximum is ${a[1]}.`,
        { details: { max: Number(a[1]) } },
      );
    case "TooManyMembers":
      return new ApiError("too_many_members", `Group ${a[0]} would exceed ${a[1]} members.`, {
        details: { group_id: Number(a[0]), max: Number(a[1]) },
      });
    case "TooManyGroups":
      return new ApiError("too_many_groups", `Account ${a[0]} already has the maximum of ${a[1]} groups.`, {
        details: { max: Number(a[1]) },
      });
    case "TooManyEntries":
      return new ApiError("too_many_entries", `A list has ${a[0]} entries; the maximum is ${a[1]}.`, {
        details: { max: Number(a[1]) },
      });
    case "ScopesMismatch":
      return new ApiError(
        "rotation_scopes_changed",
        `The scopes of usage key ${a[0]} changed while it was being rotated; nothing was written.`,
        { details: { id: a[0] } },
      );
    case "OverlapTooLong":
      return new ApiError(
        "overlap_too_long",
        `An overlap of ${a[0]} seconds is longer than the maximum of ${a[1]}.`,
        { details: { field: "overlap_seconds", max: Number(a[1]) } },
      );
    case "NotPendingOwner":
    case "NoPendingTransfer":
      return new ApiError("no_pending_transfer", "The account has no pending ownership transfer.");
    case "ERC2771ForwarderExpiredRequest":
    case "ERC2771ForwarderInvalidSigner":
      // Our own signing raced with another write of the same principal; the sender retries these.
      return new ApiError("write_reverted", "The forward request was stale; retry.", {
        details: { reason: parsed.name },
      });
    default:
      return new ApiError("write_reverted", `The registry refused the write (${parsed.name}).`, {
        details: { reason: parsed.name },
      });
  }
}
