/**
 * The Express application: conventions of design §8, docs/background.md around the /core/v1 routes.
 * Order matters: request ids → request log → the HTTP guard (headers, query string, body size, JSON depth;
 * it reads and parses every body, see http/guard.ts) → billing router → 415 for non-JSON bodies → routes →
 * 405/404 → the error handler. Nothing reads a request before the guard has bounded it.
 */
import express, { Router, type Express, type NextFunction, type Request, type Response } from "express";
import type { RelayerContext } from "./context";
import { ApiError } from "./errors";
import { requestContext } from "./http/context";
import { dashboardRoutes } from "./http/dashboard";
import { errorHandler } from "./http/errorHandler";
import { httpGuard } from "./http/guard";
import { methodNotAllowed, routesOf, type RegisteredRoute } from "./http/routeTable";
import { perIpLimit } from "./rateLimit";
import { buildOpenApi } from "./openapi";
import { accountRoutes } from "./routes/accounts";
import { actionRoutes } from "./routes/actions";
import { forwardRoutes } from "./routes/forward";
import { groupRoutes } from "./routes/groups";
import { keyRoutes } from "./routes/keys";
import { pkpRoutes } from "./routes/pkps";
import { rotationRoutes } from "./routes/rotation";
import { attestationRoutes } from "./routes/attestation";
import { siweRoutes } from "./routes/siwe";
import { configRoute, healthRoutes } from "./routes/system";
import { webhookRoutes } from "./routes/webhooks";
import { auditRoutes } from "./routes/audit";
import { auditRefusals } from "./audit/refusals";

/**
 * The relayer's own endpoints as the OpenAPI document describes them (its coverage test and the request
 * fuzzers read this list). The 405 answers do not: they come from what the app registered
 * (`app.locals.routes`, http/routeTable.ts), which also holds billing's routes and any route added later.
 */
export const ROUTES: Array<[string, string]> = [
  ["POST", "/core/v1/new_account"],
  ["GET", "/core/v1/account"],
  ["POST", "/core/v1/account/transfer_ownership"],
  ["POST", "/core/v1/account/cancel_ownership_transfer"],
  ["POST", "/core/v1/add_usage_api_key"],
  ["GET", "/core/v1/list_api_keys"],
  ["POST", "/core/v1/update_usage_api_key"],
  ["POST", "/core/v1/update_usage_api_key_metadata"],
  ["POST", "/core/v1/remove_usage_api_key"],
  ["POST", "/core/v1/rotate_usage_api_key"],
  ["GET", "/core/v1/attestation"],
  ["POST", "/core/v1/pkps/create"],
  ["GET", "/core/v1/pkps"],
  ["GET", "/core/v1/pkps/:id"],
  ["POST", "/core/v1/groups"],
  ["GET", "/core/v1/groups"],
  ["GET", "/core/v1/groups/:id"],
  ["DELETE", "/core/v1/groups/:id"],
  ["POST", "/core/v1/groups/:id/actions"],
  ["POST", "/core/v1/groups/:id/pkps"],
  ["POST", "/core/v1/actions"],
  ["POST", "/core/v1/actions/cid"],
  ["GET", "/core/v1/actions/pinned"],
  ["GET", "/core/v1/actions/:cid"],
  ["POST", "/core/v1/svc_action"],
  ["POST", "/core/v1/forward/prepare"],
  ["POST", "/core/v1/forward"],
  ["POST", "/core/v1/webhooks"],
  ["GET", "/core/v1/webhooks"],
  ["GET", "/core/v1/webhooks/:id"],
  ["POST", "/core/v1/webhooks/:id"],
  ["DELETE", "/core/v1/webhooks/:id"],
  ["POST", "/core/v1/webhooks/:id/rotate_secret"],
  ["GET", "/core/v1/webhooks/:id/deliveries"],
  ["POST", "/core/v1/webhooks/:id/deliveries/:delivery/resend"],
  ["GET", "/core/v1/audit"],
  ["GET", "/core/v1/audit/export"],
  ["GET", "/core/v1/config"],
  ["POST", "/core/v1/auth/siwe"],
  ["GET", "/core/v1/openapi.json"],
  ["GET", "/health"],
  ["GET", "/metrics"],
];

