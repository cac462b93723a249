/**
 * Waiting for something another process or a poll loop will make true (an instance learning of an
 * account from the chain, a revocation reaching the cache): one helper, so every test waits the same way
 * and says what it waited for when it gives up.
 */

export interface EventuallyOptions {
  /** Named in the error when the wait gives up ("instance 2 to know the account"). */
  what?: string;
  /** Default 10 s. */
  timeoutMs?: number;
  /** Default 50 ms. */
  intervalMs?: number;
}

type Answer<T> = Exclude<T, undefined | false>;

/**
 * Polls `probe` until it answers something other than `undefined` or `false`, and returns that answer.
 * A probe that throws counts as "not yet" (a server still starting refuses connections); the last error
 * is the cause of the time-out.
 */
export async function eventually<T>(
  probe: () => Promise<T> | T,
  opts: EventuallyOptions = {},
): Promise<Answer<T>> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v as Answer<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what ?? "a condition"}`, {
        cause: lastError,
      });
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50));
  }
}

/** How long `probe` took to hold (ms), for tests that bound a propagation delay. */
export async function timeUntil(
  probe: () => Promise<boolean>,
  opts: EventuallyOptions = {},
): Promise<number> {
  const t0 = Date.now();
  await eventually(probe, opts);
  return Date.now() - t0;
}
