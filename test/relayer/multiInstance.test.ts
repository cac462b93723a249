/**
 * Two relayer instances (two startRelayer on one chain, one PostgreSQL database, each with its own
 * billing and its own pool): what a duplicate arriving at the other instance must find is in the
 * database, not in either process.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { AccountRegistry__factory } from "../../typechain-types";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { type Billing, StripeProcessor, createBilling } from "../../relayer/billing";
import { type DataLayer, SharedConcurrencyCap, openDataLayer } from "../../relayer/db";
import { ApiError } from "../../relayer/errors";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { startStack, type Stack } from "../helpers/stack";
import { StripeStub } from "../helpers/stripeStub";

type Answer = { status: number; body: any; headers: Headers }; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(
  baseUrl: string,
  method: string,
  route: string,
  opts: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers["x-api-key"] = opts.key;
  let body: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] = "application/json";
  }
  const r = await fetch(baseUrl + route, { method, headers, body });
  const text = await r.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: r.status, body: parsed, headers: r.headers };
}

/** A second instance of the stack's relayer: same chain, same database, its own data folder and billing. */
async function secondInstance(s: Stack, billing: Billing | undefined): Promise<RunningRelayer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-relayer-2-"));
  return startRelayer({ ...s.relayerOptions, dataDir, port: 0, billing });
}

