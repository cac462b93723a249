/**
 * The trigger service (`ctx.triggers`): the account's triggers (create, read, update, enable, disable,
 * delete), the intake every source hands firings to (TriggerIntake), the directory sources read
 * (TriggerDirectory), and the runner and scheduler it starts with the relayer. docs/triggers.md.
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { AuthContext } from "../auth";
import type { RelayerContext } from "../context";
import { ApiError } from "../errors";
import type { RateLimiter } from "../rateLimit";
import { newSecret, SecretBox } from "../webhooks/secrets";
import type { Firing, FireOutcome, Trigger, TriggerKind } from "./model";
import { type Clock, TriggerRunner, summaryOf } from "./runner";
import { Scheduler } from "./schedule";
import { type StoredTrigger, TriggerStore } from "./store";
import type { TriggerInput, TriggerServiceApi } from "./serviceApi";
import { BOUNDS } from "./validate";
import { ChainEventSource, startBlock, type RequestedChainEvent } from "./chainEvents";
import { HookLookups, type IntakeWatcher, QueueFullHints } from "./intakeHints";
import { notFound, refusal } from "./intakeRefusals";

export { notFound } from "./intakeRefusals";

/** An id of the public URL: 24 random bytes, base64url (unguessable; says nothing about the trigger). */
function newHookId(): string {
  return "hk_" + randomBytes(24).toString("base64url");
}

export class TriggerService implements TriggerServiceApi {
  readonly store: TriggerStore;
  readonly secrets: SecretBox;
  readonly runner: TriggerRunner;
  readonly scheduler: Scheduler;
  /** Chain-event triggers: one watcher per configured chain (chainEvents/), fed into this intake. */
  readonly chainEvents: ChainEventSource;
  private readonly listeners = new Set<() => void>();
  /** In-memory refusals of a flooded trigger and its hook lookups (re-checked by the database). */
  private readonly queueFull: QueueFullHints;
  private readonly hookLookups: HookLookups;
  /** Who keeps a copy of those hints (the hooks' listener's thread, hookListener.ts). */
  private readonly intakeWatchers = new Set<IntakeWatcher>();
  /** Where webhook triggers' URLs point, when the hooks have a listener of their own (else the request's). */
  hookOrigin: string | null = null;
  private started = false;

  constructor(
    private readonly ctx: RelayerContext,
    db: ConstructorParameters<typeof TriggerStore>[0],
    /** Inbound hook calls per source IP and per trigger (shared by every instance on PostgreSQL). */
    readonly hookIpLimit: RateLimiter,
    readonly hookTriggerLimit: RateLimiter,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.store = new TriggerStore(db);
    this.secrets = new SecretBox(ctx.enclave);
    const o = ctx.cfg.triggers;
    this.queueFull = new QueueFullHints(o.intakeHintMs);
    this.hookLookups = new HookLookups(o.intakeHintMs);
    this.runner = new TriggerRunner(
      ctx,
      this.store,
      {
        pause: (accountId) => this.pause(accountId),
        runFailed: (t, runId, error) =>
          this.emit(t.accountId, "trigger.run_failed", `run_failed:${runId}`, {
            trigger_id: t.id,
            trigger_name: t.name,
            run_id: runId,
            error_code: error.code,
            error_message: error.message,
          }),
        resumePaid: () => this.resumePaid(),
        claimed: (triggerId) => {
          this.queueFull.room(triggerId);
          for (const w of this.intakeWatchers) w.room(triggerId);
        },
      },
      clock,
      logger,
      {
        workers: o.workers,
        leaseMs: o.leaseMs,
        pollMs: o.pollMs,
        resumeCheckMs: o.resumeCheckMs,
        instanceId: ctx.cfg.instanceId ? `${ctx.cfg.instanceId}:${randomUUID().slice(0, 8)}` : undefined,
      },
    );
    this.scheduler = new Scheduler(this.store, this, clock, logger, o.scheduleTickMs);
    this.chainEvents = new ChainEventSource({
      intake: this,
      directory: this,
      db,
      chains: ctx.cfg.chains,
      logger,
    });
  }

  start(): void {
    if (this.started || !this.ctx.cfg.triggers.run) return;
    this.started = true;
    this.runner.start();
    this.scheduler.start();
    this.chainEvents.start();
  }

  /** Stops the scheduler and the runner (also one started alone, as tests do) and waits for runs. */
  async stop(): Promise<void> {
    this.started = false;
    await this.chainEvents.stop();
    await this.scheduler.stop();
    await this.runner.stop();
  }

