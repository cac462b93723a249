/**
 * A fetched log as the action sees it (`js_params.trigger`): the raw log in plain JSON numbers and
 * lowercase hex, and, when the trigger names its event with `indexed` known, the decoded arguments by
 * name and by position, in JSON-safe form (integers as decimal strings, addresses checksummed, bytes
 * as hex). A log that does not fit the signature (another event sharing topic0 with a different
 * indexing) is still handed over, with `args: null`: the raw log is always the truth.
 */
import { Indexed, Interface, Result, getAddress, type EventFragment, type ParamType } from "ethers";
import type { FetchedLog } from "../../chain/logs/ranges";
import type { FiringInput } from "../model";
import { parseEventSpec } from "./eventSpec";

type ChainEventInput = Extract<FiringInput, { kind: "chain_event" }>;
export type TriggerLog = ChainEventInput["log"];

/** The raw log in the firing's shape. */
export function triggerLog(l: FetchedLog): TriggerLog {
  return {
    address: l.address.toLowerCase(),
    topics: l.topics.map((t) => t.toLowerCase()),
    data: l.data.toLowerCase(),
    blockNumber: Number(BigInt(l.blockNumber)),
    blockHash: (l.blockHash ?? "").toLowerCase(),
    transactionHash: l.transactionHash.toLowerCase(),
    logIndex: Number(BigInt(l.logIndex)),
  };
}

/** Decodes logs of one event signature; built once per trigger, not per log. */
export class EventDecoder {
  private readonly iface: Interface | null;
  private readonly fragment: EventFragment | null;

  constructor(signature: string | null) {
    const parsed = signature === null ? null : parseEventSpec(signature);
    // Without `indexed` known, which values sit in topics and which in data is a guess: decode nothing.
    this.fragment = parsed?.indexedKnown ? parsed.fragment : null;
    this.iface = this.fragment ? new Interface([this.fragment]) : null;
  }

  /** The arguments by name and position, or null (no signature, or the log does not fit it). */
  args(log: TriggerLog): Record<string, unknown> | null {
    if (!this.iface || !this.fragment) return null;
    let decoded: Result;
    try {
      decoded = this.iface.decodeEventLog(this.fragment, log.data, log.topics);
    } catch {
      return null;
    }
    const out: Record<string, unknown> = {};
    this.fragment.inputs.forEach((param, i) => {
      const value = jsonValue(param, decoded[i]);
      out[String(i)] = value;
      if (param.name !== "") out[param.name] = value;
    });
    return out;
  }
}

/** JSON-safe form of one decoded value (recursing into arrays and tuples). */
function jsonValue(param: ParamType, value: unknown): unknown {
  // An indexed string, bytes, array or tuple is only its hash in the topics.
  if (value instanceof Indexed) return value.hash;
  if (typeof value === "bigint") return value.toString();
  if (param.baseType === "address" && typeof value === "string") return getAddress(value);
  if (param.isArray() && Array.isArray(value)) return value.map((v) => jsonValue(param.arrayChildren, v));
  if (param.isTuple() && value instanceof Result) {
    const out: Record<string, unknown> = {};
    param.components.forEach((c, i) => {
      const v = jsonValue(c, value[i]);
      out[String(i)] = v;
      if (c.name !== "") out[c.name] = v;
    });
    return out;
  }
  return value;
}
