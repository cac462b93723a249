/**
 * Chain-event triggers (docs/triggers.md, "Chain events"): what the trigger service uses of them. The
 * source to start and stop, the spec checks it runs at creation, and the firing id rule.
 */
export { ChainEventSource, type ChainEventSourceOptions } from "./source";
export {
  MAX_BACKFILL_BLOCKS,
  MAX_TOPIC_FILTERS,
  chainEventSpecFrom,
  configuredChain,
  parseEventSpec,
  readChainEventInput,
  startBlock,
  type ChainEventInput,
  type RequestedChainEvent,
  type ParsedEvent,
} from "./eventSpec";
export { firingIdOf } from "./watcher";
