/**
 * The Express application: conventions of design §8, docs/background.md around the /core/v1 routes.
 * Order matters: request ids → request log → the HTTP guard (headers, query string, body size, JSON depth;
 * it reads and parses every body, see http/guard.ts) → billing router → 415 for non-JSON bodies → routes →
 * 405/404 → the error handler. Nothing reads a request before the guard has bounded it.
 */
import express, { type Express, type NextFunction, type Request, type Response } from "express";
import type { RelayerContext } from "./context";
import { ApiError } from "./errors";
import { stampRequest } from "./http/context";
import { logRequest } from "./http/requestLog";
import { dashboardRoutes } from "./http/dashboard";
import { errorHandler } from "./http/errorHandler";
import { auditRefusals } from "./audit/refusals";
import { httpGuard } from "./http/guard";
import { declaredRoutes, methodNotAllowed, type RegisteredRoute } from "./http/routeTable";
import { perIpLimit } from "./rateLimit";
import { buildOpenApi } from "./openapi";
import type { DeclaredRouter } from "./routes/endpoint";
import { ACTION_GROUP, HOOK_GROUP, RELAYER_GROUPS, relayerRouter } from "./routes";
import { hookEndpoints } from "./routes/hooks";

/** The path of svc_action in its group: tried first (see buildApp). */
const SVC_ACTION_PATH = "/svc_action";

/**
 * The relayer's own endpoints, as declared (relayer/routes/; billing's are in its group): the request
 * fuzzers and the bad-input tests walk this list. The 405 answers come from what the app mounted
 * (`app.locals.routes`, http/routeTable.ts), billing's routes included.
 */
export const ROUTES: Array<[string, string]> = RELAYER_GROUPS.flatMap((g) =>
  g.endpoints.map((e): [string, string] => [e.method, g.prefix + e.path]),
);

export function buildApp(ctx: RelayerContext): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "simple");
  // Deliberate, never `true`: see TrustProxy in config.ts (per-IP limits must not be forgeable).
  app.set("trust proxy", ctx.cfg.trustProxy);

  // The request's ids and its log line in one layer (one dispatch of the router per request, not two).
  app.use((req: Request, res: Response, next: NextFunction) => {
    stampRequest(req, res);
    res.on("finish", () => {
      logRequest(ctx, {
        requestId: res.locals.requestId,
        correlationId: res.locals.correlationId,
        method: req.method,
        route: req.route?.path ? req.baseUrl + req.route.path : "unmatched",
        status: res.statusCode,
        ms: Number(process.hrtime.bigint() - (res.locals.startedAt as bigint)) / 1e6,
        code: res.locals.errorCode,
        accountId: (res.locals.principal as { accountId?: string } | undefined)?.accountId,
      });
    });
    next();
  });

  // Before anything that authenticates, parses or reads the chain (rateLimit.ts).
  // A request whose key the cache holds has its IP's token taken with its key's and account's (one
  // statement on PostgreSQL); any other, here.
  app.use(
    "/core/v1",
    perIpLimit(ctx.ipLimit, (req) => ctx.auth.holdsRequestKey(req)),
  );

  // Every endpoint is mounted through `mount`, from its declaration only, so the 405 table (`routes`)
  // and the OpenAPI document cannot miss one.
  const routes: RegisteredRoute[] = [];
  app.locals.routes = routes;
  const mount = (prefix: string, router: DeclaredRouter) => {
    routes.push(...declaredRoutes(router, prefix));
    app.use(prefix || "/", router);
  };
  // Webhook triggers read their bodies raw, under their own limit (routes/hooks.ts): before the guard.
  mount(HOOK_GROUP.prefix, relayerRouter(ctx, hookEndpoints(ctx)));

  app.use(httpGuard({ maxBodyBytes: ctx.cfg.maxBodyBytes }));

  if (ctx.billing) mount("/core/v1/billing", ctx.billing.router(ctx.auth.requireAccountKey()));

  app.use((req: Request, _res: Response, next: NextFunction) => {
    // A parsed body (every JSON request) has nothing to check: the headers are read only without one.
    if (req.body !== undefined) {
      next();
      return;
    }
    const length = Number(req.headers["content-length"] ?? 0);
    const chunked = req.headers["transfer-encoding"] !== undefined;
    if ((length > 0 || chunked) && req.method !== "GET" && req.method !== "HEAD") {
      next(
        new ApiError("unsupported_media_type", "Send the body as JSON with Content-Type: application/json."),
      );
      return;
    }
    next();
  });

  // Served by GET /core/v1/openapi.json (routes/system.ts): built once, from the same declarations.
  app.locals.openapi = buildOpenApi(ctx);
  // The actions group first, svc_action first within it: it is by far the most frequent request, and
  // express tries routers, and the routes inside one, in order (no two of these paths overlap, so the
  // order changes nothing else; the document lists the groups as declared).
  const hot = ACTION_GROUP.endpoints.filter((e) => e.method === "POST" && e.path === SVC_ACTION_PATH);
  mount(
    ACTION_GROUP.prefix,
    relayerRouter(ctx, [...hot, ...ACTION_GROUP.endpoints.filter((e) => !hot.includes(e))]),
  );
  for (const group of RELAYER_GROUPS.filter((g) => g !== ACTION_GROUP))
    mount(group.prefix, relayerRouter(ctx, group.endpoints));
  app.use(dashboardRoutes(ctx)); // the web dashboard at / (static files, see relayer/http/dashboard.ts)

  app.use(methodNotAllowed(routes));
  app.use(auditRefusals(ctx)); // a refusal's audit entry is written before its answer
  app.use(errorHandler(ctx.logger));
  return app;
}