export function buildApp(ctx: RelayerContext): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "simple");
  // Deliberate, never `true`: see TrustProxy in config.ts (per-IP limits must not be forgeable).
  app.set("trust proxy", ctx.cfg.trustProxy);

  app.use(requestContext);
  app.use((req: Request, res: Response, next: NextFunction) => {
    res.on("finish", () => {
      const route = req.route?.path ? req.baseUrl + req.route.path : "unmatched";
      const ms = Number(process.hrtime.bigint() - (res.locals.startedAt as bigint)) / 1e6;
      ctx.metrics.httpRequests.inc({ method: req.method, route, status: String(res.statusCode) });
      ctx.metrics.httpDuration.observe({ method: req.method, route }, ms / 1000);
      const line = {
        request_id: res.locals.requestId,
        correlation_id: res.locals.correlationId,
        method: req.method,
        route,
        status: res.statusCode,
        ms: Math.round(ms * 10) / 10,
        code: res.locals.errorCode,
        account_id: (res.locals.principal as { accountId?: string } | undefined)?.accountId,
      };
      if (res.statusCode >= 500) ctx.logger.error(line, "request");
      else ctx.logger.info(line, "request");
    });
    next();
  });

  // Before anything that authenticates, parses or reads the chain (rateLimit.ts).
  app.use("/core/v1", perIpLimit(ctx.ipLimit));

  app.use(httpGuard({ maxBodyBytes: ctx.cfg.maxBodyBytes }));
  // Every endpoint mounted through `mount` is in the 405 table (`routes`), so none can be left out of it.
  const routes: RegisteredRoute[] = [];
  app.locals.routes = routes;
  const mount = (prefix: string, router: Router) => {
    app.use(prefix || "/", router);
    routes.push(...routesOf(router, prefix));
  };

  if (ctx.billing) mount("/core/v1/billing", ctx.billing.router(ctx.auth.requireAccountKey()));

  app.use((req: Request, _res: Response, next: NextFunction) => {
    const length = Number(req.get("content-length") ?? 0);
    const chunked = req.get("transfer-encoding") !== undefined;
    if (req.body === undefined && (length > 0 || chunked) && !["GET", "HEAD"].includes(req.method)) {
      next(
        new ApiError("unsupported_media_type", "Send the body as JSON with Content-Type: application/json."),
      );
      return;
    }
    next();
  });

  const openapi = buildOpenApi(ctx);
  const docs = Router();
  docs.get("/openapi.json", (_req, res) => {
    res.json(openapi);
  });
  mount("/core/v1", docs);
  // Actions first: svc_action is by far the most frequent request, and express tries routers in order
  // (the paths of these routers do not overlap, so the order changes nothing else).
  for (const router of [
    actionRoutes(ctx),
    accountRoutes(ctx),
    keyRoutes(ctx),
    rotationRoutes(ctx),
    attestationRoutes(ctx),
    pkpRoutes(ctx),
    groupRoutes(ctx),
    forwardRoutes(ctx),
    webhookRoutes(ctx),
    auditRoutes(ctx),
    configRoute(ctx),
    siweRoutes(ctx),
  ]) {
    mount("/core/v1", router);
  }
  mount("", healthRoutes(ctx));
  app.use(dashboardRoutes(ctx)); // the web dashboard at / (static files, see relayer/http/dashboard.ts)

  app.use(methodNotAllowed(routes));
  app.use(auditRefusals(ctx)); // a refusal's audit entry is written before its answer
  app.use(errorHandler(ctx.logger));
  return app;
}
