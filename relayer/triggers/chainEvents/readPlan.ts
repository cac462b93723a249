/**
 * Which eth_getLogs queries one poll of a chain makes: triggers that watch the same contract and event
 * and stand at the same cursor share one query (its filter narrowed by their topic filters when they all
 * agree, else by topic0 only and each trigger picks its logs itself). A trigger still backfilling stands
 * at another cursor and reads alone until it catches up, so it never holds the others back.
 */
import type { LogFilter } from "../../chain/logs/ranges";
import type { ChainEventSpec, Trigger } from "../model";
import type { ChainCursor } from "./cursors";

export interface WatchedTrigger {
  trigger: Trigger;
  spec: ChainEventSpec;
  cursor: ChainCursor;
}

export interface LogRead {
  filter: LogFilter;
  /** The cursor every member stands at: the read starts after it. */
  after: number;
  members: WatchedTrigger[];
}

export function planReads(watched: readonly WatchedTrigger[]): LogRead[] {
  const groups = new Map<string, WatchedTrigger[]>();
  for (const w of watched) {
    const key = `${w.spec.address}|${w.spec.topic0}|${w.cursor.block}`;
    const g = groups.get(key);
    if (g) g.push(w);
    else groups.set(key, [w]);
  }
  return [...groups.values()].map((members) => {
    const first = members[0].spec;
    const shared = members.every((m) => sameTopics(m.spec.topics, first.topics));
    const topics = shared ? [first.topic0, ...trimTrailingAny(first.topics)] : [first.topic0];
    return { filter: { address: first.address, topics }, after: members[0].cursor.block, members };
  });
}

/** Whether a log's topics pass a trigger's filters (topic0 included). */
export function matches(spec: ChainEventSpec, topics: readonly string[]): boolean {
  if (topics[0]?.toLowerCase() !== spec.topic0) return false;
  return spec.topics.every((want, i) => want === null || topics[i + 1]?.toLowerCase() === want);
}

function sameTopics(a: ReadonlyArray<string | null>, b: ReadonlyArray<string | null>): boolean {
  const x = trimTrailingAny(a);
  const y = trimTrailingAny(b);
  return x.length === y.length && x.every((t, i) => t === y[i]);
}

/** Trailing "any" filters say nothing: leaving them out keeps equal filters equal. */
function trimTrailingAny(topics: ReadonlyArray<string | null>): Array<string | null> {
  const out = [...topics];
  while (out.length && out[out.length - 1] === null) out.pop();
  return out;
}
