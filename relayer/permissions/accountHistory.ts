/**
 * An account's history, read from the registry's logs. The registry stores only what its checks and a
 * verifier's views need; names, descriptions, key hashes, CID strings and member lists are in its events
 * (every one indexed by accountId as its first topic). Replaying an account's events in chain order through
 * `applyEvent` rebuilds everything a reader shows: the permission cache loads accounts this way, and the
 * Safe tool's `group` command lists a group from an RPC endpoint alone.
 */
import { toBeHex, zeroPadValue, type LogDescription } from "ethers";
import { parseRegistryLog } from "../chain/abi";
import { blockTimes } from "../chain/logs/blockTimes";
import { getLogs, type LogRpc, type RangeOptions } from "../chain/logs/ranges";
import { applyEvent, type AccountProjection } from "./projection";

/** What the replay needs from a node: raw JSON-RPC (eth_getLogs, eth_getBlockByNumber). */
export type RpcSender = LogRpc;

/** Range splitting (relayer/chain/logs/ranges.ts): the whole span first, halved down to `maxRange`. */
export type HistoryOptions = Omit<RangeOptions, "wholeSpanFirst">;

export interface HistoryEvent {
  ev: LogDescription;
  block: number;
  /** Block timestamp, read only for KeyAdded (a key's createdAt); null otherwise. */
  ts: number | null;
}

/** The registry events of `accountId` in blocks [fromBlock, toBlock], in chain order. */
export async function accountEvents(
  rpc: RpcSender,
  registry: string,
  accountId: number | bigint,
  fromBlock: number,
  toBlock: number,
  options: HistoryOptions = {},
): Promise<HistoryEvent[]> {
  const accountTopic = zeroPadValue(toBeHex(BigInt(accountId)), 32);
  const logs = await getLogs(rpc, { address: registry, topics: [null, accountTopic] }, fromBlock, toBlock, {
    ...options,
    wholeSpanFirst: true,
  });

  const events: Array<{ ev: LogDescription; block: number }> = [];
  for (const l of logs) {
    const ev = l.removed ? null : parseRegistryLog(l.topics, l.data);
    if (ev) events.push({ ev, block: Number(BigInt(l.blockNumber)) });
  }
  // Only KeyAdded needs its block's time (a key's createdAt).
  const keyBlocks = events.filter((e) => e.ev.name === "KeyAdded").map((e) => e.block);
  const times = await blockTimes(rpc, keyBlocks, options.retry);
  return events.map((e) => ({ ...e, ts: e.ev.name === "KeyAdded" ? times.get(e.block)! : null }));
}

/** An empty projection of `accountId`, for a replay from the registry's deployment block. */
export function emptyAccount(accountId: number): AccountProjection {
  return {
    id: accountId,
    owner: "",
    pendingOwner: null,
    masterKey: null,
    name: "",
    groupCount: 0,
    keys: new Map(),
    groups: new Map(),
    pkps: new Map(),
  };
}

/** Applies the account's events of [fromBlock, toBlock] to `acc`, in chain order. */
export async function replayAccount(
  rpc: RpcSender,
  registry: string,
  acc: AccountProjection,
  fromBlock: number,
  toBlock: number,
  options: HistoryOptions = {},
): Promise<AccountProjection> {
  for (const { ev, ts } of await accountEvents(rpc, registry, acc.id, fromBlock, toBlock, options)) {
    applyEvent(acc, ev, ts);
  }
  return acc;
}
