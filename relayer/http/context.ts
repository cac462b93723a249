/**
 * Request identity: every response carries a fresh `X-Request-Id` (a client value is ignored, so ids in
 * our logs are always ours) and echoes `X-Correlation-Id` (the client's, if it is a sane printable
 * string, else the request id) so a caller can join our logs with theirs (design §8, docs/background.md).
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Express, NextFunction, Request, Response } from "express";

const CORRELATION_ID = /^[\x21-\x7e]{1,128}$/;

/** A request's ids: a fresh request id, and the client's correlation id when it is sane, else the request id. */
export function requestIds(offeredCorrelationId: string | undefined): {
  requestId: string;
  correlationId: string;
} {
  const requestId = randomUUID();
  const offered = offeredCorrelationId;
  const correlationId = offered !== undefined && CORRELATION_ID.test(offered) ? offered : requestId;
  return { requestId, correlationId };
}

export function requestContext(req: Request, res: Response, next: NextFunction): void {
  stampRequest(req, res);
  next();
}

/** What requestContext does before it calls on: the ids in `res.locals` and the answer's headers. */
export function stampRequest(req: Request, res: Response): void {
  // The header as Node parsed it (lower-case name): what `req.get` reads, without its lookup.
  const offered = req.headers["x-correlation-id"];
  const { requestId, correlationId } = requestIds(Array.isArray(offered) ? offered[0] : offered);
  res.locals.requestId = requestId;
  res.locals.correlationId = correlationId;
  res.locals.startedAt = process.hrtime.bigint();
  res.setHeader("X-Request-Id", requestId);
  res.setHeader("X-Correlation-Id", correlationId);
}

/** Client address for per-IP limits (the socket's; a proxy deployment would configure `trust proxy`). */
export function clientIp(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? "unknown";
}

/**
 * The same address for a request `app` has not seen yet (relayer/triggers/hookFastPath.ts): the request
 * gets the app's request prototype, as the app itself gives it first thing, so `req.ip` reads it with
 * the app's `trust proxy` setting and both readings agree.
 */
export function clientIpBeforeExpress(app: Express, req: IncomingMessage): string {
  Object.setPrototypeOf(req, app.request);
  return clientIp(req as Request);
}
