/**
 * The schedule kind (docs/triggers.md, "Schedules"): a 5-field cron expression in UTC (croner), so the
 * shortest interval is one minute. Every instance runs the scheduler; a firing's id is its minute
 * (`schedule:2026-01-01T00:05Z`), so when two instances fire the same minute it is stored, and run, once.
 *
 * After downtime (this instance's, or every instance's), the minutes between the last one fired and now
 * were missed: `skip` fires only a minute that is on time (less than a minute late) and drops the rest;
 * `run_once` fires the latest missed minute once, however late.
 */
import { Cron } from "croner";
import type { Logger } from "pino";
import { ApiError } from "../errors";
import type { StoredTrigger, TriggerStore } from "./store";
import type { Clock } from "./runner";
import type { TriggerIntake } from "./model";

/** A firing later than this after its minute is "missed" rather than on time. */
export const ON_TIME_MS = 60_000;

function cronOf(expr: string): Cron {
  return new Cron(expr, { timezone: "UTC", mode: "5-part", paused: true });
}

/** Checks a cron expression: exactly five fields (minute precision), in croner's syntax. */
export function validateCron(expr: unknown): string {
  const bad = (why: string) =>
    new ApiError("invalid_trigger", `\`schedule.cron\` ${why}`, { details: { field: "schedule.cron" } });
  if (typeof expr !== "string" || expr.trim() === "") throw bad("must be a cron expression of five fields.");
  const trimmed = expr.trim().replace(/\s+/g, " ");
  const fields = trimmed.split(" ");
  if (fields.length !== 5)
    throw bad(
      `must have exactly five fields (minute hour day-of-month month day-of-week, UTC); it has ${fields.length}. Seconds are not supported: the shortest interval is one minute.`,
    );
  try {
    cronOf(trimmed);
  } catch (err) {
    throw bad(`does not parse: ${(err as Error).message.replace(/^CronPattern: /, "")}`);
  }
  return trimmed;
}

/** The next minute the expression fires after `nowMs` (ms), or null if it never does again. */
export function nextRunMs(expr: string, nowMs: number): number | null {
  return cronOf(expr).nextRun(new Date(nowMs))?.getTime() ?? null;
}

/** The latest minute in (afterMs, nowMs] the expression fires at, or null. */
export function latestDueMs(expr: string, afterMs: number, nowMs: number): number | null {
  const c = cronOf(expr);
  const first = c.nextRun(new Date(afterMs));
  if (!first || first.getTime() > nowMs) return null;
  const [latest] = c.previousRuns(1, new Date(nowMs + 1));
  return latest ? latest.getTime() : first.getTime();
}

/** "schedule:2026-01-01T00:05Z": the minute, so two instances firing it store one firing. */
export function scheduleFiringId(minuteMs: number): string {
  return `schedule:${new Date(minuteMs).toISOString().slice(0, 16)}Z`;
}

/** What one trigger should fire now, if anything (pure: the scheduler's rule, tested alone). */
export function dueFiring(
  t: StoredTrigger,
  nowMs: number,
): { fire: number | null; advanceTo: number | null } {
  if (!t.schedule) return { fire: null, advanceTo: null };
  const since = t.lastFiredMs ?? t.createdAt;
  const latest = latestDueMs(t.schedule.cron, since, nowMs);
  if (latest === null) return { fire: null, advanceTo: null };
  const onTime = nowMs - latest < ON_TIME_MS;
  return { fire: onTime || t.schedule.missed === "run_once" ? latest : null, advanceTo: latest };
}

export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;

  constructor(
    private readonly store: TriggerStore,
    private readonly intake: TriggerIntake,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** How often the scheduler looks (default 5 s: well inside a minute). */
    private readonly tickMs = 5_000,
  ) {}

  start(): void {
    const loop = () => {
      this.ticking ??= this.tick()
        .catch((err: unknown) => this.logger.warn({ err: String(err) }, "trigger scheduler tick failed"))
        .finally(() => (this.ticking = null));
      this.timer = setTimeout(loop, this.tickMs);
      this.timer.unref();
    };
    loop();
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.ticking?.catch(() => undefined);
  }

  /** One pass over the enabled schedule triggers at the clock's now. */
  async tick(): Promise<void> {
    const nowMs = this.clock();
    for (const t of await this.store.enabledOfKind("schedule")) {
      const { fire, advanceTo } = dueFiring(t, nowMs);
      if (advanceTo === null) continue;
      if (fire !== null) {
        try {
          await this.intake.fire({
            triggerId: t.id,
            firingId: scheduleFiringId(fire),
            firedAt: fire,
            input: { kind: "schedule", scheduledFor: new Date(fire).toISOString() },
          });
        } catch (err) {
          // A full queue or the per-minute limit: this minute is dropped (recorded in the log only).
          this.logger.warn({ trigger: t.id, err: (err as Error).message }, "schedule firing refused");
        }
      }
      await this.store.setLastFired(t.id, advanceTo);
    }
  }
}
