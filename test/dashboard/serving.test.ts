/**
 * How the relayer serves the dashboard (relayer/http/dashboard.ts), on a throwaway build folder: the
 * CSP names Stripe only when the Stripe processor is configured, index.html is never cached while
 * hashed assets are immutable, and a missing build says how to build it. The end-to-end test covers
 * the real build on the real stack.
 */
import * as fs from "node:fs";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import express from "express";
import type { Billing } from "../../relayer/billing";
import { dashboardRoutes } from "../../relayer/http/dashboard";

async function serve(processorKind: "stripe" | "simulated" | null, distDir: string) {
  const app = express();
  const billing =
    processorKind === null ? null : ({ processorKind } as Pick<Billing, "processorKind"> as Billing);
  app.use(dashboardRoutes({ billing }, distDir));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise((r) => server.close(r)) };
}

describe("dashboard: serving", () => {
  let dist: string;
  before(() => {
    dist = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-dashboard-dist-"));
    fs.mkdirSync(path.join(dist, "assets"));
    fs.writeFileSync(path.join(dist, "index.html"), "<!doctype html><title>t</title>");
    fs.writeFileSync(path.join(dist, "assets", "index-abc123.js"), "console.log(1)");
  });
  after(() => fs.rmSync(dist, { recursive: true, force: true }));

  it("allows Stripe's script, frames and API in the CSP when the Stripe processor is configured", async () => {
    const s = await serve("stripe", dist);
    try {
      const csp = (await fetch(s.url + "/")).headers.get("content-security-policy")!;
      expect(csp).to.contain("script-src 'self' https://js.stripe.com;");
      expect(csp).to.contain("connect-src 'self' https://api.stripe.com;");
      expect(csp).to.contain("frame-src https://js.stripe.com https://hooks.stripe.com;");
    } finally {
      await s.close();
    }
  });

  it("allows only the page's own origin in the CSP with the simulated processor or no billing", async () => {
    for (const kind of ["simulated", null] as const) {
      const s = await serve(kind, dist);
      try {
        const csp = (await fetch(s.url + "/")).headers.get("content-security-policy")!;
        expect(csp).not.to.contain("stripe");
        expect(csp).to.contain("default-src 'none'");
        expect(csp).to.contain("script-src 'self';");
      } finally {
        await s.close();
      }
    }
  });

  it("serves index.html uncached and hashed assets as immutable for a year", async () => {
    const s = await serve(null, dist);
    try {
      const index = await fetch(s.url + "/");
      expect(index.headers.get("cache-control")).to.equal("no-cache");
      expect(index.headers.get("content-type")).to.match(/^text\/html/);
      const asset = await fetch(s.url + "/assets/index-abc123.js");
      expect(asset.headers.get("cache-control")).to.equal("public, max-age=31536000, immutable");
      expect(asset.headers.get("x-content-type-options")).to.equal("nosniff");
    } finally {
      await s.close();
    }
  });

  it("answers a plain-text 404 naming the build command when the dashboard is not built", async () => {
    const s = await serve(null, path.join(dist, "missing"));
    try {
      const r = await fetch(s.url + "/");
      expect(r.status).to.equal(404);
      expect(await r.text()).to.contain("npm run build:dashboard");
    } finally {
      await s.close();
    }
  });
});
