/** ABIs of the registry and the forwarder (from the TypeChain output of `hardhat compile`). */
import { Interface, LogDescription, type EventFragment } from "ethers";
import { IAccountRegistry__factory } from "../../typechain-types/factories/contracts/interfaces/IAccountRegistry__factory";
import { ERC2771Forwarder__factory } from "../../typechain-types/factories/@openzeppelin/contracts/metatx/ERC2771Forwarder__factory";
import { SCOPE_NAMES as SCOPE_NAMES_BY_INDEX, type ScopeEntry } from "../../vocabulary/scopes";

export const registryInterface: Interface = new Interface(IAccountRegistry__factory.abi);
export const forwarderInterface: Interface = new Interface(ERC2771Forwarder__factory.abi);

/** Scope enum of IAccountRegistry, by index, with the names of docs/background.md §2.4 (vocabulary/scopes.ts). */
export const SCOPE_NAMES: readonly ScopeName[] = SCOPE_NAMES_BY_INDEX;
export type ScopeName = ScopeEntry["name"];
export const Scope = {
  CreatePkp: 0,
  CreateGroup: 1,
  DeleteGroup: 2,
  Execute: 3,
  ManageActions: 4,
  AddPkp: 5,
  RemovePkp: 6,
} as const;

/**
 * Registry event decoding by topic. ethers' Interface.parseLog recomputes every event's topic hash
 * (a keccak each) for every log; the poller and every write decode many logs, so look the event up once.
 */
const eventsByTopic = new Map<string, { fragment: EventFragment; topic: string }>();
registryInterface.forEachEvent((fragment) => {
  const topic = fragment.topicHash.toLowerCase();
  eventsByTopic.set(topic, { fragment, topic });
});

/**
 * Decoded logs, by content. A path-A write's logs are decoded twice (the cache applies them from
 * eth_getLogs, the route reads its receipt); ABI decoding is the costly part, so the second is a lookup.
 * Keyed by the exact topics and data, so a hit is the same decoding by construction. Results are never
 * mutated by callers (LogDescription and its Result are read-only).
 */
const decoded = new Map<string, LogDescription | null>();
const MAX_DECODED = 4_096;

export function parseRegistryLog(topics: readonly string[], data: string): LogDescription | null {
  const key = topics.join(",") + "|" + data;
  const hit = decoded.get(key);
  if (hit !== undefined) return hit;
  const out = decodeRegistryLog(topics, data);
  if (decoded.size >= MAX_DECODED) decoded.clear();
  decoded.set(key, out);
  return out;
}

function decodeRegistryLog(topics: readonly string[], data: string): LogDescription | null {
  const hit = topics.length ? eventsByTopic.get(topics[0].toLowerCase()) : undefined;
  if (!hit) return null;
  try {
    return new LogDescription(
      hit.fragment,
      hit.topic,
      registryInterface.decodeEventLog(hit.fragment, data, topics),
    );
  } catch {
    return null;
  }
}
