/**
 * What becomes of a run that ended in an error, by the error: one table, so the runner, the docs and
 * the tests agree (docs/triggers.md, "Retries").
 *
 * - `retry`: transient (the executor was busy or shutting down, an internal error): another attempt
 *   after backoff, up to the trigger's `max_attempts`;
 * - `skip`: the account cannot pay (`insufficient_credits` also pauses the account's triggers);
 * - `fail`: final, no retry (the usage key was revoked, expired or narrowed; the action's code is
 *   gone; the run was refused by the account's mode).
 */
import { ApiError } from "../errors";

export type ErrorOutcome =
  | { kind: "retry"; code: string; message: string }
  | { kind: "skip"; code: "insufficient_credits" | "spend_cap_reached"; message: string }
  | { kind: "fail"; code: string; message: string };

const TRANSIENT = new Set([
  "executor_busy",
  "too_many_concurrent_executions",
  "chain_unavailable",
  "database_unavailable",
]);

export function outcomeOf(err: unknown): ErrorOutcome {
  if (err instanceof ApiError) {
    if (err.code === "insufficient_credits" || err.code === "spend_cap_reached")
      return { kind: "skip", code: err.code, message: err.message };
    if (TRANSIENT.has(err.code)) return { kind: "retry", code: err.code, message: err.message };
    return { kind: "fail", code: err.code, message: err.message };
  }
  // Not a refusal: a bug or a dependency failing mid-run. Another attempt may succeed.
  return { kind: "retry", code: "internal_error", message: "The run failed inside the service." };
}

/** Delay before attempt `attempt + 1` (attempt counts from 1): backoff, doubled each time, capped at an hour. */
export function backoffDelayMs(backoffMs: number, attempt: number): number {
  return Math.min(backoffMs * 2 ** Math.max(0, attempt - 1), 3_600_000);
}
