/**
 * The follower's memory of the recent chain: for the last few processed heights, the hash of the block
 * processed there. This is what makes following reorg-safe: comparing these hashes with the chain's
 * tells whether (and from which height) processed blocks were replaced.
 *
 * Pure bookkeeping (no RPC): the follower reads the chain and decides; this module only remembers.
 */

export class BlockWindow {
  /** height → block hash (lower case), for processed heights within the window. */
  private readonly hashes = new Map<number, string>();
  /** @param size how many heights to remember (the follower passes confirmation depth + 1, at least 2). */
  constructor(readonly size: number) {}

  get heights(): number[] {
    return [...this.hashes.keys()].sort((a, b) => a - b);
  }

  get top(): number | null {
    const h = this.heights;
    return h.length ? h[h.length - 1] : null;
  }

  hashAt(height: number): string | undefined {
    return this.hashes.get(height);
  }

  record(height: number, hash: string): void {
    this.hashes.set(height, hash.toLowerCase());
  }

  /** Forgets heights that fell out of the window below `cursor` (the newest processed height). */
  prune(cursor: number): void {
    const lowest = cursor - this.size + 1;
    for (const h of this.hashes.keys()) if (h < lowest) this.hashes.delete(h);
  }

  /** Forgets every height from `fork` on. */
  dropFrom(fork: number): void {
    for (const h of [...this.hashes.keys()]) if (h >= fork) this.hashes.delete(h);
  }

  clear(): void {
    this.hashes.clear();
  }

  /**
   * Where the chain forked from what was processed, given the chain's hash at each remembered height
   * (`canonical`, undefined for a height the chain no longer has): the lowest height whose block was
   * replaced, null if none was, "deep" if even the oldest remembered block was replaced (the fork point
   * is below the window, so no rollback within it is exact).
   */
  forkPoint(canonical: ReadonlyMap<number, string | undefined>): number | null | "deep" {
    const heights = this.heights;
    let highestMatch: number | null = null;
    for (let i = heights.length - 1; i >= 0; i--) {
      const h = heights[i];
      if (canonical.get(h)?.toLowerCase() === this.hashes.get(h)) {
        highestMatch = h;
        break;
      }
    }
    if (highestMatch === heights[heights.length - 1]) return null;
    // Blocks link by parent hash: everything above a matching block is on the same chain as it, and
    // everything above a replaced one is replaced too.
    if (highestMatch === null) return heights.length ? "deep" : null;
    return heights[heights.indexOf(highestMatch) + 1];
  }

  /** For the checkpoint: the remembered hashes at or below `cursor`. */
  snapshot(cursor: number): Record<string, string> {
    const out: Record<string, string> = {};
    for (const h of this.heights) if (h <= cursor) out[String(h)] = this.hashes.get(h)!;
    return out;
  }

  restore(saved: unknown): void {
    if (saved === null || typeof saved !== "object") return;
    for (const [k, v] of Object.entries(saved as Record<string, unknown>)) {
      const h = Number(k);
      if (Number.isSafeInteger(h) && h >= 0 && typeof v === "string" && /^0x[0-9a-fA-F]{64}$/.test(v))
        this.record(h, v);
    }
  }
}
