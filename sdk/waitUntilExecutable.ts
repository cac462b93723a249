/**
 * Right after a group or PKP change, or a new grant, the first execution may be refused for a moment (the
 * service applies chain events as they are mined: the way to know is to poll the real execution path, not
 * to sleep a fixed time). This runs the execution itself until it is accepted, within a deadline, and
 * returns its result. Only refusals that can become executable are retried (a grant, a PKP or an action
 * still propagating); anything else is thrown at once. In particular a key the service does not know
 * (`unknown_api_key`: wrong, or revoked), an expired one (`api_key_expired`) or a malformed one
 * (`invalid_api_key`) fails on the first answer: the service looks up a key it has not seen yet in the
 * registry before answering, so waiting would not change it.
 */
import { SigilError } from "./errors";
import type { ExecuteParams, ExecutionResult } from "./types";

export const NOT_YET_VISIBLE = new Set<string>([
  "not_authorized_to_execute",
  "pkp_not_found",
  "action_not_found",
]);

export interface WaitOptions {
  /** Give up after this many ms (default 30 000). */
  deadlineMs?: number;
  /** Pause between attempts in ms (default 200, doubling up to 2 000). */
  intervalMs?: number;
  signal?: AbortSignal;
}

export async function waitUntilExecutable(
  execute: (params: ExecuteParams, signal?: AbortSignal) => Promise<ExecutionResult>,
  params: ExecuteParams,
  opts: WaitOptions = {},
): Promise<ExecutionResult> {
  const deadline = Date.now() + (opts.deadlineMs ?? 30_000);
  let interval = opts.intervalMs ?? 200;
  for (let attempt = 1; ; attempt++) {
    try {
      return await execute(params, opts.signal);
    } catch (err) {
      if (!(err instanceof SigilError) || !NOT_YET_VISIBLE.has(err.code)) throw err;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new SigilError(`Still not executable after ${attempt} attempts: ${err.shortMessage}`, {
          code: "deadline_exceeded",
          cause: err,
          details: { attempts: attempt, last_code: err.code },
        });
      }
      await new Promise((r) => setTimeout(r, Math.min(interval, left)));
      interval = Math.min(interval * 2, 2_000);
    }
  }
}
