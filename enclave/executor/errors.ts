/**
 * Errors of the executor. Action failures are never thrown: they are RunResult values with
 * `has_error: true` and one of ACTION_ERROR_CODES (documented in docs/actions.md). Only two things
 * reject `run()`: a full queue (ExecutorBusyError) and a closed executor (ExecutorClosedError).
 */
import { SEND_ERROR_CODES } from "./send/errors";

export const ACTION_ERROR_CODES = [
  "action_threw",
  "syntax_error",
  "timeout",
  "heap_limit",
  "memory_limit",
  "worker_crashed",
  "code_too_large",
  "params_too_large",
  "params_not_json",
  "response_too_large",
  "response_not_json",
  "key_ops_limit",
  "fetch_limit",
  "sleep_limit",
  "fetch_disabled",
  "fetch_host_not_allowed",
  "fetch_address_refused",
  "fetch_timeout",
  "fetch_failed",
  "fetch_response_too_large",
  "pkp_not_authorized",
  "policy_denied",
  "invalid_argument",
  "key_op_failed",
  "key_op_too_large",
  "unhandled_rejection",
  "param_shadows_global",
  // ES module imports (modules/errors.ts)
  "import_invalid",
  "import_not_pinned",
  "import_integrity_mismatch",
  "import_fetch_failed",
  "import_redirect_refused",
  "import_address_refused",
  "import_too_large",
  "import_limit",
  "import_timeout",
  "imports_disabled",
  // Actions.sendTransaction (send/errors.ts)
  ...SEND_ERROR_CODES,
] as const;

export type ActionErrorCode = (typeof ACTION_ERROR_CODES)[number];

export class ExecutorBusyError extends Error {
  readonly code = "executor_busy" as const;
  readonly retryAfterSeconds: number;

  constructor(retryAfterSeconds: number) {
    super(`the action executor is busy (queue full); retry after ${retryAfterSeconds} s`);
    this.name = "ExecutorBusyError";
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export class ExecutorClosedError extends Error {
  readonly code = "executor_closed" as const;

  constructor() {
    super("the action executor is closed");
    this.name = "ExecutorClosedError";
  }
}
