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
