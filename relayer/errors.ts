import { BILLING_ERROR_CATALOGUE, type BillingErrorCode } from "./billing/errorCatalogue";
import { ERROR_CATALOGUE, type ErrorEntry, type RelayerErrorCode } from "./errorCatalogue";

/**
 * Every code an ApiError may carry: the keys of the relayer's catalogue and of billing's. A literal union,
 * so a code that is not catalogued does not compile (add it to the catalogue first: docs/development.md).
 */
export type ErrorCode = RelayerErrorCode | BillingErrorCode;

/** Both catalogues, keyed by code; the lookup below takes any string (a code read off the wire, a test). */
const CATALOGUE: Readonly<Record<string, ErrorEntry | undefined>> = {
  ...ERROR_CATALOGUE,
  ...BILLING_ERROR_CATALOGUE,
};

/** The catalogue's entry for a code (status, why, fix), or undefined when the code is not catalogued. */
export function catalogueEntry(code: string): ErrorEntry | undefined {
  return CATALOGUE[code];
}

/**
 * Where an error code is explained: its row in docs/errors.md (each row carries an anchor named after
 * the code). A path in the repository: the documentation ships with the code.
 */
export function errorDocsUrl(code: string): string {
  return `docs/errors.md#${code}`;
}

/** What every error body carries to teach: the catalogue's fix for the code, and where it is documented. */
export function errorHelp(code: string): { fix?: string; docs_url: string } {
  const entry = catalogueEntry(code);
  return entry ? { fix: entry.fix, docs_url: errorDocsUrl(code) } : { docs_url: errorDocsUrl(code) };
}

/**
 * The one error type of the HTTP API. Every refusal the service makes is an ApiError with a stable
 * `code` listed in docs/errors.md, and is rendered as
 *   {"error": {"code", "message", "details"?, "fix", "docs_url"}, "request_id"}
 * with `status` as the HTTP status (design §8, docs/background.md). Anything else that reaches the error handler
 * is a bug and becomes a 500 `internal_error` without leaking its message.
 *
 * The status is not an argument: it is the catalogue's, so a code's status is written once
 * (relayer/errorCatalogue.ts, or relayer/billing/errorCatalogue.ts for billing's codes) and a throw site
 * cannot answer a code with a status the documentation does not give it.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details?: Record<string, unknown>;
  /** Seconds, for 429/503 answers that carry a Retry-After header. */
  readonly retryAfter?: number;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: Record<string, unknown>; retryAfter?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ApiError";
    this.status = CATALOGUE[code]!.status;
    this.code = code;
    this.details = options.details;
    this.retryAfter = options.retryAfter;
  }

  /** The body's `error`: code, message, details (if any), and the catalogue's fix with its docs_url. */
  toJSON(): {
    code: string;
    message: string;
    details?: Record<string, unknown>;
    fix?: string;
    docs_url: string;
  } {
    return {
      code: this.code,
      message: this.message,
      ...(this.details === undefined ? {} : { details: this.details }),
      ...errorHelp(this.code),
    };
  }
}

export function isApiError(e: unknown): e is ApiError {
  return e instanceof ApiError;
}
