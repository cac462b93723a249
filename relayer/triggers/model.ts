/**
 * The shapes of triggers (docs/triggers.md): what a trigger is, what one firing of it carries, and the
 * two narrow interfaces between the trigger service and the sources that fire triggers (the clock for
 * schedules, the inbound webhook endpoint, the chain-event watcher). A source never runs anything
 * itself: it hands a firing with a stable id to the intake, which stores it once and runs it.
 */

export type TriggerKind = "schedule" | "webhook" | "chain_event";

/** After downtime: skip the firings that were missed, or run the latest of them once. */
export type MissedFirings = "skip" | "run_once";

export interface ScheduleSpec {
  /** Five fields, UTC ("*\/5 * * * *"). */
  cron: string;
  missed: MissedFirings;
}

export interface WebhookSpec {
  /** The unguessable id in the public URL (`/hooks/v1/<hookId>`). */
  hookId: string;
  /** When set, a delivery must carry a valid HMAC-SHA256 of its raw body under the trigger's secret. */
  hmac: null | { header: string; prefix: string; encoding: "hex" | "base64" };
}

export interface ChainEventSpec {
  chainId: number;
  /** The emitting contract (lowercase 0x address). */
  address: string;
  /** The event's signature when given ("Transfer(address,indexed address,uint256)" style ABI fragment). */
  event: string | null;
  /** keccak256 of the event signature (0x + 64 hex). */
  topic0: string;
  /** Up to three topic filters (null = any), compared with the log's topics 1-3. */
  topics: ReadonlyArray<string | null>;
  /** The first block to look at (backfill); default: the head when the trigger was created. */
  fromBlock: number;
}

export interface TriggerLimits {
  runsPerMinute: number;
  maxQueuedRuns: number;
  /** "serial": at most one run of this trigger at a time; "parallel": runs may overlap. */
  concurrency: "serial" | "parallel";
}

export interface RetryPolicy {
  /** Attempts in all, the first one included (1 = no retry). */
  maxAttempts: number;
  /** Delay before the second attempt; doubled before each next one. */
  backoffMs: number;
}

export interface Trigger {
  id: string;
  accountId: string;
  name: string;
  kind: TriggerKind;
  enabled: boolean;
  cid: string;
  pkpIds: string[];
  jsParams: unknown;
  /** The usage key the runs act as, named by its address only: the service never holds the key. */
  runAsKeyAddress: string;
  schedule: ScheduleSpec | null;
  webhook: WebhookSpec | null;
  chainEvent: ChainEventSpec | null;
  limits: TriggerLimits;
  retry: RetryPolicy;
  createdAt: number;
  updatedAt: number;
}

/** What the action is handed about the firing that started it (under `js_params.trigger`). */
export type FiringInput =
  | { kind: "schedule"; scheduledFor: string }
  | { kind: "webhook"; body: unknown; rawBase64: string; headers: Record<string, string> }
  | {
      kind: "chain_event";
      chainId: number;
      log: {
        address: string;
        topics: string[];
        data: string;
        blockNumber: number;
        blockHash: string;
        transactionHash: string;
        logIndex: number;
      };
      /** The decoded arguments by name (and position), when the trigger names the event's signature. */
      args: Record<string, unknown> | null;
    }
  | { kind: "manual" };

/**
 * One firing: `firingId` is stable for the event that caused it ("schedule:<ISO time>",
 * "webhook:<delivery id>", "chain:<chainId>:<txHash>:<logIndex>", "manual:<uuid>"), so a firing
 * handed over twice (two instances, a restart) is stored, and run, once.
 */
export interface Firing {
  triggerId: string;
  firingId: string;
  firedAt: number;
  input: FiringInput;
}

export interface FireOutcome {
  runId: string;
  /** False when this firing id was already stored (the earlier run's id is returned). */
  created: boolean;
}

/** Where sources hand firings. Throws ApiError("trigger_queue_full") past the trigger's queue limit. */
export interface TriggerIntake {
  fire(firing: Firing): Promise<FireOutcome>;
}

/** What sources read: the enabled triggers of a kind, and a signal when the set changes. */
export interface TriggerDirectory {
  enabledOfKind(kind: TriggerKind): Promise<Trigger[]>;
  /** Called after any create, update, enable, disable or delete (on this instance). */
  onChange(listener: () => void): () => void;
}
