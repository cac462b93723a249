/**
 * Runs stored firings (docs/triggers.md, "Exactly once, at least once"). A worker claims a due run
 * under a lease (TriggerStore.claim: one instance per run), renews the lease while the action runs, and
 * ends the run with its outcome. An instance that dies mid-run stops renewing; once its lease expires
 * another instance claims the run again as its next attempt. A run that finished is never claimed again.
 *
 * Each attempt re-authenticates the trigger's usage key by its address (the service never holds the
 * key): a key revoked, expired or narrowed since the trigger was made fails the run with the refusal's
 * code, recorded, without retry. Billing admits the run like any execution (runAction reserves it).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { AuthContext } from "../auth";
import type { RelayerContext } from "../context";
import { interactiveLoadOf } from "../execution/interactiveLoad";
import { runAction, type RunAnswer } from "../execution/runAction";
import { BackgroundGate } from "./backgroundGate";
import type { Firing, FiringInput } from "./model";
import { backoffDelayMs, outcomeOf } from "./outcome";
import type { RunRow, StoredTrigger, TriggerStore } from "./store";

/** Milliseconds since the epoch; tests drive it. */
export type Clock = () => number;

export interface RunnerOptions {
  /** Runs in flight at once on this instance (default 4). */
  workers?: number;
  /** How long a claim holds without renewal (default 60 s; renewed every third of it). */
  leaseMs?: number;
  /** How often idle workers look for due runs (default 1 s; a firing on this instance wakes them). */
  pollMs?: number;
  /** How often paused accounts are checked for a balance again (default 5 s). */
  resumeCheckMs?: number;
}

/** Stored bounds of what a run keeps (the answers and logs of a run can be large). */
export const RESPONSE_LIMIT = 16 * 1024;
export const LOGS_LIMIT = 4 * 1024;

export function truncate(text: string, limit: number): string {
  if (Buffer.byteLength(text, "utf8") <= limit) return text;
  return (
    Buffer.from(text, "utf8")
      .subarray(0, limit)
      .toString("utf8")
      .replace(/\uFFFD$/, "") + "…[truncated]"
  );
}

/** `js_params` of a triggered run: the trigger's own, plus what the firing carried under `trigger`. */
export function jsParamsOf(t: StoredTrigger, run: Pick<RunRow, "firing_id" | "fired_ms" | "input">): unknown {
  const input = JSON.parse(run.input) as FiringInput;
  const own =
    t.jsParams !== null && typeof t.jsParams === "object" && !Array.isArray(t.jsParams) ? t.jsParams : {};
  return {
    ...own,
    trigger: {
      id: t.id,
      firing_id: run.firing_id,
      kind: t.kind,
      fired_at: new Date(Number(run.fired_ms)).toISOString(),
      pkp_ids: t.pkpIds,
      ...snakeInput(input),
    },
  };
}

/** The firing's input as the action sees it (snake_case like the rest of the API). */
function snakeInput(input: FiringInput): Record<string, unknown> {
  switch (input.kind) {
    case "schedule":
      return { source: "schedule", scheduled_for: input.scheduledFor };
    case "webhook":
      return { source: "webhook", body: input.body, raw_base64: input.rawBase64, headers: input.headers };
    case "chain_event":
      return {
        source: "chain_event",
        chain_id: input.chainId,
        log: {
          address: input.log.address,
          topics: input.log.topics,
          data: input.log.data,
          block_number: input.log.blockNumber,
          block_hash: input.log.blockHash,
          transaction_hash: input.log.transactionHash,
          log_index: input.log.logIndex,
        },
        args: input.args,
      };
    case "manual":
      return { source: "manual" };
  }
}

/** A short line for the run history (never the whole body). */
export function summaryOf(f: Firing): string {
  const i = f.input;
  switch (i.kind) {
    case "schedule":
      return `schedule ${i.scheduledFor}`;
    case "webhook":
      return `webhook ${Buffer.from(i.rawBase64, "base64").length} bytes${i.headers["content-type"] ? ` (${i.headers["content-type"]})` : ""}`;
    case "chain_event":
      return `chain ${i.chainId} block ${i.log.blockNumber} tx ${i.log.transactionHash} log ${i.log.logIndex}`;
    case "manual":
      return "manual";
  }
}