  // --- TriggerDirectory -------------------------------------------------------------------------

  enabledOfKind(kind: TriggerKind): Promise<Trigger[]> {
    return this.store.enabledOfKind(kind);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tells `w` of every change to the intake's hints from now on, until the answer is called. */
  watchIntake(w: IntakeWatcher): () => void {
    this.intakeWatchers.add(w);
    return () => this.intakeWatchers.delete(w);
  }

  private changed(): void {
    this.queueFull.clear();
    this.hookLookups.clear();
    for (const w of this.intakeWatchers) w.forget();
    for (const l of this.listeners) {
      try {
        l();
      } catch (err) {
        this.logger.warn({ err: String(err) }, "trigger directory listener failed");
      }
    }
  }

  // --- TriggerIntake ----------------------------------------------------------------------------

  /**
   * Stores a firing once and wakes the runner. A disabled or deleted trigger is not found; a paused
   * one (empty balance) answers insufficient_credits; a full queue or the per-minute limit answers 429
   * trigger_queue_full. None of these refusals stores anything or costs the account anything.
   *
   * While this instance knows the trigger's queue is full or its minute's runs fired (QueueFullHints), a
   * `fresh` firing (its id just made, so it cannot be stored yet) is refused without a statement; any
   * other is looked up first, so a re-delivery still answers its run. A run claimed here since lets one
   * firing through to the database. The database decides every firing it stores.
   */
  async fire(firing: Firing, trigger?: StoredTrigger, opts: { fresh?: boolean } = {}): Promise<FireOutcome> {
    const t = trigger ?? (await this.store.byId(firing.triggerId));
    if (!t || !t.enabled) throw notFound();
    if (t.paused) throw pausedError(t.paused);
    const now = this.clock();
    const known = this.queueFull.admit(t.id, now);
    if (known !== null) {
      const stored = opts.fresh ? null : await this.store.runByFiring(t.id, firing.firingId);
      if (stored) return { runId: stored.run_id, created: false };
      throw refusal(known.reason, known.limit);
    }
    const r = await this.store.fire(
      {
        triggerId: t.id,
        firingId: firing.firingId,
        firedMs: firing.firedAt,
        input: JSON.stringify(firing.input),
        inputSummary: summaryOf(firing),
      },
      now,
    );
    if ("missing" in r) throw notFound();
    if ("paused" in r) throw pausedError(r.paused);
    if ("refused" in r) {
      // Either limit is remembered: a flood past the minute's runs is refused in memory, as one past
      // the queue bound is (each would otherwise cost a statement on this thread per call).
      this.queueFull.markFull(t.id, r.refused, r.limit, now);
      for (const w of this.intakeWatchers) w.full(t.id, r.refused, r.limit);
      throw refusal(r.refused, r.limit);
    }
    if (r.created) this.runner.wake();
    return { runId: r.runId, created: r.created };
  }

  /**
   * The trigger behind a public hook id, from this instance's memory for up to `triggers.intakeHintMs` (a flood
   * of calls to one hook reads its row once a second, not once a call).
   */
  byHookId(hookId: string): Promise<StoredTrigger | null> {
    return this.hookLookups.get(hookId, this.clock(), (id) => this.store.byHookId(id));
  }

  /**
   * What byHookId would answer from this instance's memory alone: the trigger, null (no trigger has
   * this hook id), or undefined (not remembered: only the database can say). Never a statement.
   */
  rememberedHook(hookId: string): StoredTrigger | null | undefined {
    return this.hookLookups.peek(hookId, this.clock());
  }

  /**
   * The 429 a fresh firing of this trigger gets while this instance knows its queue is full or its
   * minute's runs fired, and no run claimed since made room (QueueFullHints), else null (only the
   * database can say). Never a statement, and takes no room (the firing that follows does).
   */
  knownFull(triggerId: string): ApiError | null {
    const known = this.queueFull.refusalIf(triggerId, this.clock());
    return known === null ? null : refusal(known.reason, known.limit);
  }

  // --- the account's triggers -------------------------------------------------------------------

  async get(auth: AuthContext, id: string): Promise<StoredTrigger> {
    const t = await this.store.get(auth.principal.accountId, id);
    if (!t) throw notFound();
    return t;
  }

  /** Creates a trigger; answers it and, for a webhook with an HMAC, its secret (shown this once). */
  async create(
    auth: AuthContext,
    input: TriggerInput,
  ): Promise<{ trigger: StoredTrigger; secret: string | null }> {
    const accountId = auth.principal.accountId;
    const max = this.ctx.cfg.triggers.maxPerAccount;
    if ((await this.store.count(accountId)) >= max)
      throw new ApiError("trigger_limit_reached", `The account already has ${max} triggers.`, {
        details: { max },
      });
    const kind = input.kind!;
    requireSpec(kind, input);
    const now = this.clock();
    const id = "trg_" + randomUUID().replace(/-/g, "");
    const secret = kind === "webhook" && input.webhook?.hmac ? newSecret() : null;
    const t: StoredTrigger = {
      id,
      accountId,
      name: input.name!,
      kind,
      enabled: input.enabled ?? true,
      paused: null,
      cid: input.cid!,
      pkpIds: input.pkpIds ?? [],
      jsParams: input.jsParams ?? {},
      runAsKeyAddress: input.runAsKeyAddress!,
      schedule: kind === "schedule" ? input.schedule! : null,
      webhook: kind === "webhook" ? { hookId: newHookId(), hmac: input.webhook?.hmac ?? null } : null,
      chainEvent:
        kind === "chain_event"
          ? { ...input.chainEvent!, fromBlock: await this.fromBlock(input.chainEvent!) }
          : null,
      limits: {
        runsPerMinute: input.limits?.runsPerMinute ?? BOUNDS.runsPerMinute.def,
        maxQueuedRuns: input.limits?.maxQueuedRuns ?? BOUNDS.maxQueuedRuns.def,
        concurrency: input.limits?.concurrency ?? "serial",
      },
      retry: {
        maxAttempts: input.retry?.maxAttempts ?? BOUNDS.maxAttempts.def,
        backoffMs: input.retry?.backoffMs ?? BOUNDS.backoffMs.def,
      },
      createdAt: now,
      updatedAt: now,
      hmacSecretSealed: null,
      lastFiredMs: null,
    };
    if (secret) t.hmacSecretSealed = this.secrets.seal(id, accountId, secret);
    await this.store.insert(t);
    this.changed();
    return { trigger: t, secret };
  }

  /** A partial update; a webhook trigger that gains an HMAC gets a new secret (answered once). */
  async update(
    auth: AuthContext,
    id: string,
    input: TriggerInput,
  ): Promise<{ trigger: StoredTrigger; secret: string | null }> {
    const t = await this.get(auth, id);
    if (input.schedule && t.kind !== "schedule") throw wrongKind("schedule", t.kind);
    if (input.webhook && t.kind !== "webhook") throw wrongKind("webhook", t.kind);
    if (input.chainEvent && t.kind !== "chain_event") throw wrongKind("chain_event", t.kind);
    let secret: string | null = null;
    const next: StoredTrigger = {
      ...t,
      name: input.name ?? t.name,
      enabled: input.enabled ?? t.enabled,
      cid: input.cid ?? t.cid,
      pkpIds: input.pkpIds ?? t.pkpIds,
      jsParams: input.jsParams ?? t.jsParams,
      runAsKeyAddress: input.runAsKeyAddress ?? t.runAsKeyAddress,
      schedule: input.schedule ?? t.schedule,
      chainEvent: input.chainEvent
        ? { ...input.chainEvent, fromBlock: await this.fromBlock(input.chainEvent) }
        : t.chainEvent,
      limits: { ...t.limits, ...input.limits },
      retry: { ...t.retry, ...input.retry },
      updatedAt: this.clock(),
    };
    if (input.webhook && t.webhook) {
      next.webhook = { hookId: t.webhook.hookId, hmac: input.webhook.hmac };
      if (input.webhook.hmac === null) next.hmacSecretSealed = null;
      else if (!t.hmacSecretSealed) {
        secret = newSecret();
        next.hmacSecretSealed = this.secrets.seal(t.id, t.accountId, secret);
      }
    }
    if (!(await this.store.update(next))) throw notFound();
    this.changed();
    return { trigger: next, secret };
  }

  async setEnabled(auth: AuthContext, id: string, enabled: boolean): Promise<StoredTrigger> {
    const t = await this.get(auth, id);
    const next = { ...t, enabled, updatedAt: this.clock() };
    if (!(await this.store.update(next))) throw notFound();
    this.changed();
    return next;
  }

  async remove(auth: AuthContext, id: string): Promise<void> {
    if (!(await this.store.delete(auth.principal.accountId, id))) throw notFound();
    await this.chainEvents.forget(id);
    this.changed();
  }

  /** "Try it": a manual firing now, whatever the kind. */
  async fireManual(auth: AuthContext, id: string): Promise<{ runId: string; firingId: string }> {
    const t = await this.get(auth, id);
    const firingId = `manual:${randomUUID()}`;
    const out = await this.fire(
      { triggerId: t.id, firingId, firedAt: this.clock(), input: { kind: "manual" } },
      t,
      { fresh: true },
    );
    return { runId: out.runId, firingId };
  }

  /** The sealed secret of a webhook trigger, opened (the hook endpoint's HMAC check). */
  openSecret(t: StoredTrigger): string | null {
    return t.hmacSecretSealed === null ? null : this.secrets.open(t.id, t.accountId, t.hmacSecretSealed);
  }

  // --- billing ----------------------------------------------------------------------------------

  /** The balance ran out during a run: every trigger of the account pauses, and says so by webhook. */
  private async pause(accountId: string): Promise<void> {
    const ids = await this.store.setPaused(accountId, "insufficient_credits", this.clock());
    if (ids.length === 0) return;
    this.changed();
    for (const id of ids)
      await this.emit(accountId, "trigger.disabled", `disabled:${id}:${this.clock()}`, {
        trigger_id: id,
        reason: "insufficient_credits",
      });
  }

  /** Paused accounts with a balance again (a top-up on any instance) resume their triggers. */
  private async resumePaid(): Promise<void> {
    if (!this.ctx.billing) return;
    for (const accountId of await this.store.pausedAccounts()) {
      const { balance_cents } = await this.ctx.billing.balance(accountId);
      if (balance_cents <= 0) continue;
      const ids = await this.store.setPaused(accountId, null, this.clock());
      if (ids.length) {
        this.logger.info({ account: accountId, triggers: ids.length }, "triggers resumed after a top-up");
        this.changed();
        this.runner.wake();
      }
    }
  }

  /** Checks paused accounts now (tests; a top-up on this instance). */
  resumeCheck(): Promise<void> {
    return this.resumePaid();
  }

  private async emit(
    accountId: string,
    type: "trigger.run_failed" | "trigger.disabled",
    what: string,
    data: Record<string, unknown>,
  ): Promise<void> {
    const eventId =
      "evt_" + createHash("sha256").update(`sigil/trigger-event/v1:${what}`).digest("hex").slice(0, 32);
    await this.ctx.webhooks
      .emit({ eventId, accountId, type, data })
      .catch((err: unknown) =>
        this.logger.warn({ err: String(err), type }, "could not store a trigger event"),
      );
  }

  /**
   * A chain-event trigger's first block (the one given, else the chain's head now), checked against the
   * head by the chain-event source's rule (the backfill bound among them); the rest of the spec was
   * checked when the body was read.
   */
  private async fromBlock(spec: RequestedChainEvent): Promise<number> {
    return startBlock(spec.fromBlock, await this.chainEvents.head(spec.chainId), "chain_event.");
  }
}

function pausedError(reason: string): ApiError {
  return new ApiError(
    "insufficient_credits",
    "The account's triggers are paused until its balance is topped up.",
    {
      details: { paused: reason },
    },
  );
}

/** 429 trigger_queue_full: the same answer whether the database or this instance's hint refused. */

function requireSpec(kind: TriggerKind, input: TriggerInput): void {
  const need = {
    schedule: input.schedule,
    webhook: input.webhook ?? { hmac: null },
    chain_event: input.chainEvent,
  }[kind];
  if (!need)
    throw new ApiError("invalid_trigger", `A ${kind} trigger needs \`${kind}\`.`, {
      details: { field: kind },
    });
  for (const other of ["schedule", "chain_event"] as const)
    if (other !== kind && (other === "schedule" ? input.schedule : input.chainEvent))
      throw new ApiError("invalid_trigger", `A ${kind} trigger has no \`${other}\`.`, {
        details: { field: other },
      });
  if (kind !== "webhook" && input.webhook)
    throw new ApiError("invalid_trigger", `A ${kind} trigger has no \`webhook\`.`, {
      details: { field: "webhook" },
    });
}

function wrongKind(field: string, kind: TriggerKind): ApiError {
  return new ApiError("invalid_trigger", `A ${kind} trigger has no \`${field}\`.`, { details: { field } });
}
