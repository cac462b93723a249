/**
 * The background class of triggered runs on one instance (docs/triggers.md, "Performance"). A
 * triggered run has nobody waiting on the line; an interactive run (svc_action) has. While this
 * instance serves interactive runs (InteractiveLoad: one in flight, or one just ended):
 *
 * - at most one triggered run is in flight on the instance, not `triggers.workers`;
 * - a trigger's next run starts no sooner than its own rate allows (60 s / `runs_per_minute` after
 *   its previous start here), so the runs a flood got queued drain at the pace the trigger's owner
 *   chose, not as fast as the CPUs allow, and the intake keeps refusing while they wait.
 *
 * Without interactive load the runner uses every worker and no spacing, as before. The executor's
 * own priority class (a triggered run waits behind queued interactive runs) still applies on top.
 */
import { performance } from "node:perf_hooks";

export interface LoadSignal {
  present(): boolean;
}

export class BackgroundGate {
  /** Per trigger: when its last run started on this instance and its spacing (ms). */
  private readonly started = new Map<string, { atMs: number; everyMs: number }>();

  constructor(
    private readonly interactive: LoadSignal,
    private readonly workers: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** How many triggered runs may be in flight on this instance now. */
  slots(): number {
    return this.interactive.present() ? 1 : this.workers;
  }

  /**
   * The triggers whose next run must wait now (none without interactive load), and how long until the
   * first of them may start again (null when none waits).
   */
  held(): { triggerIds: string[]; waitMs: number | null } {
    const now = this.now();
    const triggerIds: string[] = [];
    let waitMs: number | null = null;
    for (const [id, s] of this.started) {
      const left = s.atMs + s.everyMs - now;
      if (left <= 0) {
        this.started.delete(id);
        continue;
      }
      triggerIds.push(id);
      waitMs = waitMs === null ? left : Math.min(waitMs, left);
    }
    if (!this.interactive.present()) return { triggerIds: [], waitMs: null };
    return { triggerIds, waitMs };
  }

  /** A run of this trigger started here; `runsPerMinute` is the trigger's own limit. */
  runStarted(triggerId: string, runsPerMinute: number): void {
    this.started.set(triggerId, { atMs: this.now(), everyMs: 60_000 / Math.max(1, runsPerMinute) });
  }
}
