/**
 * Which account's work goes next (docs/actions.md, "Scheduling between accounts"): one FIFO queue per
 * account, and a choice between accounts that never lets one account's backlog decide another's wait.
 *
 * The executor uses it for runs waiting for a worker and the pool for key operations waiting for the
 * main thread (key-op-scheduler.ts). A single shared FIFO is what let one account's six busy loops
 * keep another account's one-signature run waiting 14.7 s: everything queued ahead of it, from
 * whoever, went first.
 */
export class FairQueue<T> {
  private readonly queues = new Map<string, { items: T[]; servedAt: number }>();
  /** Counts items taken: an account's servedAt is when it was last served (0: not since it arrived). */
  private clock = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Accounts with something waiting. */
  accounts(): IterableIterator<string> {
    return this.queues.keys();
  }

  has(account: string): boolean {
    return this.queues.has(account);
  }

  /** Whether any account that is `eligible` has something waiting. */
  anyEligible(eligible: (account: string) => boolean): boolean {
    for (const account of this.queues.keys()) if (eligible(account)) return true;
    return false;
  }

  push(account: string, item: T): void {
    const q = this.queues.get(account);
    if (q === undefined) this.queues.set(account, { items: [item], servedAt: 0 });
    else q.items.push(item);
    this.count++;
  }

  /** Back at the head of its account's queue (a job handed back by the pool keeps its turn). */
  unshift(account: string, item: T): void {
    const q = this.queues.get(account);
    if (q === undefined) this.queues.set(account, { items: [item], servedAt: 0 });
    else q.items.unshift(item);
    this.count++;
  }

  /**
   * The head of one account's queue: among the accounts that are `eligible`, the one that holds the
   * least now (`load`: workers, or operations in flight), ties going to the one served least recently
   * (round-robin; an account that has just arrived first, so it never waits behind a backlog).
   * Undefined if no eligible account has anything waiting.
   */
  take(
    eligible: (account: string) => boolean,
    load: (account: string) => number,
  ): { account: string; item: T } | undefined {
    let best: string | undefined;
    let bestLoad = Infinity;
    let bestServedAt = Infinity;
    for (const [account, q] of this.queues) {
      if (!eligible(account)) continue;
      const l = load(account);
      if (l < bestLoad || (l === bestLoad && q.servedAt < bestServedAt)) {
        best = account;
        bestLoad = l;
        bestServedAt = q.servedAt;
      }
    }
    if (best === undefined) return undefined;
    const q = this.queues.get(best)!;
    const item = q.items.shift()!;
    this.count--;
    q.servedAt = ++this.clock;
    if (q.items.length === 0) this.queues.delete(best);
    return { account: best, item };
  }

  /** Everything waiting, in no particular order between accounts; the queue is empty afterwards. */
  drain(): T[] {
    const all = [...this.queues.values()].flatMap((q) => q.items);
    this.queues.clear();
    this.count = 0;
    return all;
  }
}

/**
 * How urgent a run is. An interactive run answers a caller who waits for it (an HTTP request);
 * background work (a triggered run: a schedule, a webhook, a chain event) has nobody waiting on the line,
 * so it gives way to interactive runs of any account (docs/actions.md, "Scheduling between accounts").
 */
export type Priority = "interactive" | "background";

/**
 * While background work waits, at least one dispatch in this many goes to it (when some of it may start):
 * interactive runs go first, yet a stream of them never starves the background.
 */
export const BACKGROUND_EVERY = 4;

/**
 * Two classes of work, each a FairQueue (per-account fairness inside a class is FairQueue's, unchanged):
 * an eligible interactive item is taken before any background item, except that after
 * `backgroundEvery - 1` interactive dispatches while an eligible background item was waiting (since
 * background was last served), the next dispatch is background's if an eligible background item waits. `load` counts an account's work of
 * both classes (the caller's holdings), so the share of workers an account may hold is unchanged.
 */
