/**
 * 405 answers come from what the app registered (relayer/http/routeTable.ts), not from a hand-written
 * list: every registered route, billing's included, answers a wrong method with 405 method_not_allowed
 * and an Allow header naming the methods it takes.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { ROUTES } from "../../relayer/app";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import type { RegisteredRoute } from "../../relayer/http/routeTable";
import { startStack, type Stack } from "../helpers/stack";

describe("relayer: every registered route answers 405 to a wrong method", function () {
  this.timeout(180_000);
  let dir: string;
  let billing: Billing;
  let s: Stack;
  let routes: RegisteredRoute[];

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-405-"));
    billing = await createBilling({
      dbPath: path.join(dir, "ledger.sqlite"),
      processor: new SimulatedProcessor(),
    });
    s = await startStack({ billing });
    routes = s.relayer.app.locals.routes as RegisteredRoute[];
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("the table holds the routes the old hand-written list missed, and every route of that list", () => {
    const has = (m: string, p: string) => routes.some(([rm, rp]) => rm === m && rp === p);
    expect(has("POST", "/core/v1/auth/siwe/sign_out")).to.equal(true);
    expect(has("GET", "/core/v1/billing/balance")).to.equal(true);
    expect(has("POST", "/core/v1/billing/create_payment_intent")).to.equal(true);
    for (const [m, p] of ROUTES) expect(has(m, p), `${m} ${p}`).to.equal(true);
  });

  it("PUT (which no route takes) on every registered path: 405 with the path's methods in Allow", async () => {
    const byPath = new Map<string, Set<string>>();
    for (const [m, p] of routes) byPath.set(p, (byPath.get(p) ?? new Set()).add(m));
    expect(byPath.size).to.be.greaterThan(40);
    for (const [pattern, methods] of byPath) {
      const url = pattern.replace(/:[a-z_]+/g, "1");
      const r = await s.api("PUT", url);
      expect(r.status, `PUT ${url}: ${JSON.stringify(r.body)}`).to.equal(405);
      expect((r.body as { error: { code: string } }).error.code).to.equal("method_not_allowed");
      const allow = new Set(r.headers.get("allow")!.split(", "));
      for (const m of methods)
        expect(allow.has(m), `${pattern}: Allow ${[...allow]} lacks ${m}`).to.equal(true);
    }
  });

  it("an unknown path is still 404 route_not_found", async () => {
    const r = await s.api("PUT", "/core/v1/no_such_endpoint");
    expect(r.status).to.equal(404);
    expect((r.body as { error: { code: string } }).error.code).to.equal("route_not_found");
  });
});
