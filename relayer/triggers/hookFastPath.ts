/**
 * The hooks' fast path: `POST /hooks/v1/<id>` calls refused before the Express app sees them, so that a
 * flood of refused calls costs the relayer's one event loop as little as it can (docs/triggers.md,
 * "Security bounds"). It answers only what needs neither the body nor the database:
 *
 *  - the source's per-IP limit exceeded: 429 rate_limited;
 *  - a malformed hook id: 404 trigger_not_found;
 *  - a hook this instance remembers as unknown, disabled or deleted: 404 trigger_not_found;
 *  - a fresh delivery to a trigger whose queue (or minute's runs) this instance knows is full, with no
 *    run claimed here since to make room: 429 trigger_queue_full
 *    (after the trigger's own limit, which may answer 429 rate_limited first, as on the app's path).
 *
 * Each answer is the app's, byte for byte but the ids and the date (same status, headers and JSON body:
 * routes/hooks.ts takes the same steps in the same order, test/triggers/hookFastPath.test.ts compares
 * them), and the same request log line and metrics. Everything else goes to the app unchanged: a body
 * that may be over the limit (413 comes first there), a trigger with an HMAC (401 comes before the
 * queue), a delivery id (a re-delivery is answered its run), a hook not remembered (the database), a
 * paused trigger, and any path or method this parser does not recognise exactly. The hints' guarantee
 * stands: a stale hint only refuses early, never stores anything (intakeHints.ts).
 *
 * The body of a refused call is never read into memory: `resume()` discards it as it arrives, so the
 * keep-alive connection is ready for the next request once it is in (Node would discard it too after
 * the answer; saying so here keeps it from depending on that). Only bodies announced within the hooks'
 * limit are refused here, so the discarding is bounded.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import type { Express } from "express";
import type { RelayerContext } from "../context";
import { ApiError, isApiError } from "../errors";
import { clientIpBeforeExpress, requestIds } from "../http/context";
import { errorBody, retryAfterHeader } from "../http/errorHandler";
import { logRequest } from "../http/requestLog";
import type { RateLimiter } from "../rateLimit";
import { deliveryIdOf, HOOK_ID, HOOK_PATH, HOOK_ROUTE as ROUTE, markIpTaken } from "./hookRequest";
import { notFound } from "./service";

/** The request listener to serve: the fast path, then `app` for everything it does not answer. */
export function withHookFastPath(ctx: RelayerContext, app: Express): RequestListener {
  const fastPath = hookFastPath(ctx, app);
  return (req, res) => {
    if (!fastPath(req, res)) app(req, res);
  };
}

/** Answers the call, or hands it on (false); asynchronously only when a shared rate limit is asked. */
function hookFastPath(ctx: RelayerContext, app: Express) {
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== "POST") return false;
    const m = HOOK_PATH.exec(req.url ?? "");
    if (!m || !withinBodyLimit(req, ctx.cfg.triggers.hookBodyBytes)) return false;
    const started = process.hrtime.bigint();
    const hookId = m[1];
    const ip = clientIpBeforeExpress(app, req);
    const answer = (err: ApiError) => refuse(ctx, req, res, err, started);
    // A bug here must not take the process down (the listener's throw would): the app answers instead.
    const guarded =
      <A extends unknown[]>(step: (...args: A) => void) =>
      (...args: A) => {
        try {
          step(...args);
        } catch (err) {
          ctx.logger.error({ err: String(err) }, "hooks' fast path failed; the app answers");
          if (!res.headersSent) app(req, res);
        }
      };
    take(
      ctx.triggers.hookIpLimit,
      `hip:${ip}`,
      `address ${ip}`,
      guarded((taken) => {
        if (taken !== true) {
          // A refusal is answered; a failure of a shared limit's database goes to the app, which asks
          // again and answers it as it answers every failure.
          if (taken === false) app(req, res);
          else answer(taken);
          return;
        }
        markIpTaken(req);
        const known = refusalFromMemory(ctx, req, hookId);
        if (known === null) {
          app(req, res);
          return;
        }
        if (known.triggerId === null) {
          answer(known.refusal);
          return;
        }
        const id = known.triggerId;
        take(
          ctx.triggers.hookTriggerLimit,
          `htr:${id}`,
          `trigger ${id}`,
          guarded((ok) => {
            // The trigger's token was not taken when the shared limit failed: the app takes it.
            if (ok === false) app(req, res);
            else answer(ok === true ? known.refusal : ok);
          }),
        );
      }),
    );
    return true;
  };
}

