/**
 * What the app registered, read off the routers themselves, so that the 405 answers cannot miss a route:
 * a hand-written list drifted (it lacked POST /core/v1/auth/siwe/sign_out and every billing route, which
 * then answered 404 route_not_found to a wrong method instead of 405 with an Allow header).
 */
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { ApiError } from "../errors";
import type { DeclaredRouter } from "../routes/endpoint";

/** One registered endpoint: its method in upper case and its Express path ("/core/v1/groups/:id"). */
export type RegisteredRoute = [method: string, path: string];

interface RouteLayer {
  route?: { path: string | string[]; methods: Record<string, boolean | undefined> };
}

/**
 * The endpoints `router` registered with `.get`/`.post`/`.delete` (its route layers), under the `prefix`
 * it is mounted at. Middleware layers (`router.use`) are not endpoints and are skipped.
 */
export function routesOf(router: unknown, prefix: string): RegisteredRoute[] {
  const out: RegisteredRoute[] = [];
  for (const layer of (router as { stack?: RouteLayer[] }).stack ?? []) {
    if (!layer.route) continue;
    for (const path of [layer.route.path].flat())
      for (const [method, on] of Object.entries(layer.route.methods))
        if (on && method !== "_all") out.push([method.toUpperCase(), prefix + path]);
  }
  return out;
}

/**
 * The routes of a declared router under `prefix`, checked against its declarations: a route registered
 * on it some other way, or a declaration it lacks, is a startup error (nothing is served undocumented).
 */
export function declaredRoutes(router: DeclaredRouter, prefix: string): RegisteredRoute[] {
  const registered = routesOf(router, prefix);
  const declared = new Set(router.declared.map((e) => `${e.method} ${prefix}${e.path}`));
  const stray = registered.find(([m, p]) => !declared.delete(`${m} ${p}`));
  if (stray || declared.size > 0)
    throw new Error(`route table: ${stray?.join(" ") ?? [...declared][0]} is not exactly as declared`);
  return registered;
}

function patternToRegex(p: string): RegExp {
  return new RegExp("^" + p.replace(/:[a-z_]+/g, "[^/]+") + "/?$");
}

/**
 * The app's last handler before the error handler: a path some route serves under another method is
 * 405 method_not_allowed with an Allow header; any other path is 404 route_not_found. `routes` is read
 * when the first request arrives, so every route registered while the app was built is in it.
 */
export function methodNotAllowed(routes: readonly RegisteredRoute[]): RequestHandler {
  let compiled: Array<readonly [string, RegExp]> | undefined;
  return (req: Request, res: Response, next: NextFunction) => {
    compiled ??= routes.map(([m, p]) => [m, patternToRegex(p)] as const);
    const allowed = [...new Set(compiled.filter(([, re]) => re.test(req.path)).map(([m]) => m))];
    if (allowed.length) {
      res.setHeader("Allow", allowed.join(", "));
      next(
        new ApiError("method_not_allowed", `${req.method} is not allowed here; use ${allowed.join(" or ")}.`),
      );
      return;
    }
    next(new ApiError("route_not_found", `No endpoint ${req.method} ${req.path.slice(0, 200)}.`));
  };
}
