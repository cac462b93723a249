/**
 * The intake's own refusals, where the service, the app's hook route and the hooks' listener's thread
 * (hookThread.ts, which must not load the service) all build them.
 */
import { ApiError } from "../errors";

/** Unknown, disabled and deleted triggers alike: nothing says whether it existed. */
export function notFound(): ApiError {
  return new ApiError("trigger_not_found", "No trigger with this id in this account.");
}

/** The trigger's queue is full, or it fired its runs of the minute. */
export function refusal(reason: "queue_full" | "rate", limit: number): ApiError {
  return new ApiError(
    "trigger_queue_full",
    reason === "queue_full"
      ? `The trigger already has ${limit} runs queued (limits.max_queued_runs).`
      : `The trigger already fired ${limit} runs in the last minute (limits.runs_per_minute).`,
    { retryAfter: reason === "queue_full" ? 5 : 60, details: { reason, limit } },
  );
}
