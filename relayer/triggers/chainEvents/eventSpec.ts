/**
 * What a chain-event trigger watches, checked once at creation and never trusted again: the event's
 * signature (parsed by ethers' own ABI parser), its topic0, up to three topic filters, the contract
 * address, the chain (one of the operator's) and how far back the backfill may start. The trigger service
 * calls `chainEventSpecFrom` (or `validateChainEventSpec` on a spec it built) so creation and the watcher
 * agree on one reading of a spec.
 */
import { EventFragment, getAddress, zeroPadValue } from "ethers";
import { ApiError } from "../../errors";
import { chainById, type ChainEndpoint } from "../../chains";
import type { ChainEventSpec } from "../model";

/** How far behind the head a backfill may start: older history is a job for an indexer, not a trigger. */
export const MAX_BACKFILL_BLOCKS = 50_000;

/** The event topics a log can carry besides topic0. */
export const MAX_TOPIC_FILTERS = 3;

const TOPIC = /^0x[0-9a-f]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

export interface ParsedEvent {
  fragment: EventFragment;
  /** The full human-readable form ("event Transfer(address indexed from, …)"): what is stored. */
  full: string;
  /** keccak256 of the canonical signature ("Transfer(address,address,uint256)"). */
  topic0: string;
  /** Whether the signature said which parameters are indexed (else decoding is left out: args null). */
  indexedKnown: boolean;
}

function invalid(message: string, details: Record<string, unknown> = {}): ApiError {
  return new ApiError("invalid_chain_event", message, { details });
}

/**
 * Parses an event signature: a full fragment (`Transfer(address indexed from, address indexed to,
 * uint256 value)`, with or without the leading `event`) or the plain canonical form
 * (`Transfer(address,address,uint256)`). Anonymous events have no topic0 to match and are refused.
 */
export function parseEventSpec(signature: string): ParsedEvent {
  if (typeof signature !== "string" || signature.trim() === "" || signature.length > 1_000)
    throw invalid(
      "`event` must be an event signature such as Transfer(address indexed from, address indexed to, uint256 value).",
      { field: "event" },
    );
  const text = signature.trim();
  let fragment: EventFragment;
  try {
    fragment = EventFragment.from(/^event\s/.test(text) ? text : `event ${text}`);
  } catch (err) {
    throw invalid(
      `\`event\` does not parse as an event signature: ${(err as Error).message.split(" (")[0]}.`,
      {
        field: "event",
      },
    );
  }
  if (fragment.anonymous)
    throw invalid("Anonymous events carry no topic0 to match: name a non-anonymous event.", {
      field: "event",
    });
  // A plain signature says nothing about `indexed`: the topic0 is still exact, the decoding is not.
  const indexedKnown = /\bindexed\b/.test(text) || fragment.inputs.every((p) => p.name !== "");
  return { fragment, full: fragment.format("full"), topic0: fragment.topicHash.toLowerCase(), indexedKnown };
}

/** All lowercase, all uppercase, or a correct EIP-55 checksum (what ethers' getAddress accepts). */
function isChecksumOk(address: string): boolean {
  try {
    getAddress(address);
    return true;
  } catch {
    return false;
  }
}

/** The configured chain with this id; throws 400 chain_not_configured (listing the configured ids). */
export function configuredChain(chains: readonly ChainEndpoint[], chainId: number): ChainEndpoint {
  const chain = chainById(chains, chainId);
  if (!chain)
    throw new ApiError("chain_not_configured", `Chain ${chainId} is not one this service watches.`, {
      details: { chain_id: chainId, configured: chains.map((c) => c.chainId) },
    });
  return chain;
}

/** A topic filter: 32 bytes of hex, or a 20-byte address (left-padded, as Solidity indexes addresses). */
export function normalizeTopic(value: unknown, position: number): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string" && ADDRESS.test(value)) {
    if (!isChecksumOk(value))
      throw invalid(`topics[${position}] is an address with a wrong checksum: check it for a typo.`, {
        field: `topics[${position}]`,
      });
    return zeroPadValue(value.toLowerCase(), 32);
  }
  if (typeof value === "string" && TOPIC.test(value.toLowerCase())) return value.toLowerCase();
  throw invalid(
    `topics[${position}] must be null (any), a 0x-prefixed 32-byte hex topic or a 20-byte address.`,
    { field: `topics[${position}]` },
  );
}

/** What a creation request says; the service maps its body's fields onto this. */
export interface ChainEventInput {
  chainId: unknown;
  address: unknown;
  /** An event signature (see parseEventSpec); either this or topic0 (or both, then they must agree). */
  event?: unknown;
  topic0?: unknown;
  topics?: unknown;
  /** Backfill start; absent: the head now. */
  fromBlock?: unknown;
}

/**
 * A validated, normalised spec from a creation request (`head`: the chain's head now, which the service
 * reads from the chain's configured RPC URL). Throws ApiError invalid_chain_event, chain_not_configured
 * or backfill_too_deep.
 */
