/**
 * The relayer with billing (real ledger, simulated processor): the billing router is mounted with the
 * relayer's account-key middleware; writes and executions are gated (402 before anything is sent), only
 * writes that landed are charged, executions are charged for their measured time, and the usage-key list
 * shows a key's spend.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { AccountRegistry__factory } from "../../typechain-types";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("relayer: billing integration", function () {
  this.timeout(120_000);
  let s: Stack;
  let billing: Billing;
  let dir: string;

  const balance = async (key: string) =>
    (await s.api("GET", "/core/v1/billing/balance", { key })).body.balance_cents as number;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-billing-"));
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 0,
    });
    s = await startStack({ billing });
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("new_account grants the sign-up credit; the billing router answers with the account key", async () => {
    const a = await s.api("POST", "/core/v1/new_account", { body: {} });
    expect(await balance(a.body.api_key)).to.equal(100);
  });

  it("a landed write is charged once; a refused one is not", async () => {
    const a = await setupAccount(s); // new_account, 2 writes (pkp, group), 1 pin (1 cent per started 100 KB)
    const before = await balance(a.accountKey);
    expect(before).to.equal(100 - 2 - 1);
    const ok = await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: {} });
    expect(ok.status).to.equal(201);
    expect(await balance(a.accountKey)).to.equal(before - 1);
    const refused = await s.api("POST", `/core/v1/groups/${a.groupId}/pkps`, {
      key: a.accountKey,
      body: { add: [a.pkpId] },
    });
    expect(refused.status).to.equal(409);
    expect(await balance(a.accountKey)).to.equal(before - 1);
  });

  it("an execution reports and charges its measured time", async () => {
    const a = await setupAccount(s);
    const before = await balance(a.accountKey);
    const r = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: a.cid } });
    expect(r.status).to.equal(200);
    expect(r.body.charged_cents).to.equal(billing.executionPriceCents(r.body.execution_ms));
    expect(await balance(a.accountKey)).to.equal(before - r.body.charged_cents);
  });

  it("with no credits left, a write is 402 insufficient_credits and nothing is sent to the chain", async () => {
    const a = await setupAccount(s);
    // Spend the rest of the sign-up credit.
    let left = await balance(a.accountKey);
    while (left > 0) {
      expect((await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: {} })).status).to.equal(
        201,
      );
      left = await balance(a.accountKey);
    }
    const registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
    const pkps = Number((await registry.listPkps(a.accountId, 0, 1))[1]);
    const r = await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: {} });
    expect(r.status).to.equal(402);
    expect(r.body.error.code).to.equal("insufficient_credits");
    expect(Number((await registry.listPkps(a.accountId, 0, 1))[1])).to.equal(pkps);
    const x = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: a.cid } });
    expect(x.status).to.equal(402);
  });

  it("a usage key's spend shows in list_api_keys, and its cap (set over HTTP) refuses further executions", async () => {
    const a = await setupAccount(s);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "capped", execute_in_groups: [0], spend_cap_cents: 1 },
    });
    expect(k.status).to.equal(201);
    expect(k.body).to.include({ spend_cap_cents: 1, spent_cents: 0, balance: 1 });
    // A run reserves its time limit's price at admission: under a 1-cent cap it asks for at most 1 s.
    expect(
      (
        await s.api("POST", "/core/v1/svc_action", {
          key: k.body.usage_api_key,
          body: { cid: a.cid, timeout_ms: 1000 },
        })
      ).status,
    ).to.equal(200);
    const list = await s.api("GET", "/core/v1/list_api_keys", { key: a.accountKey });
    const item = list.body.items.find((i: { id: string }) => i.id === k.body.id);
    expect(item).to.include({ spent_cents: 1, spend_cap_cents: 1, balance: 0 });
    const r = await s.api("POST", "/core/v1/svc_action", { key: k.body.usage_api_key, body: { cid: a.cid } });
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal("spend_cap_reached");
  });

  it("update_usage_api_key replaces the spend cap, and a cap left out is reset to none (docs/background.md §4.1 rule 2)", async () => {
    const a = await setupAccount(s);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "c", execute_in_groups: [0], spend_cap_cents: 50 },
    });
    const set = await s.api("POST", "/core/v1/update_usage_api_key", {
      key: a.accountKey,
      body: { id: k.body.id, name: "c", execute_in_groups: [0], spend_cap_cents: 7 },
    });
    expect(set.status).to.equal(200);
    expect(set.body.spend_cap_cents).to.equal(7);
    const reset = await s.api("POST", "/core/v1/update_usage_api_key", {
      key: a.accountKey,
      body: { id: k.body.id, name: "c", execute_in_groups: [0] },
    });
    expect(reset.body.spend_cap_cents).to.equal(null);
    expect((await billing.keySpend(k.body.id)).cap_cents).to.equal(null);
  });

  for (const bad of [-1, 1.5, "10", true]) {
    it(`spend_cap_cents ${JSON.stringify(bad)} is 400 invalid_request and registers no key`, async () => {
      const a = await setupAccount(s);
      const before = (await s.api("GET", "/core/v1/list_api_keys", { key: a.accountKey })).body.total;
      const r = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "x", spend_cap_cents: bad },
      });
      expect(r.status).to.equal(400);
      expect(r.body.error.details.field).to.equal("spend_cap_cents");
      expect((await s.api("GET", "/core/v1/list_api_keys", { key: a.accountKey })).body.total).to.equal(
        before,
      );
    });
  }

  it("billing endpoints refuse usage keys with 403 owner_only", async () => {
    const a = await setupAccount(s);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", { key: a.accountKey, body: { name: "u" } });
    const r = await s.api("GET", "/core/v1/billing/balance", { key: k.body.usage_api_key });
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal("owner_only");
  });

  it("GET config shows the prices", async () => {
    const r = await s.api("GET", "/core/v1/config");
    expect(r.body.billing_enabled).to.equal(true);
    expect(r.body.prices).to.deep.equal(billing.prices());
  });
});
