/**
 * What the rest of the relayer sees of the trigger service (`ctx.triggers`): an interface, so the
 * context names it without importing the service (which runs actions through the context).
 */
import type { AuthContext } from "../auth";
import type { ApiError } from "../errors";
import type { RateLimiter } from "../rateLimit";
import type {
  ChainEventSpec,
  Firing,
  FireOutcome,
  RetryPolicy,
  TriggerDirectory,
  TriggerIntake,
  TriggerKind,
  TriggerLimits,
  WebhookSpec,
} from "./model";
import type { IntakeWatcher } from "./intakeHints";
import type { StoredTrigger, TriggerStore } from "./store";

/** What a create or update body says (absent: undefined). */
export interface TriggerInput {
  name?: string;
  kind?: TriggerKind;
  enabled?: boolean;
  cid?: string;
  pkpIds?: string[];
  jsParams?: unknown;
  runAsKeyAddress?: string;
  schedule?: { cron: string; missed: "skip" | "run_once" };
  /** `hmac` true: a secret is made (or kept on update); false: none. */
  webhook?: { hmac: WebhookSpec["hmac"] };
  chainEvent?: Omit<ChainEventSpec, "fromBlock"> & { fromBlock: number | null };
  limits?: Partial<TriggerLimits>;
  retry?: Partial<RetryPolicy>;
}

export interface TriggerServiceApi extends TriggerIntake, TriggerDirectory {
  readonly store: TriggerStore;
  /** Inbound hook calls per source IP and per trigger. */
  readonly hookIpLimit: RateLimiter;
  readonly hookTriggerLimit: RateLimiter;
  /** The runner of this instance (tests start it alone). */
  readonly runner: { start(): void; wake(): void };
  /**
   * A firing (the trigger, when the caller already read it, saves a lookup; `fresh`: its id was just
   * made, so it cannot be stored yet and a known-full queue refuses it without a statement).
   */
  fire(firing: Firing, trigger?: StoredTrigger, opts?: { fresh?: boolean }): Promise<FireOutcome>;
  /** The trigger behind a public hook id (remembered briefly by this instance). */
  byHookId(hookId: string): Promise<StoredTrigger | null>;
  /** byHookId from this instance's memory only: the trigger, null (none), undefined (ask the database). */
  rememberedHook(hookId: string): StoredTrigger | null | undefined;
  /** The 429 of a fresh firing while this instance knows the trigger's queue (or minute) is full, else null. */
  knownFull(triggerId: string): ApiError | null;
  /** Tells the watcher of every change to the intake's hints (the hooks' listener keeps a copy). */
  watchIntake(w: IntakeWatcher): () => void;
  /** Where webhook triggers' URLs point when the hooks have a listener of their own, else null. */
  hookOrigin: string | null;
  get(auth: AuthContext, id: string): Promise<StoredTrigger>;
  create(auth: AuthContext, input: TriggerInput): Promise<{ trigger: StoredTrigger; secret: string | null }>;
  update(
    auth: AuthContext,
    id: string,
    input: TriggerInput,
  ): Promise<{ trigger: StoredTrigger; secret: string | null }>;
  setEnabled(auth: AuthContext, id: string, enabled: boolean): Promise<StoredTrigger>;
  remove(auth: AuthContext, id: string): Promise<void>;
  fireManual(auth: AuthContext, id: string): Promise<{ runId: string; firingId: string }>;
  openSecret(t: StoredTrigger): string | null;
  resumeCheck(): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}
