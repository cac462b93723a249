/**
 * Registry log → webhook event. Pure: the same log gives the same event (id included) on every
 * instance and after every restart, which is what lets the outbox store each event once.
 */
import { createHash } from "node:crypto";
import { getAddress, type LogDescription } from "ethers";
import { listedScopes } from "../../vocabulary/scopes";
import { scopesFromStruct } from "../permissions/projection";
import type { EventPayload, EventType } from "./eventTypes";

export interface LogPosition {
  chainId: number;
  blockNumber: number;
  blockHash: string;
  transactionHash: string;
  logIndex: number;
  /** Unix seconds of the block. */
  blockTimestamp: number;
}

/** `evt_` + 32 hex digits of SHA-256 over chain id, transaction hash and log index. */
export function chainEventId(chainId: number, txHash: string, logIndex: number): string {
  const h = createHash("sha256").update(
    `sigil/webhook-event/v1:${chainId}:${txHash.toLowerCase()}:${logIndex}`,
  );
  return "evt_" + h.digest("hex").slice(0, 32);
}

/** What a KeyAdded / KeyUpdated says about the key's permissions, in the API's field names. */
function scopes(struct: unknown): Record<string, unknown> {
  return listedScopes(scopesFromStruct(struct as Parameters<typeof scopesFromStruct>[0]));
}

/**
 * The type and data of a registry event, or null for events no endpoint is told about
 * (AccountCreated: no endpoint can exist before its account). `cidOf` names the CID of an
 * ActionRemoved, whose log carries only the hash.
 */
export function describeLog(
  ev: LogDescription,
  cidOf: (cidHash: string) => string | null,
): { type: EventType; data: Record<string, unknown> } | null {
  const a = ev.args;
  const expiration = (v: unknown) => (Number(v) === 0 ? null : Number(v));
  switch (ev.name) {
    case "KeyAdded":
    case "KeyUpdated":
      // Both carry the key's whole record: its name, description, expiry and scopes.
      return {
        type: ev.name === "KeyAdded" ? "key.added" : "key.updated",
        data: {
          key_id: getAddress(a.key),
          name: a.name,
          description: a.description,
          expiration: expiration(a.expiration),
          ...scopes(a.scopes),
        },
      };
    case "KeyMetadataUpdated":
      // Same type as a scope change: subscribers care that the key's record changed; `metadata_only` says only name and description changed.
      return {
        type: "key.updated",
        data: { key_id: getAddress(a.key), name: a.name, description: a.description, metadata_only: true },
      };
    case "KeyRemoved":
      return { type: "key.removed", data: { key_id: getAddress(a.key) } };
    case "PkpCreated":
      return {
        type: "pkp.created",
        data: { pkp_id: (a.pkpId as string).toLowerCase(), name: a.name, description: a.description },
      };
    case "GroupCreated":
      return {
        type: "group.created",
        data: { group_id: Number(a.groupId), name: a.name, description: a.description },
      };
    case "GroupDeleted":
      return { type: "group.deleted", data: { group_id: Number(a.groupId) } };
    case "ActionAdded":
      return {
        type: "group.actions_changed",
        data: { group_id: Number(a.groupId), change: "added", cid: a.cid, cid_hash: lower(a.cidHash) },
      };
    case "ActionRemoved":
      return {
        type: "group.actions_changed",
        data: {
          group_id: Number(a.groupId),
          change: "removed",
          cid: cidOf(lower(a.cidHash)),
          cid_hash: lower(a.cidHash),
        },
      };
    case "GroupPolicySet":
      return {
        type: "group.policy_changed",
        data: {
          group_id: Number(a.groupId),
          policy_cid: a.cid === "" ? null : a.cid,
          cid_hash: a.cid === "" ? null : lower(a.cidHash),
        },
      };
    case "PkpAdded":
      return {
        type: "group.pkps_changed",
        data: { group_id: Number(a.groupId), change: "added", pkp_id: lower(a.pkpId) },
      };
    case "PkpRemoved":
      return {
        type: "group.pkps_changed",
        data: { group_id: Number(a.groupId), change: "removed", pkp_id: lower(a.pkpId) },
      };
    case "OwnershipTransferStarted":
      return {
        type: "ownership.transfer_started",
        data: { owner: getAddress(a.owner), new_owner: getAddress(a.newOwner) },
      };
    case "OwnershipTransferCanceled":
      return { type: "ownership.transfer_canceled", data: { pending_owner: getAddress(a.pendingOwner) } };
    case "OwnershipTransferred":
      return {
        type: "ownership.transferred",
        data: { previous_owner: getAddress(a.previousOwner), new_owner: getAddress(a.newOwner) },
      };
    default:
      return null;
  }
}

function lower(v: unknown): string {
  return String(v).toLowerCase();
}

export function chainEventPayload(
  ev: LogDescription,
  at: LogPosition,
  described: { type: EventType; data: Record<string, unknown> },
): EventPayload {
  return {
    id: chainEventId(at.chainId, at.transactionHash, at.logIndex),
    type: described.type,
    created: at.blockTimestamp,
    account_id: Number(ev.args[0]),
    block_number: at.blockNumber,
    block_hash: at.blockHash.toLowerCase(),
    transaction_hash: at.transactionHash.toLowerCase(),
    log_index: at.logIndex,
    data: described.data,
  };
}
