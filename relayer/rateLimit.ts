/**
 * Rate limits (reference gap 12, docs/background.md): token buckets keyed by usage key, account or client IP, and a
 * counter of executions running per account. In memory on the embedded default (a restart forgets
 * them, which errs on the side of availability); with PostgreSQL they are shared by every instance
 * (relayer/db/sharedLimits.ts), behind the same two interfaces.
 */
import type { NextFunction, Request, Response } from "express";
import type { RidingAdmission } from "./db/riding";
import { ApiError } from "./errors";
import { clientIp } from "./http/context";

/** Takes one request's token, or throws 429 rate_limited with Retry-After. */
export interface RateLimiter {
  take(key: string, what: string): void | Promise<void>;
  /**
   * Optional: this limit's token and then each of `then`'s, in one step where they share a store (one
   * statement on PostgreSQL); null when they do not (the caller takes them one by one).
   */
  takeAlong?(key: string, what: string, then: readonly LimitTake[]): Promise<void> | null;
}

/** One token to take: from `limiter`'s bucket `key`; `what` names it in the 429's message. */
export interface LimitTake {
  limiter: RateLimiter;
  key: string;
  what: string;
}

/**
 * One token from each limit, in order, as separate `take`s would: the first refusal is thrown and the
 * limits after it are not charged (those before it are). In one database statement when the limiters
 * can take them together.
 */
export async function takeInOrder(takes: readonly LimitTake[]): Promise<void> {
  if (!takes.length) return;
  const [first, ...then] = takes;
  const together = first.limiter.takeAlong?.(first.key, first.what, then);
  if (together) return together;
  for (const t of takes) await t.limiter.take(t.key, t.what);
}

/** Admits one more execution of the account, or throws 429; the returned function releases it (once). */
export interface ExecutionCap {
  enter(accountId: string): (() => void) | Promise<() => void>;
  /**
   * Optional: the same admission as statements that ride in another admission's round trip (the
   * run's reservation, relayer/execution/admission.ts); absent where the cap is not in a database.
   */
  leaseAlong?(accountId: string): RidingLease;
}

/** A lease riding in another admission's round trip; `release` is set once it was admitted. */
export interface RidingLease extends RidingAdmission {
  readonly release: (() => void) | null;
}

export function rateLimited(capacity: number, what: string, retryAfter: number): ApiError {
  return new ApiError("rate_limited", `Rate limit reached for ${what}; retry in ${retryAfter} s.`, {
    retryAfter,
    details: { limit: capacity, scope: what.split(" ")[0] },
  });
}

export function tooManyConcurrent(accountId: string, running: number, cap: number): ApiError {
  return new ApiError(
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

/**
 * Per-IP limit before authentication: mounted ahead of every /core/v1 route, so a request with an
 * unknown key (which costs a chain call to refuse) or for a public route (GET /pkps/:id) is counted
 * before anything else runs. The client address is Express's `req.ip`, i.e. the socket's unless the
 * deployment configured `trustProxy` (docs/configuration.md).
 *
 * `defer(req)`: the request's key is one the permission cache already holds (nothing costly runs
 * before its authentication). Then, where the limits live in a database that can take several in
 * one statement, the IP's token is left to authentication, which takes it first in the same statement
 * as the key's and the account's (claimIpToken). A deferred token nobody claimed (the request was
 * answered before authentication: a malformed body, an unknown route) is taken once it closes.
 */
export function perIpLimit(limiter: RateLimiter, defer?: (req: Request) => boolean) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const ip = limitedAddress(clientIp(req));
    const take: LimitTake = { limiter, key: `ip:${ip}`, what: `ip ${ip}` };
    if (limiter.takeAlong && defer?.(req)) {
      const deferred: Deferred = { take, claimed: false };
      res.locals[DEFERRED_IP] = deferred;
      res.once("close", () => {
        if (deferred.claimed) return;
        deferred.claimed = true;
        Promise.resolve()
          .then(() => limiter.take(take.key, take.what))
          .catch(() => undefined); // answered already: a refusal or a failure has no one to tell
      });
      next();
      return;
    }
    // `take` is synchronous in memory and asynchronous on the shared (PostgreSQL) buckets; either way
    // a refusal reaches the error handler as a typed 429 and a database failure as database_unavailable.
    let taken: void | Promise<void>;
    try {
      taken = limiter.take(take.key, take.what);
    } catch (err) {
      next(err);
      return;
    }
    if (taken instanceof Promise) taken.then(() => next(), next);
    else next();
  };
}

const DEFERRED_IP = "sigilDeferredIpToken";
interface Deferred {
  take: LimitTake;
  claimed: boolean;
}

/**
 * The IP's token perIpLimit left to authentication, if any: from now on the caller's to take (first,
 * before the request's other limits or anything else). Undefined when it was taken already.
 */
export function claimIpToken(res: Response): LimitTake | undefined {
  const deferred = res.locals[DEFERRED_IP] as Deferred | undefined;
  if (!deferred || deferred.claimed) return undefined;
  deferred.claimed = true;
  return deferred.take;
}

/** For routes that do not authenticate (public, a wallet sign-in's own): the deferred IP token, taken now. */
export function takeClaimedIpToken(_req: Request, res: Response, next: NextFunction): void {
  const take = claimIpToken(res);
  if (!take) {
    next();
    return;
  }
  takeInOrder([take]).then(() => next(), next);
}

/**
 * The unit a per-IP limit counts: an IPv4 address, or an IPv6 address's /64 prefix (written `a:b:c:d::/64`).
 * One IPv6 host usually holds a whole /64 and can pick a fresh address per request, so counting single
 * IPv6 addresses would give it 2^64 budgets. IPv4-mapped addresses (::ffff:1.2.3.4) count as IPv4.
 */
export function limitedAddress(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1];
  if (!ip.includes(":")) return ip;
  const [head, tail] = ip.split("::", 2);
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups =
    tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return ip;
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}
