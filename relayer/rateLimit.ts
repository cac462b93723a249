/**
 * Rate limits (REFERENCE.md gap 12): token buckets keyed by usage key, account or client IP, and a
 * counter of executions running per account. In memory on the embedded default (a restart forgets
 * them, which errs on the side of availability); with PostgreSQL they are shared by every instance
 * (relayer/db/sharedLimits.ts), behind the same two interfaces.
 */
import { ApiError } from "./errors";

/** Takes one request's token, or throws 429 rate_limited with Retry-After. */
export interface RateLimiter {
  take(key: string, what: string): void | Promise<void>;
}

/** Admits one more execution of the account, or throws 429; the returned function releases it (once). */
export interface ExecutionCap {
  enter(accountId: string): (() => void) | Promise<() => void>;
}

export function rateLimited(capacity: number, what: string, retryAfter: number): ApiError {
  return new ApiError(429, "rate_limited", `Rate limit reached for ${what}; retry in ${retryAfter} s.`, {
    retryAfter,
    details: { limit: capacity, scope: what.split(" ")[0] },
  });
}

export function tooManyConcurrent(accountId: string, running: number, cap: number): ApiError {
  return new ApiError(
    429,
    "too_many_concurrent_executions",
    `Account ${accountId} already runs ${running} executions (the maximum).`,
    { retryAfter: 1, details: { limit: cap } },
  );
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

export class TokenBuckets implements RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly refillPerMs: number;

  /** `capacity` requests per `windowMs`, refilled continuously. */
  constructor(
    private readonly capacity: number,
    windowMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.refillPerMs = capacity / windowMs;
  }

  /** Takes one token, or throws 429 rate_limited with Retry-After (seconds until a token is back). */
  take(key: string, what: string): void {
    const now = this.now();
    let b = this.buckets.get(key);
    if (!b) {
      b = { tokens: this.capacity, updatedMs: now };
      this.buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.capacity, b.tokens + (now - b.updatedMs) * this.refillPerMs);
      b.updatedMs = now;
    }
    if (b.tokens < 1) {
      const retryAfter = Math.ceil((1 - b.tokens) / this.refillPerMs / 1000);
      throw rateLimited(this.capacity, what, retryAfter);
    }
    b.tokens -= 1;
    if (this.buckets.size > 100_000) this.sweep(now);
  }

  /** Drop full buckets so memory stays bounded by the active clients. */
  private sweep(now: number): void {
    for (const [k, b] of this.buckets) {
      if (b.tokens + (now - b.updatedMs) * this.refillPerMs >= this.capacity) this.buckets.delete(k);
    }
  }
}

/** Counts executions in flight per account; `enter` refuses beyond the cap. */
export class ConcurrencyCap implements ExecutionCap {
  private readonly running = new Map<string, number>();

  constructor(private readonly cap: number) {}

  enter(accountId: string): () => void {
    const n = this.running.get(accountId) ?? 0;
    if (n >= this.cap) {
      throw tooManyConcurrent(accountId, n, this.cap);
    }
    this.running.set(accountId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.running.get(accountId) ?? 1) - 1;
      if (left <= 0) this.running.delete(accountId);
      else this.running.set(accountId, left);
    };
  }
}