export interface RunnerHooks {
  /** An account's balance ran out during a run: pause its triggers (and say so by webhook). */
  pause(accountId: string): Promise<void>;
  /** A run ended `failed`. */
  runFailed(t: StoredTrigger, runId: string, error: { code: string; message: string }): Promise<void>;
  /** Accounts whose triggers are paused and whose balance came back: resume them. */
  resumePaid(): Promise<void>;
  /** A run of this trigger left its queue on this instance (the intake's queue-full hint is stale). */
  claimed?(triggerId: string): void;
}

export class TriggerRunner {
  readonly instanceId: string;
  private readonly workers: number;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly resumeCheckMs: number;
  private inFlight = 0;
  private active = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  /** A wake when the first trigger the background class holds back may start again. */
  private paceTimer: NodeJS.Timeout | null = null;
  private readonly gate: BackgroundGate;
  private resumeTimer: NodeJS.Timeout | null = null;
  private pumping: Promise<void> | null = null;
  private again = false;
  private stopped = true;

  constructor(
    private readonly ctx: RelayerContext,
    private readonly store: TriggerStore,
    private readonly hooks: RunnerHooks,
    private readonly clock: Clock,
    private readonly logger: Logger,
    opts: RunnerOptions & { instanceId?: string } = {},
  ) {
    this.instanceId = opts.instanceId ?? `i_${randomUUID().slice(0, 8)}`;
    this.workers = opts.workers ?? 4;
    this.leaseMs = opts.leaseMs ?? 60_000;
    this.pollMs = opts.pollMs ?? 1_000;
    this.resumeCheckMs = opts.resumeCheckMs ?? 5_000;
    this.gate = new BackgroundGate(interactiveLoadOf(ctx), this.workers);
  }

  start(): void {
    this.stopped = false;
    const poll = () => {
      this.wake();
      this.timer = setTimeout(poll, this.pollMs);
      this.timer.unref();
    };
    poll();
    const resume = () => {
      void this.hooks
        .resumePaid()
        .catch((err: unknown) => this.logger.warn({ err: String(err) }, "trigger resume check failed"));
      this.resumeTimer = setTimeout(resume, this.resumeCheckMs);
      this.resumeTimer.unref();
    };
    this.resumeTimer = setTimeout(resume, this.resumeCheckMs);
    this.resumeTimer.unref();
  }