export function chainEventSpecFrom(
  input: ChainEventInput,
  chains: readonly ChainEndpoint[],
  head: number,
): ChainEventSpec {
  if (typeof input.chainId !== "number" || !Number.isSafeInteger(input.chainId))
    throw invalid("`chain_id` must be an integer: one of the chains the operator configured.", {
      field: "chain_id",
    });
  const parsed =
    input.event === undefined || input.event === null ? null : parseEventSpec(input.event as string);
  let topic0 = parsed?.topic0;
  if (input.topic0 !== undefined && input.topic0 !== null) {
    if (typeof input.topic0 !== "string" || !TOPIC.test(input.topic0.toLowerCase()))
      throw invalid("`topic0` must be a 0x-prefixed 32-byte hex topic.", { field: "topic0" });
    topic0 = input.topic0.toLowerCase();
  }
  if (topic0 === undefined) throw invalid("Name the event (`event`) or its `topic0`.", { field: "event" });
  if (input.topics !== undefined && input.topics !== null && !Array.isArray(input.topics))
    throw invalid("`topics` must be an array of up to three filters.", { field: "topics" });
  const rawTopics = (input.topics as unknown[] | undefined) ?? [];
  if (rawTopics.length > MAX_TOPIC_FILTERS)
    throw invalid(`A log has at most ${MAX_TOPIC_FILTERS} topics after topic0: give at most three filters.`, {
      field: "topics",
      given: rawTopics.length,
    });
  if (typeof input.address !== "string" || !ADDRESS.test(input.address))
    throw invalid("`address` must be the emitting contract's 0x-prefixed 20-byte address.", {
      field: "address",
    });
  if (!isChecksumOk(input.address))
    throw invalid("`address` has a wrong checksum (mixed case that is not EIP-55): check it for a typo.", {
      field: "address",
    });
  const spec: ChainEventSpec = {
    chainId: input.chainId,
    address: input.address.toLowerCase(),
    event: parsed?.full ?? null,
    topic0,
    topics: rawTopics.map((t, i) => normalizeTopic(t, i + 1)),
    fromBlock: input.fromBlock === undefined || input.fromBlock === null ? head : (input.fromBlock as number),
  };
  validateChainEventSpec(spec, chains, head);
  return spec;
}

/**
 * Checks a whole spec (the same rules as chainEventSpecFrom, on the stored shape): the chain is the
 * operator's, the address is a real one, topic0 is the named event's, the filters are at most three
 * 32-byte topics, and the backfill starts at most MAX_BACKFILL_BLOCKS behind `head` and not after it.
 */
export function validateChainEventSpec(
  spec: ChainEventSpec,
  chains: readonly ChainEndpoint[],
  head: number,
): void {
  configuredChain(chains, spec.chainId);
  if (!/^0x[0-9a-f]{40}$/.test(spec.address) || BigInt(spec.address) === 0n)
    throw invalid("`address` must be the emitting contract's lowercase 0x-prefixed 20-byte address.", {
      field: "address",
    });
  if (!TOPIC.test(spec.topic0))
    throw invalid("`topic0` must be a 0x-prefixed 32-byte hex topic.", { field: "topic0" });
  if (spec.event !== null) {
    const parsed = parseEventSpec(spec.event);
    if (parsed.topic0 !== spec.topic0)
      throw invalid(
        `\`topic0\` is not the hash of ${parsed.fragment.format("sighash")} (${parsed.topic0}).`,
        {
          field: "topic0",
          expected: parsed.topic0,
        },
      );
  }
  if (spec.topics.length > MAX_TOPIC_FILTERS)
    throw invalid(`A log has at most ${MAX_TOPIC_FILTERS} topics after topic0: give at most three filters.`, {
      field: "topics",
      given: spec.topics.length,
    });
  spec.topics.forEach((t, i) => {
    if (t !== null && !TOPIC.test(t))
      throw invalid(`topics[${i + 1}] must be null or a lowercase 0x-prefixed 32-byte hex topic.`, {
        field: `topics[${i + 1}]`,
      });
  });
  if (!Number.isSafeInteger(spec.fromBlock) || spec.fromBlock < 0)
    throw invalid("`from_block` must be a non-negative block number.", { field: "from_block" });
  if (spec.fromBlock > head + 1)
    throw invalid(`\`from_block\` ${spec.fromBlock} is beyond the chain's head (${head}).`, {
      field: "from_block",
      head,
    });
  if (head - spec.fromBlock > MAX_BACKFILL_BLOCKS)
    throw new ApiError(
      "backfill_too_deep",
      `\`from_block\` ${spec.fromBlock} is ${head - spec.fromBlock} blocks behind the head; a backfill reaches back at most ${MAX_BACKFILL_BLOCKS}.`,
      { details: { from_block: spec.fromBlock, head, max_blocks: MAX_BACKFILL_BLOCKS } },
    );
}
