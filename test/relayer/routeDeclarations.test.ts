/**
 * An endpoint is one declaration (relayer/routes/): every route the app serves was mounted from a
 * declaration and has an operation in the served OpenAPI document, every declaration is served, and a
 * route registered any other way is refused when the app is built.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import express, { type Router } from "express";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { declaredRoutes, type RegisteredRoute } from "../../relayer/http/routeTable";
import { compileBody } from "../../relayer/routes/bodySchema";
import { declaredRouter, endpoint, openApiPath, runPlain } from "../../relayer/routes/endpoint";
import { DOCUMENTED_GROUPS } from "../../relayer/routes";
import { startStack, type Stack } from "../helpers/stack";

interface Layer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** The web dashboard's page (GET / and /index.html, http/dashboard.ts): static files, not an API endpoint. */
const DASHBOARD_PAGE = JSON.stringify(["/", "/index.html"]);

/** Every route layer in the app, however deep in mounted routers, counted per method (the page aside). */
function routeLayers(stack: Layer[]): number {
  let n = 0;
  for (const layer of stack) {
    if (layer.route && JSON.stringify(layer.route.path) === DASHBOARD_PAGE) continue;
    if (layer.route) n += Object.entries(layer.route.methods).filter(([m, on]) => on && m !== "_all").length;
    else if (layer.handle?.stack) n += routeLayers(layer.handle.stack);
  }
  return n;
}

describe("relayer: every route is declared once", function () {
  this.timeout(180_000);
  let dir: string;
  let billing: Billing;
  let s: Stack;
  let routes: RegisteredRoute[];
  let doc: { paths: Record<string, Record<string, unknown>> };

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-declared-"));
    // The simulated processor: billing mounts every endpoint it declares, the dev-only one included.
    billing = await createBilling({
      dbPath: path.join(dir, "ledger.sqlite"),
      processor: new SimulatedProcessor(),
    });
    s = await startStack({ billing });
    routes = s.relayer.app.locals.routes as RegisteredRoute[];
    doc = (await s.api("GET", "/core/v1/openapi.json")).body as typeof doc;
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("the app serves exactly the routes it mounted from declarations (none registered beside them)", () => {
    const app = s.relayer.app as unknown as { router: { stack: Layer[] } };
    expect(routes.length).to.be.greaterThan(45);
    expect(routeLayers(app.router.stack)).to.equal(routes.length);
  });

  it("every mounted route has a declaration and an operation in the served document", () => {
    const declared = new Set(
      DOCUMENTED_GROUPS.flatMap((g) => g.endpoints.map((e) => `${e.method} ${g.prefix}${e.path}`)),
    );
    for (const [method, route] of routes) {
      expect(declared.has(`${method} ${route}`), `${method} ${route} is not declared`).to.equal(true);
      const p = route.replace(/:([a-z_]+)/g, "{$1}");
      expect(doc.paths[p]?.[method.toLowerCase()], `${method} ${route} is not in the document`).to.be.an(
        "object",
      );
    }
    expect(routes.some(([m, p]) => m === "POST" && p === "/core/v1/auth/siwe/sign_out")).to.equal(true);
  });

  it("every declaration is served, and the document has no operation without one", () => {
    const served = new Set(routes.map(([m, p]) => `${m} ${p}`));
    let operations = 0;
    for (const g of DOCUMENTED_GROUPS)
      for (const e of g.endpoints) {
        expect(
          served.has(`${e.method} ${g.prefix}${e.path}`),
          `${e.method} ${e.path} is not served`,
        ).to.equal(true);
        expect(doc.paths[openApiPath(g.prefix, e.path)]?.[e.method.toLowerCase()]).to.be.an("object");
      }
    for (const ops of Object.values(doc.paths)) operations += Object.keys(ops).length;
    expect(operations).to.equal(served.size);
  });

  it("a route added to a declared router behind its declarations' back fails the route table", () => {
    const ok = endpoint<null>("GET", "/declared", {
      caller: "public",
      summary: "declared",
      answer: {},
      errors: [],
      handle: async () => ({ body: {} }),
    });
    const router = declaredRouter(null, [ok], { guards: {}, run: (e) => runPlain(null, e) });
    expect(declaredRoutes(router, "/x")).to.deep.equal([["GET", "/x/declared"]]);
    // @ts-expect-error: a declared router has no .get: nothing can be added to it in typed code.
    void router.get;
    // Forced past the type: the table refuses it, so buildApp would not start.
    (router as unknown as Router).get("/sneaky", (_req, res) => void res.end());
    expect(() => declaredRoutes(router, "/x")).to.throw(/GET \/x\/sneaky is not exactly as declared/);
    // And an Express router that was never declared is not a DeclaredRouter at all.
    // @ts-expect-error: `declared` is missing.
    expect(() => declaredRoutes(express.Router(), "/x")).to.throw(TypeError);
  });

  it("every declared body compiles to a validator, and no handler reads the body behind it", () => {
    let bodies = 0;
    for (const g of DOCUMENTED_GROUPS)
      for (const e of g.endpoints) {
        if (!e.body || e.ownBody !== undefined) continue;
        expect(compileBody(e.body, e.checks), `${e.method} ${e.path}`).to.be.a("function");
        bodies++;
      }
    expect(bodies).to.be.greaterThan(20);
    // The relayer's declarations never read the raw body: they receive it read (endpoint.ts reads it
    // for them).
    const dir = path.join(__dirname, "../../relayer/routes");
    for (const f of fs.readdirSync(dir).filter((n) => n.endsWith(".ts") && n !== "endpoint.ts")) {
      const src = fs.readFileSync(path.join(dir, f), "utf8");
      expect(/\breq\.body\b|BodyReader/.test(src), `relayer/routes/${f} reads req.body itself`).to.equal(
        false,
      );
    }
    // Billing's handlers read their own bodies, and each that does says why (ownBody).
    const billing = fs.readFileSync(path.join(__dirname, "../../relayer/billing/router.ts"), "utf8");
    for (const decl of billing.split(/\nconst \w+ = endpoint</).slice(1)) {
      const reads = /\breq\.body\b|objectBody\(req\)/.test(decl.split(/\n}\);\n/)[0]);
      if (reads) expect(decl, decl.slice(0, 60)).to.match(/\n  ownBody:/);
    }
  });
});
