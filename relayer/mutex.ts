/** Minimal async mutexes: one lock, and one lock per key (dropped when idle so memory stays bounded). */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();
  private holders = 0;

  /** Whether a `run` holds the lock or waits for it. */
  get busy(): boolean {
    return this.holders > 0;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    this.holders++;
    await prev;
    try {
      return await fn();
    } finally {
      this.holders--;
      release();
    }
  }
}

export class KeyedMutex {
  private readonly tails = new Map<string, { tail: Promise<void>; waiters: number }>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let entry = this.tails.get(key);
    if (!entry) {
      entry = { tail: Promise.resolve(), waiters: 0 };
      this.tails.set(key, entry);
    }
    const prev = entry.tail;
    let release!: () => void;
    entry.tail = new Promise<void>((r) => (release = r));
    entry.waiters++;
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (--entry.waiters === 0) this.tails.delete(key);
    }
  }
}
