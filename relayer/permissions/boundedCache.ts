/**
 * A least-recently-used map with a size cap and an optional time to live. The permission cache keeps the
 * chain's "no such key / PKP" answers in it, so their memory stays bounded however many distinct values
 * a flood of requests sends, and a remembered miss is never older than the TTL.
 */
export class BoundedCache<K, V> {
  private readonly entries = new Map<K, { value: V; expiresAtMs: number }>();

  /** `ttlMs` Infinity: entries leave only when evicted, deleted or cleared. */
  constructor(
    readonly maxEntries: number,
    readonly ttlMs: number = Infinity,
    private readonly now: () => number = Date.now,
  ) {
    if (!(maxEntries >= 1)) throw new Error("BoundedCache needs room for at least one entry");
  }

  get(key: K): V | undefined {
    const e = this.entries.get(key);
    if (e === undefined) return undefined;
    if (e.expiresAtMs <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    // Re-insert: a Map iterates in insertion order, so the first entry is the least recently used.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.value;
  }

  set(key: K, value: V): void {
    if (this.ttlMs <= 0) return;
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAtMs: this.now() + this.ttlMs });
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as K;
      this.entries.delete(oldest);
    }
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
