/**
 * Serves the dashboard (dashboard/dist, built by `npm run build:dashboard`) at `/`, on the API's own
 * origin so that the page needs no CORS and the SDK talks to `window.location.origin`.
 *
 *  - `/` (index.html): never cached, so a new build is picked up on the next load.
 *  - `/assets/*`: content-hashed file names, so cached for a year and marked immutable.
 *  - Every dashboard answer carries a Content-Security-Policy that allows only what the page uses:
 *    its own scripts, styles and API; Stripe's script, frames and API only when the Stripe processor
 *    is configured. Styles allow 'unsafe-inline' because CodeMirror and React style attributes write
 *    inline styles at run time; scripts never do.
 *
 * Without a build, `/` answers a plain-text 404 that says how to build it (the API is unaffected).
 */
import fs from "node:fs";
import path from "node:path";
import express, { type Request, type Response, type Router } from "express";
import type { RelayerContext } from "../context";

export const DASHBOARD_DIST = path.resolve(__dirname, "../../dashboard/dist");

const YEAR_SECONDS = 365 * 24 * 3600;

export function contentSecurityPolicy(stripe: boolean): string {
  const s = (...extra: string[]) => ["'self'", ...(stripe ? extra : [])].join(" ");
  return [
    "default-src 'none'",
    `script-src ${s("https://js.stripe.com")}`,
    "style-src 'self' 'unsafe-inline'",
    `connect-src ${s("https://api.stripe.com")}`,
    `img-src ${s("https://*.stripe.com")} data:`,
    "font-src 'self'",
    ...(stripe ? ["frame-src https://js.stripe.com https://hooks.stripe.com"] : []),
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join("; ");
}

export function dashboardRoutes(ctx: Pick<RelayerContext, "billing">, distDir = DASHBOARD_DIST): Router {
  const router = express.Router();
  const csp = contentSecurityPolicy(ctx.billing?.processorKind === "stripe");
  const secure = (res: Response) => {
    res.setHeader("Content-Security-Policy", csp);
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Referrer-Policy", "no-referrer");
  };

  router.use(
    "/assets",
    express.static(path.join(distDir, "assets"), {
      index: false,
      etag: false,
      immutable: true,
      maxAge: YEAR_SECONDS * 1000,
      setHeaders: secure,
    }),
  );

  const index = path.join(distDir, "index.html");
  router.get(["/", "/index.html"], (_req: Request, res: Response) => {
    let html: string;
    try {
      // Read per request: a rebuild while the service runs is served at once (the file is tiny).
      html = fs.readFileSync(index, "utf8");
    } catch {
      res
        .status(404)
        .type("text/plain")
        .send("The dashboard is not built. Run `npm run build:dashboard` (npm start does it when needed).\n");
      return;
    }
    secure(res);
    res.setHeader("Cache-Control", "no-cache");
    res.type("html").send(html);
  });
  return router;
}
