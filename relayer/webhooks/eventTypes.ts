/**
 * The event types an endpoint can subscribe to (docs/webhooks.md lists each with an example payload).
 * Chain events come from the registry's logs, so a change made through the API (path A) and the same
 * change made on chain by the owner or a Safe (path B) produce the same event.
 */
export const CHAIN_EVENT_TYPES = [
  "key.added",
  "key.updated",
  "key.removed",
  "group.created",
  "group.deleted",
  "group.actions_changed",
  "group.pkps_changed",
  "group.policy_changed",
  "pkp.created",
  "ownership.transfer_started",
  "ownership.transfer_canceled",
  "ownership.transferred",
] as const;

export const LEDGER_EVENT_TYPES = ["payment.credited", "balance.low"] as const;

/** Emitted by the trigger service (relayer/triggers/): a run that failed, triggers paused for credit. */
export const TRIGGER_EVENT_TYPES = ["trigger.run_failed", "trigger.disabled"] as const;

export const EVENT_TYPES = [...CHAIN_EVENT_TYPES, ...LEDGER_EVENT_TYPES, ...TRIGGER_EVENT_TYPES] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** What an endpoint subscribes to: a list of types, or every type ("*"). */
export type Subscription = readonly EventType[] | readonly ["*"];

export function isEventType(v: unknown): v is EventType {
  return typeof v === "string" && (EVENT_TYPES as readonly string[]).includes(v);
}

export function subscribes(sub: Subscription, type: string): boolean {
  return sub[0] === "*" || (sub as readonly string[]).includes(type);
}

/** The body every delivery of one event carries (stored once, sent byte for byte on every attempt). */
export interface EventPayload {
  id: string;
  type: EventType;
  /** Unix seconds: the block's time for chain events, the ledger entry's for ledger events. */
  created: number;
  account_id: number;
  block_number?: number;
  block_hash?: string;
  transaction_hash?: string;
  log_index?: number;
  data: Record<string, unknown>;
}
