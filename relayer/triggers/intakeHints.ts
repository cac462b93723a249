/**
 * What this instance remembers about the intake between database statements, so that a flood of hook
 * calls is refused in memory. Both are hints: the database decides every firing it stores (the queue
 * bound is counted under the trigger's lock, the trigger's row is read again there), so a stale hint
 * can only refuse early or look up late, never store a firing the database would refuse.
 *
 * - QueueFullHints: "this trigger's queue was full" or "it fired its runs of the minute": a firing of
 *   it is answered the database's 429 without a statement until the trigger changes or `ttlMs` passes
 *   (runs claimed or fired on other instances: the database is asked again at least that often). A run
 *   of a full queue claimed on this instance makes room for one firing, not for every call in flight:
 *   each claim lets exactly one firing through to the database (which refills the queue), the rest are
 *   still refused from memory. (Letting every call through after a claim sent a burst of calls, up to
 *   the flood's concurrency, to the database and to the main thread for each run claimed during a flood.)
 * - HookLookups: the trigger behind a hook id, or that there is none, for `ttlMs`; forgotten on any
 *   change on this instance. Another instance's change (disabled, deleted, HMAC) is seen within `ttlMs`;
 *   meanwhile a firing is still stored only if the database's row is enabled and unpaused. An id with no
 *   trigger cannot gain one (ids are random and never reused), so remembering "none" refuses nothing
 *   the database would accept.
 */
import type { StoredTrigger } from "./store";

/** A copy of the intake's hints kept elsewhere, told what this service's own copy learns. */
export interface IntakeWatcher {
  /** The database refused a firing of the trigger: its queue holds, or the minute fired, `limit` runs. */
  full(triggerId: string, reason: IntakeLimit, limit: number): void;
  /** A run of the trigger was claimed here: its queue has room for one more firing. */
  room(triggerId: string): void;
  /** A trigger changed on this instance: forget every hint. */
  forget(): void;
}

/** Which of a trigger's limits refused a firing: its queue bound or its runs per minute. */
export type IntakeLimit = "queue_full" | "rate";

/** A refusal the database gave, remembered: which limit, and the limit's value. */
export interface KnownRefusal {
  reason: IntakeLimit;
  limit: number;
}

export class QueueFullHints {
  /** Per trigger: the refusal, until when it is believed, and the firings claimed runs made room for. */
  private readonly full = new Map<string, KnownRefusal & { untilMs: number; room: number }>();

  constructor(private readonly ttlMs: number) {}

  /**
   * The refusal a firing of the trigger gets from memory now, or null (ask the database). Takes
   * nothing: a caller that will not fire yet (the fast path, before the app) asks with this.
   */
  refusalIf(triggerId: string, nowMs: number): KnownRefusal | null {
    const h = this.entry(triggerId, nowMs);
    return h === null || h.room > 0 ? null : { reason: h.reason, limit: h.limit };
  }

  /**
   * As refusalIf, for the caller about to ask the database: when a claimed run made room, this call
   * takes that room (the next caller is refused until another run is claimed or the hint ends).
   */
  admit(triggerId: string, nowMs: number): KnownRefusal | null {
    const h = this.entry(triggerId, nowMs);
    if (h === null) return null;
    if (h.room > 0) {
      h.room--;
      return null;
    }
    return { reason: h.reason, limit: h.limit };
  }

  /** The database just refused a firing of this trigger (`reason`, at `limit`). */
  markFull(triggerId: string, reason: IntakeLimit, limit: number, nowMs: number): void {
    // Bounded by the triggers flooded at once; a sweep keeps a long-lived instance's map small.
    if (this.full.size >= 10_000) this.full.clear();
    this.full.set(triggerId, { reason, limit, untilMs: nowMs + this.ttlMs, room: 0 });
  }

  /**
   * A run of this trigger left the queue (claimed here): room for one more firing of a full queue. (A
   * claim frees nothing of the minute's runs: a "rate" refusal stands until its time runs out.)
   */
  room(triggerId: string): void {
    const h = this.full.get(triggerId);
    if (h && h.reason === "queue_full") h.room = Math.min(h.room + 1, h.limit);
  }

  clear(): void {
    this.full.clear();
  }

  private entry(triggerId: string, nowMs: number) {
    const h = this.full.get(triggerId);
    if (!h) return null;
    if (nowMs >= h.untilMs) {
      this.full.delete(triggerId);
      return null;
    }
    return h;
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
