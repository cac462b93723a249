/**
 * Limits of one action run (DESIGN.md section 6). Every field can be set per executor and overridden per
 * run, except `heapMb`, which is a property of the pre-warmed worker (V8 resourceLimits) and therefore
 * pool-wide: a per-run `heapMb` is ignored (docs/actions.md).
 */
export interface ExecutorLimits {
  /** Wall time of a run, from dispatch to its answer; past it the worker is terminated and replaced. */
  wallTimeMs: number;
  /** V8 heap of each worker (old generation), enforced by resourceLimits. Pool-wide. */
  heapMb: number;
  /** Inline code size (UTF-8 bytes). */
  maxCodeBytes: number;
  /** js_params size, as JSON (UTF-8 bytes). */
  maxParamsBytes: number;
  /** Response size, as JSON (UTF-8 bytes). */
  maxResponseBytes: number;
  /** Captured console output; past it logs are truncated (not fatal). */
  maxLogBytes: number;
  /** Key operations per run (every Actions call that reaches the enclave). */
  maxKeyOps: number;
  /** fetch calls per run. */
  maxFetches: number;
  /** Time limit of one fetch, headers and body. */
  fetchTimeoutMs: number;
  /** Longest single sleep(ms). */
  maxSleepMs: number;
  /** ArrayBuffer memory of a worker (off the V8 heap), watched from the parent. */
  offHeapMb: number;
  /** Body size of one fetch answer. */
  maxFetchBodyBytes: number;
  /**
   * A key operation's message (signMessage) or plaintext (encrypt), in bytes (UTF-8 for strings). The
   * ciphertext that decrypt accepts is bounded by the envelope of a plaintext of this size.
   */
  maxKeyOpPayloadBytes: number;
  /** signTypedData's {domain, types, value}, as JSON (UTF-8 bytes). */
  maxTypedDataBytes: number;
}

export const DEFAULT_LIMITS: ExecutorLimits = Object.freeze({
  wallTimeMs: 30_000,
  heapMb: 128,
  maxCodeBytes: 256 * 1024,
  maxParamsBytes: 64 * 1024,
  maxResponseBytes: 1024 * 1024,
  maxLogBytes: 100 * 1024,
  maxKeyOps: 1000,
  maxFetches: 10,
  fetchTimeoutMs: 10_000,
  maxSleepMs: 10_000,
  offHeapMb: 64,
  maxFetchBodyBytes: 5 * 1024 * 1024,
  maxKeyOpPayloadBytes: 128 * 1024,
  maxTypedDataBytes: 32 * 1024,
});

/** Merge overrides onto a base, keeping only known fields with positive finite values. */
export function mergeLimits(base: ExecutorLimits, overrides?: Partial<ExecutorLimits>): ExecutorLimits {
  const out = { ...base };
  if (overrides === undefined || overrides === null) return out;
  for (const key of Object.keys(base) as Array<keyof ExecutorLimits>) {
    const v = overrides[key];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      throw new RangeError(`executor limit ${key} must be a positive number`);
    }
    out[key] = v;
  }
  return out;
}
