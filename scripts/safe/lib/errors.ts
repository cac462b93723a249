/**
 * Typed errors of the Safe tooling. Every failure a user can cause has a stable `code` so scripts and
 * tests can branch on it, and a message that says what to do next.
 */
export type SafeCliErrorCode =
  | "invalid_argument"
  | "invalid_proposal_file"
  | "not_owner"
  | "wrong_safe"
  | "wrong_chain"
  | "proposal_mismatch"
  | "insufficient_signatures"
  | "stale_nonce"
  | "already_signed"
  | "already_executed"
  | "execution_reverted"
  | "safe_not_deployed"
  | "no_safe_deployments"
  | "no_registry"
  | "unknown_method"
  | "unknown_group"
  | "incomplete_logs"
  | "rpc_unreachable";

export class SafeCliError extends Error {
  readonly code: SafeCliErrorCode;
  readonly details?: Record<string, unknown>;
  constructor(code: SafeCliErrorCode, message: string, details?: Record<string, unknown>, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "SafeCliError";
    this.code = code;
    this.details = details;
  }
}
