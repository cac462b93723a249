/**
 * What every answered request leaves behind: its count and duration in the metrics, and one log line
 * (an error line for a 5xx). Written by the app's request-log middleware (app.ts), by the hooks'
 * fast path, which answers some requests before the app sees them (triggers/hookFastPath.ts), and by
 * the hooks' own listener for the calls its thread hands over (triggers/hookListener.ts; its thread's
 * refusals are counted in bulk there instead).
 */
import type { RelayerContext } from "../context";

export interface AnsweredRequest {
  requestId: unknown;
  correlationId: unknown;
  method: string | undefined;
  /** The route's pattern (`/hooks/v1/:hook_id`), or "unmatched". */
  route: string;
  status: number;
  ms: number;
  /** The error's code, when the answer is an error. */
  code?: unknown;
  accountId?: string;
}

export function logRequest(ctx: Pick<RelayerContext, "metrics" | "logger">, r: AnsweredRequest): void {
  ctx.metrics.httpRequests.inc({ method: r.method, route: r.route, status: String(r.status) });
  ctx.metrics.httpDuration.observe({ method: r.method, route: r.route }, r.ms / 1000);
  const line = {
    request_id: r.requestId,
    correlation_id: r.correlationId,
    method: r.method,
    route: r.route,
    status: r.status,
    ms: Math.round(r.ms * 10) / 10,
    code: r.code,
    account_id: r.accountId,
  };
  if (r.status >= 500) ctx.logger.error(line, "request");
  else ctx.logger.info(line, "request");
}
