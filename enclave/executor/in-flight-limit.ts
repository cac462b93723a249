/**
 * At most `max` tasks of one owner running at once; the rest wait in order. The executor gives each run
 * one for its requests to the crypto thread (key-ops.ts): a run that fires a thousand encryptions at
 * once then has only a few in that thread's queue at any moment, so other runs' requests are
 * interleaved with its own instead of waiting behind all of them, and keys are derived only when a
 * request is about to be sent, never a thousand at a time. When the run ends, close() drops whatever is
 * still waiting (those tasks never start).
 */
export class InFlightLimit {
  private running = 0;
  private closed = false;
  private readonly waiting: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError("max must be a positive integer");
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.closed) throw new Error("closed");
    if (this.running >= this.max)
      await new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
    else this.running++;
    try {
      return await task();
    } finally {
      // Hand the slot straight to the next waiter (running stays the same), or free it.
      const next = this.waiting.shift();
      if (next !== undefined) next.resolve();
      else this.running--;
    }
  }

  /** Tasks running and waiting now (pool.ts reports them when it stops a run for wall time). */
  stats(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  /** Tasks still waiting are rejected without starting; later run() calls reject at once. */
  close(): void {
    this.closed = true;
    for (const w of this.waiting.splice(0)) w.reject(new Error("closed"));
  }
}
