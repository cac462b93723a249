/**
 * Reads one account of an old registry (its events and views) and plans the writes that rebuild it in a new
 * registry with the same ids: account id, PKP counters (hence PKP ids, when the new registry continues the
 * old one's PKP id domain), group ids (deleted groups included, so later ids line up), members, and the
 * usage keys that still count, and each group's signing policy (registries that have them). The old registry is read with its own ABI (its events may be indexed
 * differently from the current ones), given as an ethers Interface.
 */
import { Contract, ZeroAddress, type Interface, type Provider } from "ethers";
import { scopesOf } from "./keyScopes";

/** One registry write, sent by the account's acting owner through the forwarder. */
export interface Write {
  fn: string;
  args: unknown[];
}

export interface AccountPlan {
  accountId: bigint;
  owner: string;
  pendingOwner: string;
  masterKey: string;
  /** createAccount first, then the history in log order, then the keys that still count. */
  writes: Write[];
  /** Usage keys not copied, and why (an expired key cannot be registered again). */
  skippedKeys: { key: string; reason: string }[];
  /** Every PKP id and CID hash the account's groups ever named, for the member-by-member check. */
  pkpIdsNamed: Set<string>;
  cidHashesNamed: Set<string>;
}

export interface OldRegistry {
  address: string;
  iface: Interface;
  /** First block to read logs from (the old deployment's deployBlock). */
  fromBlock: number;
}

interface KeyHistory {
  keyHash: string;
  name: string;
  description: string;
}

/** The old registry's account `accountId`, or undefined when it has none (the accounts are numbered from 1). */
export async function planAccount(
  provider: Provider,
  old: OldRegistry,
  accountId: bigint,
): Promise<AccountPlan | undefined> {
  const registry = new Contract(old.address, old.iface, provider);
  let account: { owner: string; pendingOwner: string; masterKey: string };
  try {
    account = await registry.getAccount(accountId);
  } catch (error) {
    if (old.iface.parseError((error as { data?: string }).data ?? "0x")?.name === "UnknownAccount")
      return undefined;
    throw error;
  }
  const accountTopic = "0x" + accountId.toString(16).padStart(64, "0");
  const logs = await provider.getLogs({
    address: old.address,
    fromBlock: old.fromBlock,
    topics: [null, accountTopic],
  });

  const writes: Write[] = [];
  const keys = new Map<string, KeyHistory>();
  const cids = new Map<string, string>();
  const pkpIdsNamed = new Set<string>();
  for (const log of logs) {
    const event = old.iface.parseLog(log);
    if (!event) continue;
    const a = event.args;
    switch (event.name) {
      case "AccountCreated":
        writes.push({ fn: "createAccount", args: [a.name, a.masterKey] });
        break;
      case "PkpCreated":
        writes.push({ fn: "createPkp", args: [a.name, a.description] });
        break;
      case "GroupCreated":
        writes.push({ fn: "createGroup", args: [a.name, a.description, [], []] });
        break;
      case "GroupDeleted":
        writes.push({ fn: "deleteGroup", args: [a.groupId] });
        break;
      case "PkpAdded":
        pkpIdsNamed.add(a.pkpId);
        writes.push({ fn: "addPkp", args: [a.groupId, a.pkpId] });
        break;
      case "PkpRemoved":
        writes.push({ fn: "removePkp", args: [a.groupId, a.pkpId] });
        break;
      case "ActionAdded":
        cids.set(a.cidHash, a.cid);
        writes.push({ fn: "addAction", args: [a.groupId, a.cid] });
        break;
      case "ActionRemoved":
        writes.push({ fn: "removeAction", args: [a.groupId, cids.get(a.cidHash)] });
        break;
      case "GroupPolicySet":
        // Replayed in log order like actions: a later set (or a clear, cid "") wins, as it did on chain.
        writes.push({ fn: "setGroupPolicy", args: [a.groupId, a.cid] });
        break;
      case "KeyAdded":
        keys.set(a.key, { keyHash: a.keyHash, name: a.name, description: a.description });
        break;
      case "KeyUpdated":
      case "KeyMetadataUpdated": {
        const key = keys.get(a.key)!;
        keys.set(a.key, { ...key, name: a.name, description: a.description });
        break;
      }
      case "KeyRemoved":
        keys.delete(a.key);
        break;
      // Ownership events: the final owner and pending owner come from getAccount.
    }
  }
  if (writes[0]?.fn !== "createAccount")
    throw new Error(`account ${accountId}: no AccountCreated log from block ${old.fromBlock}`);

  // Keys last, with the scopes that still count (getKey drops deleted groups), once every group exists.
  const skippedKeys: AccountPlan["skippedKeys"] = [];
  for (const [key, history] of keys) {
    let info: { expiration: bigint; scopes: Record<string, unknown> };
    try {
      info = await registry.getKey(key);
    } catch {
      skippedKeys.push({ key, reason: "expired (an expired key cannot be registered again)" });
      continue;
    }
    const scopes = scopesOf(info.scopes as unknown as Parameters<typeof scopesOf>[0]);
    writes.push({
      fn: "addKey",
      args: [key, history.keyHash, history.name, history.description, info.expiration, scopes],
    });
  }
  return {
    accountId,
    owner: account.owner,
    pendingOwner: account.pendingOwner,
    masterKey: account.masterKey,
    writes,
    skippedKeys,
    pkpIdsNamed,
    cidHashesNamed: new Set(cids.keys()),
  };
}

export const NO_PENDING_OWNER = ZeroAddress;