/**
 * The answer this instance can give from memory (the same as routes/hooks.ts would give after reading
 * the body), or null: the app decides. A refusal of a trigger names it: its own limit is taken by the
 * caller, between the two, as on the app's path.
 */
function refusalFromMemory(
  ctx: RelayerContext,
  req: IncomingMessage,
  hookId: string,
): { refusal: ApiError; triggerId: string | null } | null {
  if (!HOOK_ID.test(hookId)) return { refusal: notFound(), triggerId: null };
  const t = ctx.triggers.rememberedHook(hookId);
  if (t === undefined) return null;
  if (t === null || !t.enabled || !t.webhook) return { refusal: notFound(), triggerId: null };
  // Asked of the app, in its order: the signature (needs the body), a re-delivery's run, the pause.
  if (t.webhook.hmac || deliveryIdOf(req.headers) !== null || t.paused) return null;
  const full = ctx.triggers.knownFull(t.id);
  return full === null ? null : { refusal: full, triggerId: t.id };
}

/**
 * One token from `limiter`: `then(true)` when taken, the 429 when refused, false when a shared limit's
 * database failed. Synchronously for the in-memory buckets.
 */
function take(
  limiter: RateLimiter,
  key: string,
  what: string,
  then: (outcome: true | false | ApiError) => void,
): void {
  let pending: void | Promise<void>;
  try {
    pending = limiter.take(key, what);
  } catch (err) {
    then(isRateLimited(err) ? err : false);
    return;
  }
  if (!(pending instanceof Promise)) {
    then(true);
    return;
  }
  pending.then(
    () => then(true),
    (err: unknown) => then(isRateLimited(err) ? err : false),
  );
}

function isRateLimited(err: unknown): err is ApiError {
  return isApiError(err) && err.code === "rate_limited";
}

/** A body announced within the limit (a chunked one, or one over it, is the app's to read and refuse). */
function withinBodyLimit(req: IncomingMessage, limit: number): boolean {
  if (req.headers["transfer-encoding"] !== undefined) return false;
  const length = req.headers["content-length"];
  if (length === undefined) return true;
  return /^\d{1,15}$/.test(length) && Number(length) <= limit;
}

/** Writes the app's error answer (sendError, errorHandler.ts) with the app's request ids and log line. */
function refuse(
  ctx: RelayerContext,
  req: IncomingMessage,
  res: ServerResponse,
  err: ApiError,
  started: bigint,
): void {
  const offered = req.headers["x-correlation-id"];
  const { requestId, correlationId } = requestIds(Array.isArray(offered) ? offered.join(", ") : offered);
  const body = JSON.stringify(errorBody(err, requestId));
  res.statusCode = err.status;
  res.setHeader("X-Request-Id", requestId);
  res.setHeader("X-Correlation-Id", correlationId);
  const retryAfter = retryAfterHeader(err);
  if (retryAfter !== undefined) res.setHeader("Retry-After", retryAfter);
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", Buffer.byteLength(body));
  // Discarded, never buffered: the connection stays usable for the client's next request.
  req.resume();
  res.end(body);
  logRequest(ctx, {
    requestId,
    correlationId,
    method: req.method,
    route: ROUTE,
    status: err.status,
    ms: Number(process.hrtime.bigint() - started) / 1e6,
    code: err.code,
  });
}