describeOnPostgres("relayer: two instances on one PostgreSQL", function () {
  this.timeout(180_000);

  describe("payments and Idempotency-Key", function () {
    let stub: StripeStub;
    let s: Stack;
    let second: RunningRelayer;
    const billings: Billing[] = [];
    let accountKey: string;
    let accountId: string;
    let urls: string[];

    before(async function () {
      const databaseUrl = await freshDatabaseUrl();
      stub = await new StripeStub().start();
      const processor = () =>
        new StripeProcessor({
          secretKey: stub.secretKey,
          publishableKey: "pk_test_stub",
          webhookSecret: stub.webhookSecret,
          host: "127.0.0.1",
          port: stub.port,
          protocol: "http",
        });
      for (let i = 0; i < 2; i++)
        billings.push(await createBilling({ dbPath: "", databaseUrl, processor: processor() }));
      s = await startStack({ databaseUrl, billing: billings[0] });
      second = await secondInstance(s, billings[1]);
      urls = [s.url, second.url];
      const a = await call(urls[0], "POST", "/core/v1/new_account", { body: { account_name: "two" } });
      accountKey = a.body.api_key;
      accountId = String(a.body.account_id);
      // The second instance learns of the account from the chain within a poll interval (propagating
      // our own writes to the other instances at once is not part of this data layer).
      const deadline = Date.now() + 10_000;
      while ((await call(urls[1], "GET", "/core/v1/account", { key: accountKey })).status === 401) {
        if (Date.now() > deadline) throw new Error("the second instance never saw the new account");
        await new Promise((r) => setTimeout(r, 50));
      }
    });

    after(async function () {
      await second?.close();
      await s?.close();
      for (const b of billings) await b.close();
      await stub?.stop();
    });

    it("100 concurrent confirm_payment calls and duplicate webhooks spread over both credit once", async function () {
      const created = await call(urls[0], "POST", "/core/v1/billing/create_payment_intent", {
        key: accountKey,
        body: { amount_cents: 5000 },
      });
      expect(created.status).to.equal(200);
      const id = created.body.payment_intent_id as string;
      stub.succeed(id);
      const evt = stub.event("payment_intent.succeeded", id, { created: Math.floor(Date.now() / 1000) });
      const calls: Array<Promise<Answer>> = [];
      for (let i = 0; i < 100; i++) {
        calls.push(
          call(urls[i % 2], "POST", "/core/v1/billing/confirm_payment", {
            key: accountKey,
            body: { payment_intent_id: id },
          }),
        );
        if (i % 10 === 0) {
          const { payload, header } = stub.sign(evt);
          calls.push(
            call(urls[(i / 10) % 2], "POST", "/core/v1/billing/webhook", {
              raw: payload,
              headers: { "stripe-signature": header, "content-type": "application/json" },
            }),
          );
        }
      }
      const results = await Promise.all(calls);
      const hooks = results.filter((r) => r.body.received === true);
      const confirms = results.filter((r) => !hooks.includes(r));
      expect(confirms.filter((c) => c.status !== 200).map((c) => [c.status, c.body])).to.deep.equal([]);
      expect(confirms).to.have.length(100);
      expect(hooks).to.have.length(10);
      const credits =
        confirms.filter((c) => c.body.newly_credited).length +
        hooks.filter((h) => h.body.outcome === "credited").length;
      expect(credits).to.equal(1);
      for (const b of billings)
        expect(await b.audit(accountId)).to.deep.equal({ balance_cents: 5000, ledger_sum_cents: 5000 });
    });

    it("the same Idempotency-Key sent to both instances at once writes once and both get its answer", async function () {
      const registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
      const pkps = async () => Number((await registry.listPkps(Number(accountId), 0, 100))[1]);
      const before = await pkps();
      const h = { "idempotency-key": "two-instances-1" };
      const [r1, r2] = await Promise.all(
        urls.map((u) =>
          call(u, "POST", "/core/v1/pkps/create", { key: accountKey, body: { name: "x" }, headers: h }),
        ),
      );
      expect([r1.status, r2.status]).to.deep.equal([201, 201]);
      expect(r2.body.pkp_id).to.equal(r1.body.pkp_id);
      expect([r1.headers.get("idempotent-replayed"), r2.headers.get("idempotent-replayed")]).to.include(
        "true",
      );
      expect(await pkps()).to.equal(before + 1);
    });
  });

  describe("rate limits", function () {
    let s: Stack;
    let second: RunningRelayer;

    before(async function () {
      const databaseUrl = await freshDatabaseUrl();
      s = await startStack({
        databaseUrl,
        rateLimits: { perKeyPerMinute: 100_000, perAccountPerMinute: 10, newAccountPerIpPerHour: 100_000 },
      });
      second = await secondInstance(s, undefined);
    });
    after(async function () {
      await second?.close();
      await s?.close();
    });

    it("an account's per-minute limit holds across both instances: 10 admitted in all, then 429 with Retry-After", async function () {
      const a = await call(s.url, "POST", "/core/v1/new_account", { body: { account_name: "limited" } });
      const urls = [s.url, second.url];
      const answers: Answer[] = [];
      // The second instance learns of the new account from the chain within a poll interval (an
      // unknown key is refused before any token is taken); its first admitted request is the first
      // of the burst.
      const deadline = Date.now() + 10_000;
      for (;;) {
        const r = await call(urls[1], "GET", "/core/v1/account", { key: a.body.api_key });
        if (r.status !== 401 || Date.now() > deadline) {
          answers.push(r);
          break;
        }
        await new Promise((res) => setTimeout(res, 50));
      }
      // Then one after another, alternating: exactly the limit in all, whichever instance each reaches.
      for (let i = 0; i < 15; i++)
        answers.push(await call(urls[i % 2], "GET", "/core/v1/account", { key: a.body.api_key }));
      const odd = answers.filter((r) => r.status !== 200 && r.status !== 429);
      expect(
        odd.map((r) => [r.status, r.body]),
        "neither admitted nor limited",
      ).to.deep.equal([]);
      const ok = answers.filter((r) => r.status === 200);
      const limited = answers.filter((r) => r.status === 429);
      expect(ok).to.have.length(10);
      expect(limited).to.have.length(6);
      expect(limited[0].body.error.code).to.equal("rate_limited");
      expect(Number(limited[0].headers.get("retry-after"))).to.be.within(1, 60);
    });
  });

  describe("the per-IP limit", function () {
    let s: Stack;
    let second: RunningRelayer;

    before(async function () {
      s = await startStack({ databaseUrl: await freshDatabaseUrl(), rateLimits: { perIpPerMinute: 6 } });
      second = await secondInstance(s, undefined);
    });
    after(async function () {
      await second?.close();
      await s?.close();
    });

    it("counts one client's requests on both instances against one bucket: 6 in all, then 429 scope ip", async function () {
      const urls = [s.url, second.url];
      const answers: Answer[] = [];
      // No key: the per-IP limit runs before authentication, so each admitted request is a 401.
      for (let i = 0; i < 9; i++) answers.push(await call(urls[i % 2], "GET", "/core/v1/account"));
      expect(answers.map((r) => r.status)).to.deep.equal([401, 401, 401, 401, 401, 401, 429, 429, 429]);
      expect(answers[6].body.error.code).to.equal("rate_limited");
      expect(answers[6].body.error.details.scope).to.equal("ip");
    });
  });

  // A request whose key the cache holds has its IP's token taken with its key's and account's, in one
  // statement (relayer/rateLimit.ts, perIpLimit): the limits stay as exact across instances.
  describe("the per-IP limit with a key the cache holds", function () {
    let s: Stack;
    const instances: RunningRelayer[] = [];
    let urls: string[];
    let accountKey: string;
    let warmedFrom: number;

    before(async function () {
      s = await startStack({ databaseUrl: await freshDatabaseUrl() });
      // Behind a trusted proxy, so that each test names its own client address.
      for (let i = 0; i < 2; i++) {
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-relayer-ip-"));
        instances.push(
          await startRelayer({
            ...s.relayerOptions,
            dataDir,
            port: 0,
            trustProxy: "loopback",
            rateLimits: {
              ...s.relayerOptions.rateLimits,
              perIpPerMinute: 5,
              perAccountPerMinute: 8,
              perKeyPerMinute: 100_000,
            },
          }),
        );
      }
      urls = instances.map((r) => r.url);
      accountKey = (await call(s.url, "POST", "/core/v1/new_account", { body: { account_name: "ip" } })).body
        .api_key;
      // Both instances load the account (a first request may need the chain): from an address of its own.
      warmedFrom = Date.now();
      let attempt = 0;
      for (const [i, url] of urls.entries()) {
        const deadline = Date.now() + 10_000;
        let status = 0;
        while (status !== 200 && Date.now() < deadline) {
          const warm = { "x-forwarded-for": `198.51.${100 + i}.${++attempt % 250}` };
          status = (await call(url, "GET", "/core/v1/account", { key: accountKey, headers: warm })).status;
          if (status !== 200) await new Promise((r) => setTimeout(r, 50));
        }
        expect(status, `instance ${i} never knew the account`).to.equal(200);
      }
    });
    after(async function () {
      for (const r of instances.splice(0)) await r.close();
      await s?.close();
    });

    it("one address over both instances: exactly 5 admitted, then 429 scope ip, and the account is charged only for those 5", async function () {
      const as = (ip: string) => ({ key: accountKey, headers: { "x-forwarded-for": ip } });
      const answers: Answer[] = [];
      for (let i = 0; i < 9; i++)
        answers.push(await call(urls[i % 2], "GET", "/core/v1/account", as("203.0.113.10")));
      expect(answers.map((r) => r.status)).to.deep.equal([200, 200, 200, 200, 200, 429, 429, 429, 429]);
      expect(answers[5].body.error.details.scope).to.equal("ip");
      // The account's 8 per minute: 2 taken by the warm-up, 5 above; the four refused by the IP took
      // none, so 1 is left (plus what refilled since the warm-up: 8 per minute).
      const refilled = Math.floor(((Date.now() - warmedFrom) * 8) / 60_000);
      const other: Answer[] = [];
      for (let i = 0; i < 3 + refilled; i++)
        other.push(await call(urls[i % 2], "GET", "/core/v1/account", as("203.0.113.11")));
      const admitted = other.findIndex((r) => r.status !== 200);
      expect(admitted).to.be.within(1, 1 + refilled);
      expect(other[admitted].status).to.equal(429);
      expect(other[admitted].body.error.details.scope).to.equal("account");
    });

    it("a request answered before authentication still spends its address's token (once it closes)", async function () {
      const as = { key: accountKey, headers: { "x-forwarded-for": "203.0.113.20" } };
      for (let i = 0; i < 5; i++)
        expect((await call(urls[i % 2], "GET", "/core/v1/no-such-route", as)).status).to.equal(404);
      await new Promise((r) => setTimeout(r, 200)); // the tokens are taken after the answers
      const r = await call(urls[0], "GET", "/core/v1/account", as);
      expect(r.status).to.equal(429);
      expect(r.body.error.details.scope).to.equal("ip");
    });
  });

  describe("the per-account concurrency cap", function () {
    const layers: DataLayer[] = [];
    before(async function () {
      const url = await freshDatabaseUrl();
      for (let i = 0; i < 2; i++) layers.push(await openDataLayer({ databaseUrl: url, sqlitePath: "" }));
    });
    after(async function () {
      for (const l of layers) await l.close();
    });

    it("counts executions of both instances against one cap, and a release frees a slot for either", async function () {
      const caps = layers.map((l) => new SharedConcurrencyCap(l, 2));
      const r1 = await caps[0].enter("9");
      await caps[1].enter("9");
      let refused: unknown;
      await caps[0].enter("9").catch((e: unknown) => (refused = e));
      expect(refused).to.be.instanceOf(ApiError);
      expect((refused as ApiError).code).to.equal("too_many_concurrent_executions");
      expect(await caps[1].enter("8").then(() => "admitted")).to.equal("admitted"); // other accounts unaffected
      r1();
      await new Promise((r) => setTimeout(r, 100)); // the release is not awaited by the caller
      expect(await caps[1].enter("9").then(() => "admitted")).to.equal("admitted");
    });

    it("a lease its instance never released stops counting when it expires", async function () {
      const short = new SharedConcurrencyCap(layers[0], 1, 200);
      await short.enter("7"); // never released: the instance "died"
      let refused: unknown;
      await short.enter("7").catch((e: unknown) => (refused = e));
      expect((refused as ApiError).code).to.equal("too_many_concurrent_executions");
      await new Promise((r) => setTimeout(r, 300));
      expect(await short.enter("7").then(() => "admitted")).to.equal("admitted");
    });
  });
});
