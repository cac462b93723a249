/**
 * The per-account projection of registry state that the permission cache keeps: owner, keys with their
 * scopes, groups with their members, PKPs. Built by replaying the account's registry events in chain order
 * (`applyEvent`, see accountHistory.ts; the registry keeps names, CID strings and member lists in its events
 * only), then moved forward by the poller with the same function, so it always equals the registry's state
 * at the cache's cursor block.
 */
import { getAddress, keccak256, toUtf8Bytes, ZeroAddress, type LogDescription } from "ethers";
import { SCOPES, type ScopeStruct } from "../../vocabulary/scopes";

/** A key's scopes with the registry struct's field names (vocabulary/scopes.ts), group ids as numbers. */
export type KeyScopes = ScopeStruct<number>;

export interface KeyRecord {
  address: string; // checksummed
  keyHash: string;
  name: string;
  description: string;
  expiration: number; // unix seconds, 0 = never
  createdAt: number | null; // block timestamp of registration
  scopes: KeyScopes;
}

export interface GroupRecord {
  id: number;
  name: string;
  description: string;
  pkps: Set<string>; // lower-case pkp ids, insertion ordered
  actions: Map<string, string>; // cidHash → cid, insertion ordered
  /** The CID of the group's signing policy (docs/policies.md), or null for none. */
  policy: string | null;
}

export interface PkpRecord {
  id: string; // lower-case 0x + 64 hex
  name: string;
  description: string;
}

export interface AccountProjection {
  id: number;
  owner: string;
  pendingOwner: string | null;
  masterKey: string | null;
  name: string;
  groupCount: number;
  keys: Map<string, KeyRecord>; // by checksummed address
  groups: Map<number, GroupRecord>;
  pkps: Map<string, PkpRecord>;
}

/**
 * keccak256 of a CID string, as the registry stores actions. Memoised (bounded): every execution hashes
 * its CID once for the request and again for each key operation's re-check.
 */
const cidHashes = new Map<string, string>();
export function cidHash(cid: string): string {
  let h = cidHashes.get(cid);
  if (h === undefined) {
    h = keccak256(toUtf8Bytes(cid));
    if (cidHashes.size >= 10_000) cidHashes.clear();
    cidHashes.set(cid, h);
  }
  return h;
}

function nonZero(a: string): string | null {
  return a === ZeroAddress ? null : getAddress(a);
}

type Struct = Record<string, unknown> & unknown[];

/** A decoded `KeyScopes` struct (by field name, or by position: the vocabulary's order is the struct's). */
export function scopesFromStruct(s: Struct): KeyScopes {
  const ids = (v: unknown) => Array.from(v as Iterable<bigint>, (x) => Number(x));
  return Object.fromEntries(
    SCOPES.map((w, i) => {
      const v = s[w.struct] ?? s[i];
      return [w.struct, w.perGroup ? ids(v) : Boolean(v)];
    }),
  ) as KeyScopes;
}

export function accountFromStruct(a: Struct): Omit<AccountProjection, "keys" | "groups" | "pkps"> {
  return {
    id: Number(a.id),
    owner: getAddress(a.owner as string),
    pendingOwner: nonZero(a.pendingOwner as string),
    masterKey: nonZero(a.masterKey as string),
    name: a.name as string,
    groupCount: Number(a.groupCount),
  };
}

/** Index updates the cache must make when an event changes which account a key or PKP belongs to. */
export interface IndexChange {
  keyAdded?: string;
  keyRemoved?: string;
  pkpAdded?: string;
}

/**
 * Applies one registry event to its account's projection. Events arrive in chain order and each
 * describes its full effect, so application is a plain state transition.
 */
export function applyEvent(
  acc: AccountProjection,
  ev: LogDescription,
  blockTimestamp: number | null,
): IndexChange {
  const a = ev.args;
  switch (ev.name) {
    case "AccountCreated":
      acc.owner = getAddress(a.owner);
      acc.masterKey = nonZero(a.masterKey);
      acc.name = a.name;
      return {};
    case "OwnershipTransferStarted":
      acc.pendingOwner = getAddress(a.newOwner);
      return {};
    case "OwnershipTransferCanceled":
      acc.pendingOwner = null;
      return {};
    case "OwnershipTransferred":
      acc.owner = getAddress(a.newOwner);
      acc.pendingOwner = null;
      return {};
    case "KeyAdded": {
      const address = getAddress(a.key);
      acc.keys.set(address, {
        address,
        keyHash: (a.keyHash as string).toLowerCase(),
        name: a.name,
        description: a.description,
        expiration: Number(a.expiration),
        createdAt: blockTimestamp,
        scopes: scopesFromStruct(a.scopes),
      });
      return { keyAdded: address };
    }
    case "KeyUpdated": {
      const address = getAddress(a.key);
      const prev = acc.keys.get(address);
      acc.keys.set(address, {
        address,
        keyHash: prev?.keyHash ?? "0x" + "0".repeat(64),
        name: a.name,
        description: a.description,
        expiration: Number(a.expiration),
        createdAt: prev?.createdAt ?? null,
        scopes: scopesFromStruct(a.scopes),
      });
      return { keyAdded: address };
    }
    case "KeyMetadataUpdated": {
      const k = acc.keys.get(getAddress(a.key));
      if (k) {
        k.name = a.name;
        k.description = a.description;
      }
      return {};
    }
    case "KeyRemoved": {
      const address = getAddress(a.key);
      acc.keys.delete(address);
      return { keyRemoved: address };
    }
    case "PkpCreated": {
      const id = (a.pkpId as string).toLowerCase();
      acc.pkps.set(id, { id, name: a.name, description: a.description });
      return { pkpAdded: id };
    }
    case "GroupCreated": {
      const id = Number(a.groupId);
      if (!acc.groups.has(id))
        acc.groups.set(id, {
          id,
          name: a.name,
          description: a.description,
          pkps: new Set(),
          actions: new Map(),
          policy: null,
        });
      acc.groupCount = Math.max(acc.groupCount, id);
      return {};
    }
    case "GroupDeleted":
      acc.groups.delete(Number(a.groupId));
      return {};
    case "ActionAdded":
      acc.groups.get(Number(a.groupId))?.actions.set((a.cidHash as string).toLowerCase(), a.cid);
      return {};
    case "ActionRemoved":
      acc.groups.get(Number(a.groupId))?.actions.delete((a.cidHash as string).toLowerCase());
      return {};
    case "GroupPolicySet": {
      const g = acc.groups.get(Number(a.groupId));
      if (g) g.policy = a.cid === "" ? null : (a.cid as string);
      return {};
    }
    case "PkpAdded":
      acc.groups.get(Number(a.groupId))?.pkps.add((a.pkpId as string).toLowerCase());
      return {};
    case "PkpRemoved":
      acc.groups.get(Number(a.groupId))?.pkps.delete((a.pkpId as string).toLowerCase());
      return {};
    default:
      return {};
  }
}
