/**
 * What a chain-event trigger watches, checked once at creation and never trusted again: the event's
 * signature (parsed by ethers' own ABI parser), its topic0, up to three topic filters, the contract
 * address, the chain (one of the operator's) and how far back the backfill may start. This is the one
 * reading of a spec: the trigger body's reader calls `readChainEventInput`, the service `startBlock` once
 * it knows the chain's head (`chainEventSpecFrom` is both), so creation and the watcher agree.
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
 * `field` is the signature's place in the request, named in a refusal.
 */
export function parseEventSpec(signature: string, field = "event"): ParsedEvent {
  if (typeof signature !== "string" || signature.trim() === "" || signature.length > 1_000)
    throw invalid(
      `\`${field}\` must be an event signature such as Transfer(address indexed from, address indexed to, uint256 value).`,
      { field },
    );
  const text = signature.trim();
  let fragment: EventFragment;
  try {
    fragment = EventFragment.from(/^event\s/.test(text) ? text : `event ${text}`);
  } catch (err) {
    throw invalid(
      `\`${field}\` does not parse as an event signature: ${(err as Error).message.split(" (")[0]}.`,
      { field },
    );
  }
  if (fragment.anonymous)
    throw invalid("Anonymous events carry no topic0 to match: name a non-anonymous event.", { field });
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

/**
 * A topic filter: 32 bytes of hex, or a 20-byte address (left-padded, as Solidity indexes addresses).
 * `field` is its place in the request (`topics[0]` filters the log's topic 1).
 */
export function normalizeTopic(value: unknown, field: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string" && ADDRESS.test(value)) {
    if (!isChecksumOk(value))
      throw invalid(`\`${field}\` is an address with a wrong checksum: check it for a typo.`, { field });
    return zeroPadValue(value.toLowerCase(), 32);
  }
  if (typeof value === "string" && TOPIC.test(value.toLowerCase())) return value.toLowerCase();
  throw invalid(`\`${field}\` must be null (any), a 0x-prefixed 32-byte hex topic or a 20-byte address.`, {
    field,
  });
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

/** A spec read from a request, before the chain's head is known: no from_block means the head then. */
export type RequestedChainEvent = Omit<ChainEventSpec, "fromBlock"> & { fromBlock: number | null };

/**
 * Every rule of a spec that needs no chain head, in the order the fields are listed in the API: the
 * chain is the operator's, the address a real contract's (EIP-55 checksum if mixed case), topic0 the
 * named event's, at most three filters, a whole from_block. `at` prefixes the field names in refusals
 * (`chain_event.` in a trigger body), so `details.field` is the field's path in the request. Throws
 * ApiError invalid_chain_event or chain_not_configured.
 */
export function readChainEventInput(
  input: ChainEventInput,
  chains: readonly ChainEndpoint[],
  at = "",
): RequestedChainEvent {
  const refuse = (field: string, why: string, details: Record<string, unknown> = {}) =>
    invalid(`\`${at}${field}\` ${why}`, { field: at + field, ...details });
  if (typeof input.chainId !== "number" || !Number.isSafeInteger(input.chainId))
    throw refuse("chain_id", "must be an integer: one of the chains the operator configured.");
  configuredChain(chains, input.chainId);
  if (typeof input.address !== "string" || !ADDRESS.test(input.address) || BigInt(input.address) === 0n)
    throw refuse("address", "must be a contract address: the emitting contract's 0x-prefixed 20 bytes.");
  if (!isChecksumOk(input.address))
    throw refuse("address", "has a wrong checksum (mixed case that is not EIP-55): check it for a typo.");
  const parsed =
    input.event === undefined || input.event === null
      ? null
      : parseEventSpec(input.event as string, `${at}event`);
  let topic0 = parsed?.topic0;
  if (input.topic0 !== undefined && input.topic0 !== null) {
    if (typeof input.topic0 !== "string" || !TOPIC.test(input.topic0.toLowerCase()))
      throw refuse("topic0", "must be a 0x-prefixed 32-byte hex topic.");
    topic0 = input.topic0.toLowerCase();
    if (parsed && parsed.topic0 !== topic0)
      throw refuse("topic0", `is not the hash of ${parsed.fragment.format("sighash")} (${parsed.topic0}).`, {
        expected: parsed.topic0,
      });
  }
  if (topic0 === undefined) throw refuse("event", "or `topic0` must name the event.");
  if (input.topics !== undefined && input.topics !== null && !Array.isArray(input.topics))
    throw refuse("topics", "must be an array of up to three filters.");
  const rawTopics = (input.topics as unknown[] | undefined) ?? [];
  if (rawTopics.length > MAX_TOPIC_FILTERS)
    throw refuse(
      "topics",
      `has ${rawTopics.length} filters: a log has at most ${MAX_TOPIC_FILTERS} topics after topic0.`,
      { given: rawTopics.length },
    );
  const fromBlock = input.fromBlock ?? null;
  if (
    fromBlock !== null &&
    (typeof fromBlock !== "number" || !Number.isSafeInteger(fromBlock) || fromBlock < 0)
  )
    throw refuse("from_block", "must be a non-negative block number.");
  return {
    chainId: input.chainId,
    address: input.address.toLowerCase(),
    event: parsed?.full ?? null,
    topic0,
    topics: rawTopics.map((t, i) => normalizeTopic(t, `${at}topics[${i}]`)),
    fromBlock: fromBlock as number | null,
  };
}

/**
 * Where a spec starts reading, checked against the chain's head now: the one given, else the head; not
 * after the head, at most MAX_BACKFILL_BLOCKS behind it. Throws invalid_chain_event or backfill_too_deep.
 */
export function startBlock(requested: number | null, head: number, at = ""): number {
  const fromBlock = requested ?? head;
  if (fromBlock > head + 1)
    throw invalid(`\`${at}from_block\` ${fromBlock} is beyond the chain's head (${head}).`, {
      field: `${at}from_block`,
      head,
    });
  if (head - fromBlock > MAX_BACKFILL_BLOCKS)
    throw new ApiError(
      "backfill_too_deep",
      `\`${at}from_block\` ${fromBlock} is ${head - fromBlock} blocks behind the head; a backfill reaches back at most ${MAX_BACKFILL_BLOCKS}.`,
      { details: { from_block: fromBlock, head, max_blocks: MAX_BACKFILL_BLOCKS } },
    );
  return fromBlock;
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
  const spec = readChainEventInput(input, chains);
  return { ...spec, fromBlock: startBlock(spec.fromBlock, head) };
}