export class PriorityFairQueue<T> {
  private readonly interactive = new FairQueue<T>();
  private readonly background = new FairQueue<T>();
  /** Interactive dispatches since background was last served, while eligible background work waited. */
  private passedOver = 0;

  constructor(
    private readonly priorityOf: (item: T) => Priority,
    private readonly backgroundEvery: number = BACKGROUND_EVERY,
  ) {
    if (!Number.isInteger(backgroundEvery) || backgroundEvery < 1)
      throw new RangeError("backgroundEvery must be a positive integer");
  }

  get size(): number {
    return this.interactive.size + this.background.size;
  }

  /** Accounts with something waiting, in either class (each once). */
  *accounts(): IterableIterator<string> {
    yield* this.interactive.accounts();
    for (const a of this.background.accounts()) if (!this.interactive.has(a)) yield a;
  }

  has(account: string): boolean {
    return this.interactive.has(account) || this.background.has(account);
  }

  push(account: string, item: T): void {
    this.classOf(item).push(account, item);
  }

  unshift(account: string, item: T): void {
    this.classOf(item).unshift(account, item);
  }

  /** The next item by the rule above; FairQueue.take's choice between accounts within the class. */
  take(
    eligible: (account: string) => boolean,
    load: (account: string) => number,
  ): { account: string; item: T } | undefined {
    const backgroundsTurn = this.passedOver >= this.backgroundEvery - 1;
    const [first, second] = backgroundsTurn
      ? [this.background, this.interactive]
      : [this.interactive, this.background];
    let next = first.take(eligible, load);
    let from = first;
    if (next === undefined) {
      next = second.take(eligible, load);
      from = second;
    }
    if (next === undefined) return undefined;
    // Counted only when background work could have gone instead (a run at its account's share does
    // not make interactive runs wait for its turn); forgotten once no background work waits.
    if (from === this.background || this.background.size === 0) this.passedOver = 0;
    else if (this.background.anyEligible(eligible)) this.passedOver++;
    return next;
  }

  drain(): T[] {
    return [...this.interactive.drain(), ...this.background.drain()];
  }

  private classOf(item: T): FairQueue<T> {
    return this.priorityOf(item) === "background" ? this.background : this.interactive;
  }
}

/**
 * How many workers one account may hold (running, or queued behind a run of its own) so that the pool
 * is shared fairly:
 * - alone (no other account wants workers): `soloWorkers`, the pool the operator configured; the
 *   reserve workers above it stay free for the next account that arrives, so that account never waits
 *   for this one's runs (each may last the whole wall-time limit) to end;
 * - with `accounts` accounts wanting workers: an equal share of every worker, rounded down, at least
 *   one. Rounded down so that what is left over (the reserve, at least) stays free for whoever comes
 *   next, and so that one account's CPU-bound runs do not take more than their part of the CPUs.
 */
export function workerShare(accounts: number, totalWorkers: number, soloWorkers: number): number {
  if (accounts <= 1) return Math.max(1, soloWorkers);
  return Math.max(1, Math.floor(totalWorkers / accounts));
}

/**
 * Whether an account may start a run on an idle worker: below its share (workerShare), yes. Above it,
 * with others wanting workers, it may still take a worker nobody else is waiting for (the caller
 * serves accounts below their share first), up to the share rounded up, as long as `keepIdle` workers
 * stay idle after it (the reserve, and one for each other account that wants workers but holds none
 * this moment, such as a client between two requests): with many accounts, rounding down alone would
 * leave workers idle while runs wait (five accounts on nine workers would use five).
 */
export function mayTakeWorker(o: {
  held: number;
  accounts: number;
  totalWorkers: number;
  soloWorkers: number;
  keepIdle: number;
  idleWorkers: number;
}): boolean {
  if (o.idleWorkers < 1) return false;
  if (o.held < workerShare(o.accounts, o.totalWorkers, o.soloWorkers)) return true;
  if (o.accounts <= 1) return false;
  return o.held < Math.ceil(o.totalWorkers / o.accounts) && o.idleWorkers - 1 >= o.keepIdle;
}
