/**
 * Key operations that reach the main thread, served fairly between accounts (docs/actions.md,
 * "Scheduling between accounts").
 *
 * The main thread serves every HTTP request of the relayer as well as the workers' key operations.
 * Served as they arrived, four runs firing operations without awaiting them kept it busy enough to
 * move `GET /config` to 312 ms, and an operation of another account waited behind all of them. Here:
 * - each account has at most `perAccount` operations in progress (authorization, derivation, the
 *   crypto thread); the rest wait in that account's queue, as small records, with no key derived;
 * - between accounts with operations waiting, the one with the fewest in progress goes next, ties
 *   round-robin (fair-queue.ts), so another account's operation waits for at most a few of a flood's;
 * - at most `perTurn` operations start in one turn of the event loop; the rest continue in the next
 *   turn (setImmediate), after the loop has polled for I/O, so HTTP requests are read in between.
 */
import { FairQueue } from "./fair-queue";

interface Waiting {
  task: () => Promise<void>;
  /** False once the run that asked has ended: the operation is dropped without starting. */
  live: () => boolean;
}

export class KeyOpScheduler {
  private readonly waiting = new FairQueue<Waiting>();
  private readonly inFlight = new Map<string, number>();
  private startedThisTurn = 0;
  private turnPending = false;

  constructor(
    readonly perAccount: number,
    readonly perTurn: number,
  ) {
    for (const [name, v] of [
      ["perAccount", perAccount],
      ["perTurn", perTurn],
    ] as const)
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`${name} must be a positive integer`);
  }

  /** Operations waiting (not started) and in progress, for tests and statistics. */
  stats(): { waiting: number; inFlight: number } {
    let inFlight = 0;
    for (const n of this.inFlight.values()) inFlight += n;
    return { waiting: this.waiting.size, inFlight };
  }

  /**
   * Start `task` when the account's turn comes; `live` is asked just before, and a task whose run has
   * ended never starts. The task's own outcome is the caller's business (it must not reject).
   */
  submit(account: string, task: () => Promise<void>, live: () => boolean): void {
    this.waiting.push(account, { task, live });
    this.drain();
  }

  private drain(): void {
    while (this.waiting.size > 0) {
      if (this.startedThisTurn >= this.perTurn) return; // the next turn continues (see nextTurn)
      const next = this.waiting.take(
        (a) => (this.inFlight.get(a) ?? 0) < this.perAccount,
        (a) => this.inFlight.get(a) ?? 0,
      );
      if (next === undefined) return;
      if (!next.item.live()) continue;
      this.start(next.account, next.item);
    }
  }

  private start(account: string, w: Waiting): void {
    this.inFlight.set(account, (this.inFlight.get(account) ?? 0) + 1);
    if (this.startedThisTurn++ === 0) this.nextTurn();
    void w.task().finally(() => {
      const left = (this.inFlight.get(account) ?? 1) - 1;
      if (left <= 0) this.inFlight.delete(account);
      else this.inFlight.set(account, left);
      this.drain();
    });
  }

  /** The per-turn count starts again after the loop has gone round (and polled for I/O) once. */
  private nextTurn(): void {
    if (this.turnPending) return;
    this.turnPending = true;
    setImmediate(() => {
      this.turnPending = false;
      this.startedThisTurn = 0;
      this.drain();
    });
  }
}
