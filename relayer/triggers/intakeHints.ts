/**
 * What this instance remembers about the intake between database statements, so that a flood of hook
 * calls is refused in memory. Both are hints: the database decides every firing it stores (the queue
 * bound is counted under the trigger's lock, the trigger's row is read again there), so a stale hint
 * can only refuse early or look up late, never store a firing the database would refuse.
 *
 * - QueueFullHints: "this trigger's queue was full": a firing of it is answered 429 without a
 *   statement until a run of it is claimed on this instance (room again), the trigger changes, or
 *   `ttlMs` passes (runs claimed on other instances: the database is asked again at least that often).
 * - HookLookups: the trigger behind a hook id, for `ttlMs`; forgotten on any change on this instance.
 *   Another instance's change (disabled, deleted, HMAC) is seen within `ttlMs`; meanwhile a firing is
 *   still stored only if the database's row is enabled and unpaused.
 */
import type { StoredTrigger } from "./store";

export class QueueFullHints {
  private readonly full = new Map<string, { limit: number; untilMs: number }>();

  constructor(private readonly ttlMs: number) {}

  /** The trigger's limit when its queue is known full, else null (ask the database). */
  limitIfFull(triggerId: string, nowMs: number): number | null {
    const h = this.full.get(triggerId);
    if (!h) return null;
    if (nowMs >= h.untilMs) {
      this.full.delete(triggerId);
      return null;
    }
    return h.limit;
  }

  /** The database just refused a firing of this trigger: its queue holds `limit` runs. */
  markFull(triggerId: string, limit: number, nowMs: number): void {
    // Bounded by the triggers flooded at once; a sweep keeps a long-lived instance's map small.
    if (this.full.size >= 10_000) this.full.clear();
    this.full.set(triggerId, { limit, untilMs: nowMs + this.ttlMs });
  }

  /** A run of this trigger left the queue (claimed here): the database may have room. */
  room(triggerId: string): void {
    this.full.delete(triggerId);
  }

  clear(): void {
    this.full.clear();
  }
}

export class HookLookups {
  private readonly entries = new Map<string, { trigger: StoredTrigger; untilMs: number }>();

  constructor(private readonly ttlMs: number) {}

  /** The trigger behind the hook id, from memory while fresh, else from `load` (null is not kept). */
  async get(
    hookId: string,
    nowMs: number,
    load: (hookId: string) => Promise<StoredTrigger | null>,
  ): Promise<StoredTrigger | null> {
    const e = this.entries.get(hookId);
    if (e && nowMs < e.untilMs) return e.trigger;
    const t = await load(hookId);
    if (!t) {
      // Unknown ids are not remembered: random ids cannot grow the map (the per-IP limit bounds them).
      this.entries.delete(hookId);
      return null;
    }
    if (this.entries.size >= 10_000) this.entries.clear();
    this.entries.set(hookId, { trigger: t, untilMs: nowMs + this.ttlMs });
    return t;
  }

  clear(): void {
    this.entries.clear();
  }
}
