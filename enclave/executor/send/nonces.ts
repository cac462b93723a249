/**
 * Nonces of the PKPs' sends, one counter per (chain, address), in this process.
 *
 * The first send of a PKP on a chain reads `eth_getTransactionCount(address, "pending")`; from then on
 * nonces come from the counter. A nonce is taken, signed with and broadcast while holding that
 * (chain, address)'s lock (`withNonce`), so that:
 * - concurrent sends of one PKP (in one run or many) get consecutive nonces and never collide;
 * - a send that fails before the node has taken the transaction (policy refusal, signing failure, the
 *   node answering an error) gives its nonce back: nobody took a later one meanwhile, so no gap is left;
 * - a send whose outcome is unknown (no answer from the node: it may have taken it) forgets the
 *   counter, and the next send re-reads the chain's pending count, which includes it or not.
 * The price: one PKP's sends on one chain are broadcast one at a time (their simulation and fee
 * reading are not under the lock). Several processes sending from one PKP only meet through the
 * chain's pending count (docs/actions.md, "EVM send").
 */

/** What the lock holder may do with the counter. */
export interface NonceSlot {
  readonly nonce: number;
  /** Re-read the chain's pending count now (after "nonce too low") and take the nonce it gives. */
  resync(): Promise<number>;
}

export type ReadPendingCount = () => Promise<number>;

/**
 * What became of the nonce a send held: "taken" (the node accepted the transaction), "free" (refused
 * before the node took it: the nonce is unused), "unknown" (no answer: it may have been taken).
 */
export type NonceOutcome = "taken" | "free" | "unknown";

/** Thrown errors say what became of the nonce with a `nonceOutcome` field; without one: "free". */
export function withNonceOutcome<E extends Error>(e: E, outcome: NonceOutcome): E {
  return Object.assign(e, { nonceOutcome: outcome });
}

class Counter {
  next: number | null = null;
  /** When a send last held the lock (performance.now()), and how many hold it or wait for it. */
  lastUsed = 0;
  holders = 0;
  private tail: Promise<void> = Promise.resolve();

  /** Runs fn after every earlier holder has finished (a FIFO lock). */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/**
 * A counter left alone this long is read again from the chain at its next use: a transaction dropped
 * from the pool, or a chain reset, would otherwise leave every later send queued behind a gap for as
 * long as the process lives. Within a burst the counter is what keeps sends apart; between bursts the
 * chain's own count is the truth.
 */
export const NONCE_IDLE_MS = 10_000;

export class NonceManager {
  private readonly counters = new Map<string, Counter>();
  private uses = 0;

  constructor(private readonly idleMs = NONCE_IDLE_MS) {}

  /**
   * Runs `use` with a nonce, under the (chain, address) lock. `use` says what became of the nonce: as
   * its `outcome` when it resolves, as the thrown error's `nonceOutcome` when it throws.
   */
  async withNonce<T>(
    chainId: number,
    address: string,
    readPending: ReadPendingCount,
    use: (slot: NonceSlot) => Promise<{ value: T; outcome: NonceOutcome }>,
  ): Promise<T> {
    const key = `${chainId}:${address.toLowerCase()}`;
    let counter = this.counters.get(key);
    if (counter === undefined) this.counters.set(key, (counter = new Counter()));
    const c = counter;
    if (++this.uses % 1000 === 0) this.prune();
    c.holders++;
    return c
      .exclusive(async () => {
        if (c.next !== null && performance.now() - c.lastUsed > this.idleMs) c.next = null;
        if (c.next === null) c.next = await readPending();
        const slot = {
          nonce: c.next,
          async resync() {
            c.next = null;
            const n = await readPending();
            c.next = n;
            slot.nonce = n;
            return n;
          },
        };
        let outcome: NonceOutcome = "unknown";
        try {
          const r = await use(slot);
          outcome = r.outcome;
          return r.value;
        } catch (e) {
          outcome = (e as { nonceOutcome?: NonceOutcome }).nonceOutcome ?? "free";
          throw e;
        } finally {
          // taken: the next send uses the next nonce. free: this nonce is still unused (nobody else held
          // the lock), so the counter stays on it. unknown: forget it; the next send asks the chain.
          if (outcome === "taken") c.next = slot.nonce + 1;
          else if (outcome === "unknown") c.next = null;
          else c.next = slot.nonce;
          c.lastUsed = performance.now();
        }
      })
      .finally(() => c.holders--);
  }

  /** Drops idle counters nobody holds (they would be re-read anyway): memory stays bounded. */
  private prune(): void {
    const now = performance.now();
    for (const [key, c] of this.counters)
      if (c.holders === 0 && now - c.lastUsed > this.idleMs) this.counters.delete(key);
  }
}
