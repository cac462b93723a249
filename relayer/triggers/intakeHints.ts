/**
 * What this instance remembers about the intake between database statements, so that a flood of hook
 * calls is refused in memory. Both are hints: the database decides every firing it stores (the queue
 * bound is counted under the trigger's lock, the trigger's row is read again there), so a stale hint
 * can only refuse early or look up late, never store a firing the database would refuse.
 *
 * - QueueFullHints: "this trigger's queue was full": a firing of it is answered 429 without a
 *   statement until a run of it is claimed on this instance (room again), the trigger changes, or
 *   `ttlMs` passes (runs claimed on other instances: the database is asked again at least that often).
 * - HookLookups: the trigger behind a hook id, or that there is none, for `ttlMs`; forgotten on any
 *   change on this instance. Another instance's change (disabled, deleted, HMAC) is seen within `ttlMs`;
 *   meanwhile a firing is still stored only if the database's row is enabled and unpaused. An id with no
 *   trigger cannot gain one (ids are random and never reused), so remembering "none" refuses nothing
 *   the database would accept.
 */
import type { StoredTrigger } from "./store";

/** A copy of the intake's hints kept elsewhere, told what this service's own copy learns. */
export interface IntakeWatcher {
  /** The database refused a firing of the trigger: its queue holds `limit` runs. */
  full(triggerId: string, limit: number): void;
  /** A run of the trigger was claimed here: its queue may have room. */
  room(triggerId: string): void;
  /** A trigger changed on this instance: forget every hint. */
  forget(): void;
}

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
  private readonly entries = new Map<string, { trigger: StoredTrigger | null; untilMs: number }>();

  constructor(private readonly ttlMs: number) {}

  /**
   * What this instance remembers of the hook id without asking the database: its trigger, null when
   * it has none, undefined when nothing fresh is remembered.
   */
  peek(hookId: string, nowMs: number): StoredTrigger | null | undefined {
    const e = this.entries.get(hookId);
    return e && nowMs < e.untilMs ? e.trigger : undefined;
  }

  /** The trigger behind the hook id, from memory while fresh, else from `load`. */
  async get(
    hookId: string,
    nowMs: number,
    load: (hookId: string) => Promise<StoredTrigger | null>,
  ): Promise<StoredTrigger | null> {
    const known = this.peek(hookId, nowMs);
    if (known !== undefined) return known;
    const t = await load(hookId);
    // Bounded: a flood of random ids (each refused by the per-IP limit past its rate) only churns it.
    if (this.entries.size >= 10_000) this.entries.clear();
    this.entries.set(hookId, { trigger: t, untilMs: nowMs + this.ttlMs });
    return t;
  }

  clear(): void {
    this.entries.clear();
  }
}