  /** Waits for the runs in flight on this instance; claims nothing more. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.paceTimer) clearTimeout(this.paceTimer);
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    await this.pumping?.catch(() => undefined);
    await Promise.allSettled([...this.active]);
  }

  /** Looks for due runs now (a firing on this instance, the poll). */
  wake(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = this.pump()
      .catch((err: unknown) => this.logger.warn({ err: String(err) }, "trigger runner could not claim runs"))
      .finally(() => {
        this.pumping = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Claims and runs due runs until none is left (tests: one pass with a driven clock). */
  async drain(): Promise<number> {
    let ran = 0;
    for (;;) {
      const row = await this.store.claim(this.instanceId, this.clock(), this.leaseMs);
      if (!row) break;
      this.hooks.claimed?.(row.trigger_id);
      ran++;
      await this.execute(row);
    }
    await Promise.allSettled([...this.active]);
    return ran;
  }

  /** Claims due runs while the background class has room (backgroundGate.ts) and starts them. */
  private async pump(): Promise<void> {
    while (!this.stopped && this.inFlight < this.gate.slots()) {
      const held = this.gate.held();
      const row = await this.store.claim(this.instanceId, this.clock(), this.leaseMs, held.triggerIds);
      if (!row) {
        if (held.waitMs !== null) this.wakeIn(held.waitMs);
        return;
      }
      this.hooks.claimed?.(row.trigger_id);
      this.inFlight++;
      const p = this.execute(row).finally(() => {
        this.inFlight--;
        this.active.delete(p);
        this.wake();
      });
      this.active.add(p);
    }
  }

  private wakeIn(ms: number): void {
    if (this.paceTimer) clearTimeout(this.paceTimer);
    this.paceTimer = setTimeout(
      () => {
        this.paceTimer = null;
        this.wake();
      },
      Math.ceil(ms) + 1,
    );
    this.paceTimer.unref();
  }

  /** One attempt of a claimed run. Never throws: every ending is written to the run's row. */
  async execute(row: RunRow): Promise<void> {
    const owner = this.instanceId;
    const trigger = await this.store.byId(row.trigger_id);
    const now = () => this.clock();
    if (!trigger) {
      await this.store.finish(row.run_id, owner, {
        status: "skipped",
        skipReason: "trigger_deleted",
        nowMs: now(),
      });
      return;
    }
    this.gate.runStarted(trigger.id, trigger.limits.runsPerMinute);
    const attempt = Number(row.attempt);
    if (attempt > trigger.retry.maxAttempts) {
      // Claimed again after its last attempt's instance died: out of attempts.
      await this.endFailed(trigger, row, {
        code: "run_abandoned",
        message: `The run's instance stopped during attempt ${attempt - 1}, its last.`,
      });
      return;
    }
    const heartbeat = setInterval(
      () => {
        void this.store.renew(row.run_id, owner, this.clock() + this.leaseMs).catch(() => undefined);
      },
      Math.max(50, Math.floor(this.leaseMs / 3)),
    );
    heartbeat.unref();
    try {
      let auth: AuthContext;
      let answer: RunAnswer;
      try {
        // As the key is now: revoked, expired or narrowed since the trigger was made stops this run.
        auth = await this.ctx.auth.authenticateUsageKey(trigger.runAsKeyAddress, null, false);
        auth.requestId = `${row.run_id}.${attempt}`;
        answer = await runAction(this.ctx, auth, {
          cid: trigger.cid,
          ...(trigger.pkpIds.length === 1 ? { pkpId: trigger.pkpIds[0] } : {}),
          jsParams: jsParamsOf(trigger, row),
          requestId: `${row.run_id}.${attempt}`,
          triggerId: trigger.id,
          firingId: row.firing_id,
        });
      } catch (err) {
        const o = outcomeOf(err);
        if (o.kind === "retry") {
          if (o.code === "internal_error")
            this.logger.error(
              { run: row.run_id, trigger: trigger.id, err: String(err) },
              "trigger run failed inside the service",
            );
          if (attempt < trigger.retry.maxAttempts) {
            await this.store.retryLater(
              row.run_id,
              owner,
              now() + backoffDelayMs(trigger.retry.backoffMs, attempt),
              o,
            );
            return;
          }
          await this.endFailed(trigger, row, o);
          return;
        }
        if (o.kind === "skip") {
          await this.store.finish(row.run_id, owner, {
            status: "skipped",
            skipReason: o.code,
            errorCode: o.code,
            errorMessage: o.message,
            nowMs: now(),
          });
          if (o.code === "insufficient_credits") await this.hooks.pause(trigger.accountId);
          return;
        }
        await this.endFailed(trigger, row, o);
        return;
      }
      const ending = {
        response: truncate(JSON.stringify(answer.response ?? null), RESPONSE_LIMIT),
        logs: truncate(answer.logs ?? "", LOGS_LIMIT),
        chargedCents: answer.charged_cents,
        nowMs: now(),
      };
      if (answer.has_error) {
        // The action's own error is its answer: final, not retried (it would most likely fail again).
        const error = {
          code: answer.error?.code ?? "action_error",
          message: answer.error?.message ?? "The action threw.",
        };
        if (
          await this.store.finish(row.run_id, owner, {
            status: "failed",
            errorCode: error.code,
            errorMessage: error.message,
            ...ending,
          })
        )
          await this.hooks.runFailed(trigger, row.run_id, error);
        return;
      }
      await this.store.finish(row.run_id, owner, { status: "succeeded", ...ending });
    } catch (err) {
      // The store itself failed: the lease runs out and another attempt is made (the run is not lost).
      this.logger.error({ run: row.run_id, err: String(err) }, "trigger run could not be recorded");
    } finally {
      clearInterval(heartbeat);
    }
  }

  private async endFailed(
    t: StoredTrigger,
    row: RunRow,
    error: { code: string; message: string },
  ): Promise<void> {
    if (
      await this.store.finish(row.run_id, this.instanceId, {
        status: "failed",
        errorCode: error.code,
        errorMessage: error.message,
        nowMs: this.clock(),
      })
    )
      await this.hooks.runFailed(t, row.run_id, error);
  }
}
