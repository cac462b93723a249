/**
 * The one error type of the HTTP API. Every refusal the service makes is an ApiError with a stable
 * `code` listed in docs/errors.md, and is rendered as
 *   {"error": {"code", "message", "details"?}, "request_id"}
 * with `status` as the HTTP status (design §8, docs/background.md). Anything else that reaches the error handler
 * is a bug and becomes a 500 `internal_error` without leaking its message.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details?: Record<string, unknown>;
  /** Seconds, for 429/503 answers that carry a Retry-After header. */
  readonly retryAfter?: number;

  constructor(
    status: number,
    code: string,
    message: string,
    options: { details?: Record<string, unknown>; retryAfter?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = options.details;
    this.retryAfter = options.retryAfter;
  }

  toJSON(): { code: string; message: string; details?: Record<string, unknown> } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

export function isApiError(e: unknown): e is ApiError {
  return e instanceof ApiError;
}
