/**
 * Request identity: every response carries a fresh `X-Request-Id` (a client value is ignored, so ids in
 * our logs are always ours) and echoes `X-Correlation-Id` (the client's, if it is a sane printable
 * string, else the request id) so a caller can join our logs with theirs (design §8, docs/background.md).
 */
import { randomUUID } from "node:crypto";
import type { NextFunction, Request, Response } from "express";

const CORRELATION_ID = /^[\x21-\x7e]{1,128}$/;

export function requestContext(req: Request, res: Response, next: NextFunction): void {
  const requestId = randomUUID();
  const offered = req.get("x-correlation-id");
  const correlationId = offered !== undefined && CORRELATION_ID.test(offered) ? offered : requestId;
  res.locals.requestId = requestId;
  res.locals.correlationId = correlationId;
  res.locals.startedAt = process.hrtime.bigint();
  res.setHeader("X-Request-Id", requestId);
  res.setHeader("X-Correlation-Id", correlationId);
  next();
}

/** Client address for per-IP limits (the socket's; a proxy deployment would configure `trust proxy`). */
export function clientIp(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? "unknown";
}
