/**
 * When a failed delivery is tried again: exponential backoff with jitter, for up to three days after
 * its first failure (docs/webhooks.md, "Retries"). Injectable so that tests run the whole schedule in
 * seconds.
 */
export interface RetrySchedule {
  /** Wait before the next attempt, after `failures` failed attempts (1 after the first failure). */
  delayMs(failures: number): number;
  /** A delivery still failing this long after its first failure is given up. */
  giveUpAfterMs: number;
}

export const THREE_DAYS_MS = 3 * 24 * 60 * 60 * 1000;

/** base · 2^(failures−1), at most `maxMs`, times a random factor in [0.75, 1.25] (receivers coming back are not hit in step). */
export function exponentialBackoff(opts: {
  baseMs: number;
  maxMs: number;
  giveUpAfterMs: number;
  random?: () => number;
}): RetrySchedule {
  const random = opts.random ?? Math.random;
  return {
    giveUpAfterMs: opts.giveUpAfterMs,
    delayMs(failures) {
      const plain = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.min(30, Math.max(0, failures - 1)));
      return Math.round(plain * (0.75 + 0.5 * random()));
    },
  };
}

/** The production schedule: 30 s, 1 min, 2 min, … capped at 6 h; about 20 attempts over 3 days. */
export const DEFAULT_RETRY_SCHEDULE: RetrySchedule = exponentialBackoff({
  baseMs: 30_000,
  maxMs: 6 * 60 * 60 * 1000,
  giveUpAfterMs: THREE_DAYS_MS,
});
