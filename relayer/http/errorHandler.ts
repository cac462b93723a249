/**
 * The one place errors become HTTP answers. ApiErrors render as
 *   {"error": {"code", "message", "details"?, "fix", "docs_url"}, "request_id"}
 * (`fix` is the catalogue's, relayer/errorCatalogue.ts; `docs_url` the code's entry in docs/errors.md)
 * with their status (and Retry-After). Body-parser failures are the client's, not ours: malformed JSON is
 * 400 invalid_json, an oversized body 413 payload_too_large. Anything else is a bug: 500 internal_error,
 * logged with its stack, without leaking its message.
 */
import type { NextFunction, Request, Response } from "express";
import type { Logger } from "pino";
import { ApiError, isApiError } from "../errors";

interface BodyParserError {
  type?: string;
  status?: number;
  expose?: boolean;
}

export function toApiError(err: unknown): ApiError | undefined {
  if (isApiError(err)) return err;
  const e = err as BodyParserError | undefined;
  switch (e?.type) {
    case "entity.parse.failed":
      return new ApiError("invalid_json", "The request body is not valid JSON.");
    case "entity.too.large":
      return new ApiError("payload_too_large", "The request body is larger than the limit.");
    case "encoding.unsupported":
    case "charset.unsupported":
      return new ApiError("unsupported_media_type", "Unsupported body encoding or charset; send UTF-8 JSON.");
    case "request.aborted":
    case "request.size.invalid":
    case "stream.encoding.set":
      return new ApiError("invalid_request", "The request body could not be read.");
  }
  // A path with broken percent-encoding (e.g. /groups/%zz): express's router fails to decode the param.
  if (err instanceof URIError)
    return new ApiError("invalid_request", "The path holds malformed percent-encoding.");
  // Other errors thrown by express/body-parser with a 4xx status are client mistakes too.
  if (e && typeof e.status === "number" && e.status >= 400 && e.status < 500) {
    return new ApiError("invalid_request", "The request could not be read.");
  }
  return undefined;
}

/** The Retry-After header's value for an error that carries one (whole seconds, at least 1). */
export function retryAfterHeader(err: ApiError): string | undefined {
  return err.retryAfter === undefined ? undefined : String(Math.max(1, Math.ceil(err.retryAfter)));
}

/** The body of every error answer. */
export function errorBody(
  err: ApiError,
  requestId: unknown,
): { error: ReturnType<ApiError["toJSON"]>; request_id: unknown } {
  return { error: err.toJSON(), request_id: requestId };
}

export function sendError(res: Response, err: ApiError): void {
  const retryAfter = retryAfterHeader(err);
  if (retryAfter !== undefined) res.setHeader("Retry-After", retryAfter);
  res.status(err.status).json(errorBody(err, res.locals.requestId));
}

export function errorHandler(logger: Logger) {
  // Express recognises error handlers by their four parameters.
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const apiError = toApiError(err);
    if (res.headersSent) {
      logger.error(
        { request_id: res.locals.requestId, err: describe(err) },
        "error after the response started",
      );
      return;
    }
    if (apiError) {
      res.locals.errorCode = apiError.code;
      sendError(res, apiError);
      return;
    }
    logger.error({ request_id: res.locals.requestId, err: describe(err) }, "unhandled error");
    res.locals.errorCode = "internal_error";
    sendError(res, new ApiError("internal_error", "Internal error. Report the request_id."));
  };
}

/** Error summary for logs: type, message and stack, nothing else (no request bodies, no headers). */
function describe(err: unknown): Record<string, unknown> {
  if (err instanceof Error) return { type: err.name, message: err.message, stack: err.stack };
  return { value: String(err) };
}
