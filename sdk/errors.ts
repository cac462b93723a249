/**
 * One error type for everything the SDK can fail with, in the style of viem's BaseError: a short
 * message for people, the service's details, and `code` as a discriminant to switch on. Codes are the
 * API's own (the OpenAPI document's Error schema lists them all) plus four the client itself produces.
 */
import type { components } from "./generated/schema";

/** Every error code the service can answer with. */
export type ApiErrorCode = components["schemas"]["Error"]["error"]["code"];

/** Failures that happen before the service answers. */
export type ClientErrorCode =
  | "timeout" // the request (including its retries) took longer than `timeoutMs`
  | "aborted" // the caller's AbortSignal fired
  | "network_error" // no answer: connection refused, reset, DNS
  | "invalid_response" // an answer that is not the API's JSON
  | "deadline_exceeded"; // waitUntilExecutable gave up

export type SigilErrorCode = ApiErrorCode | ClientErrorCode;

export interface SigilErrorInit {
  code: SigilErrorCode;
  status?: number;
  requestId?: string;
  details?: Record<string, unknown>;
  cause?: unknown;
  /** METHOD path of the request, for the message. */
  request?: string;
  /** The service's `error.fix`: how to fix it (docs/errors.md). */
  fix?: string;
  /** The service's `error.docs_url`: the code's entry in docs/errors.md. */
  docsUrl?: string;
}

export class SigilError extends Error {
  override name = "SigilError";
  readonly shortMessage: string;
  readonly code: SigilErrorCode;
  /** HTTP status, when the service answered. */
  readonly status?: number;
  /** The service's request id (quote it when reporting a problem). */
  readonly requestId?: string;
  /** The service's `error.details` (which field, which limit, ...). */
  readonly details?: Record<string, unknown>;
  /** How to fix it, from the service's error catalogue (`error.fix`); show it under the message. */
  readonly fix?: string;
  /** Where the code is explained (`error.docs_url`: its entry in docs/errors.md). */
  readonly docsUrl?: string;

  constructor(shortMessage: string, init: SigilErrorInit) {
    const lines = [shortMessage, ""];
    if (init.request) lines.push(`Request: ${init.request}`);
    if (init.status !== undefined) lines.push(`Status: ${init.status} (${init.code})`);
    else lines.push(`Code: ${init.code}`);
    if (init.details && Object.keys(init.details).length)
      lines.push(`Details: ${JSON.stringify(init.details)}`);
    if (init.fix) lines.push(`Fix: ${init.fix}`);
    if (init.docsUrl) lines.push(`Docs: ${init.docsUrl}`);
    if (init.requestId) lines.push(`Request id: ${init.requestId}`);
    super(lines.join("\n"), init.cause === undefined ? undefined : { cause: init.cause });
    this.shortMessage = shortMessage;
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details;
    this.fix = init.fix;
    this.docsUrl = init.docsUrl;
  }
}

export function isSigilError(err: unknown): err is SigilError {
  return err instanceof SigilError;
}

/** Turns a non-2xx answer into a SigilError (the API's envelope, or invalid_response). */
export async function errorFromResponse(response: Response, request: string): Promise<SigilError> {
  const requestId = response.headers.get("x-request-id") ?? undefined;
  let body: unknown;
  try {
    body = await response.json();
  } catch (cause) {
    return new SigilError(`The service answered ${response.status} without the API's JSON error.`, {
      code: "invalid_response",
      status: response.status,
      requestId,
      request,
      cause,
    });
  }
  const envelope = body as {
    error?: { code?: unknown; message?: unknown; details?: unknown; fix?: unknown; docs_url?: unknown };
    request_id?: unknown;
  };
  if (!envelope?.error || typeof envelope.error.code !== "string") {
    return new SigilError(`The service answered ${response.status} without the API's JSON error.`, {
      code: "invalid_response",
      status: response.status,
      requestId,
      request,
    });
  }
  return new SigilError(String(envelope.error.message ?? envelope.error.code), {
    code: envelope.error.code as ApiErrorCode,
    status: response.status,
    requestId: typeof envelope.request_id === "string" ? envelope.request_id : requestId,
    details:
      envelope.error.details && typeof envelope.error.details === "object"
        ? (envelope.error.details as Record<string, unknown>)
        : undefined,
    request,
    fix: typeof envelope.error.fix === "string" ? envelope.error.fix : undefined,
    docsUrl: typeof envelope.error.docs_url === "string" ? envelope.error.docs_url : undefined,
  });
}
