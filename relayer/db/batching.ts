/**
 * Micro-batching of one kind of statement on one instance, like a group commit without a timer: the
 * first request finds nothing on its way and goes at once, alone; requests arriving while a batch is
 * on its way wait for it and then go together in the next one. An idle instance adds no wait; a busy
 * one sends one statement and one round trip for many requests.
 *
 * `run` answers each item of a batch in order (its answer or its own error); a failure of the whole
 * statement rejects every request of that batch with the same error, as it would have failed each
 * request sent alone.
 */
export type BatchAnswer<A> = { ok: true; value: A } | { ok: false; error: unknown };

export class StatementBatcher<I, A> {
  private waiting: Array<{ item: I; resolve: (a: A) => void; reject: (e: unknown) => void }> = [];
  private inFlight = 0;
  /** Batch sizes sent so far (for tests and benchmarks: how much the batching grouped). */
  readonly sizes = { batches: 0, items: 0, largest: 0 };

  constructor(
    private readonly run: (items: readonly I[]) => Promise<ReadonlyArray<BatchAnswer<A>>>,
    /** Items per statement at most (bounds a statement's parameters and its time under its locks). */
    private readonly maxBatch = 64,
    /** Statements of this kind on their way at once from this instance. */
    private readonly maxInFlight = 1,
  ) {}

  submit(item: I): Promise<A> {
    return new Promise<A>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (this.inFlight < this.maxInFlight) this.send();
    });
  }

  private send(): void {
    const batch = this.waiting.splice(0, this.maxBatch);
    if (!batch.length) return;
    this.inFlight++;
    this.sizes.batches++;
    this.sizes.items += batch.length;
    this.sizes.largest = Math.max(this.sizes.largest, batch.length);
    const settle = (answers: ReadonlyArray<BatchAnswer<A>> | null, err?: unknown) => {
      this.inFlight--;
      // The next batch leaves before this one's answers are handed out: its requests waited already.
      if (this.waiting.length && this.inFlight < this.maxInFlight) this.send();
      batch.forEach((w, i) => {
        const a = answers?.[i];
        if (!answers) w.reject(err);
        else if (!a)
          w.reject(new Error(`batched statement answered ${answers.length} of ${batch.length} items`));
        else if (a.ok) w.resolve(a.value);
        else w.reject(a.error);
      });
    };
    let running: Promise<ReadonlyArray<BatchAnswer<A>>>;
    try {
      running = this.run(batch.map((w) => w.item));
    } catch (err) {
      running = Promise.reject(err);
    }
    running.then(
      (answers) => settle(answers),
      (err: unknown) => settle(null, err),
    );
  }
}

/** PostgreSQL's SQLSTATE for a transaction it ended to break a deadlock (nothing of it was applied). */
const DEADLOCK_DETECTED = "40P01";

/**
 * Runs a batched statement again when PostgreSQL ended it as a deadlock's victim (up to `tries` times
 * in all): the statement is one transaction, so nothing of the failed try was applied. Batches lock in
 * one fixed order and never deadlock with each other; an unbatched statement (an older release during a
 * rolling upgrade) can, and its batch's requests should not fail for it (docs/consistency.md).
 */
export async function retryingDeadlocks<T>(fn: () => Promise<T>, tries = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= tries || (err as { code?: unknown }).code !== DEADLOCK_DETECTED) throw err;
    }
  }
}
