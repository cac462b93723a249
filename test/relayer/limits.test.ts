/** Rate limits (429 + Retry-After) per key, per account and per IP for new_account; the execution cap. */
import { expect } from "chai";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("relayer: rate limits and the execution cap", function () {
  this.timeout(120_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;

  before(async () => {
    s = await startStack({
      rateLimits: {
        perKeyPerMinute: 3,
        perAccountPerMinute: 1000,
        newAccountPerIpPerHour: 3,
        concurrentExecutionsPerAccount: 1,
      },
    });
    a = await setupAccount(s, "async function main(p) { if (p && p.wait) await sleep(p.wait); return 1; }"); // uses 1 of the 3 sign-ups
  });
  after(async () => {
    await s?.close();
  });

  it("a usage key over its per-minute limit gets 429 rate_limited with Retry-After; other keys are unaffected", async () => {
    const k1 = (await s.api("POST", "/core/v1/add_usage_api_key", { key: a.accountKey, body: { name: "1" } }))
      .body.usage_api_key;
    const k2 = (await s.api("POST", "/core/v1/add_usage_api_key", { key: a.accountKey, body: { name: "2" } }))
      .body.usage_api_key;
    for (let i = 0; i < 3; i++)
      expect((await s.api("GET", "/core/v1/pkps", { key: k1 })).status).to.equal(200);
    const r = await s.api("GET", "/core/v1/pkps", { key: k1 });
    expect(r.status).to.equal(429);
    expect(r.body.error.code).to.equal("rate_limited");
    expect(Number(r.headers.get("retry-after"))).to.equal(20);
    expect((await s.api("GET", "/core/v1/pkps", { key: k2 })).status).to.equal(200);
  });

  it("account creation is limited per IP", async () => {
    expect((await s.api("POST", "/core/v1/new_account", { body: {} })).status).to.equal(201);
    expect((await s.api("POST", "/core/v1/new_account", { body: {} })).status).to.equal(201);
    const r = await s.api("POST", "/core/v1/new_account", { body: {} });
    expect(r.status).to.equal(429);
    expect(r.body.error.code).to.equal("rate_limited");
    expect(r.headers.get("retry-after")).to.not.equal(null);
  });

  it("an account over its concurrent-execution cap gets 429 too_many_concurrent_executions", async () => {
    const slow = s.api("POST", "/core/v1/svc_action", {
      key: a.accountKey,
      body: { cid: a.cid, js_params: { wait: 1500 } },
    });
    await new Promise((r) => setTimeout(r, 300));
    const r = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: a.cid } });
    expect(r.status).to.equal(429);
    expect(r.body.error.code).to.equal("too_many_concurrent_executions");
    expect((await slow).status).to.equal(200);
    expect(
      (await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: a.cid } })).status,
    ).to.equal(200);
  });
});
