/**
 * The Express application: conventions of design §8, docs/background.md around the /core/v1 routes.
 * Order matters: request ids → request log → the HTTP guard (headers, query string, body size, JSON depth;
 * it reads and parses every body, see http/guard.ts) → billing router → 415 for non-JSON bodies → routes →
 * 405/404 → the error handler. Nothing reads a request before the guard has bounded it.
 */
import express, { type Express, type NextFunction, type Request, type Response } from "express";
import type { RelayerContext } from "./context";
import { ApiError } from "./errors";
import { requestContext } from "./http/context";
import { dashboardRoutes } from "./http/dashboard";
import { errorHandler } from "./http/errorHandler";
import { httpGuard } from "./http/guard";
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

/** Every endpoint, for 405 answers (and the OpenAPI document's coverage test). */
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
  ["GET", "/core/v1/config"],
  ["POST", "/core/v1/auth/siwe"],
  ["GET", "/core/v1/openapi.json"],
  ["GET", "/health"],
  ["GET", "/metrics"],
];

function patternToRegex(p: string): RegExp {
  return new RegExp("^" + p.replace(/:[a-z_]+/g, "[^/]+") + "/?$");
}

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
  if (ctx.billing) app.use("/core/v1/billing", ctx.billing.router(ctx.auth.requireAccountKey()));

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
  app.get("/core/v1/openapi.json", (_req, res) => {
    res.json(openapi);
  });
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
    configRoute(ctx),
    siweRoutes(ctx),
  ]) {
    app.use("/core/v1", router);
  }
  app.use(healthRoutes(ctx));
  app.use(dashboardRoutes(ctx)); // the web dashboard at / (static files, see relayer/http/dashboard.ts)

  const compiled = ROUTES.map(([m, p]) => [m, patternToRegex(p)] as const);
  app.use((req: Request, res: Response, next: NextFunction) => {
    const allowed = compiled.filter(([, re]) => re.test(req.path)).map(([m]) => m);
    if (allowed.length) {
      res.setHeader("Allow", [...new Set(allowed)].join(", "));
      next(
        new ApiError(
          "method_not_allowed",
          `${req.method} is not allowed here; use ${[...new Set(allowed)].join(" or ")}.`,
        ),
      );
      return;
    }
    next(new ApiError("route_not_found", `No endpoint ${req.method} ${req.path.slice(0, 200)}.`));
  });
  app.use(errorHandler(ctx.logger));
  return app;
}
