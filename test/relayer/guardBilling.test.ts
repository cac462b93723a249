/**
 * The HTTP guard in front of billing's routes (mounted before the billing router): a Stripe webhook still
 * reaches billing as the exact raw bytes its signature covers, and billing's bodies get the same depth
 * limit as every other route. Real billing with the real Stripe SDK against the local stub.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { createBilling, StripeProcessor, type Billing } from "../../relayer/billing";
import { StripeStub } from "../helpers/stripeStub";
import { startStack, type Stack } from "../helpers/stack";

describe("relayer: HTTP guard in front of billing", function () {
  this.timeout(120_000);
  let stub: StripeStub;
  let billing: Billing;
  let dir: string;
  let s: Stack;
  let accountKey: string;

  before(async () => {
    stub = await new StripeStub().start();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-guard-billing-"));
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      processor: new StripeProcessor({
        secretKey: stub.secretKey,
        publishableKey: "pk_test_stub",
        webhookSecret: stub.webhookSecret,
        host: "127.0.0.1",
        port: stub.port,
        protocol: "http",
      }),
      signupCreditCents: 0,
      chargeFlushMs: 0,
    });
    s = await startStack({ billing });
    accountKey = (await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key;
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    await stub?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("a signed Stripe webhook passes the guard byte for byte and credits the account", async () => {
    const created = await s.api("POST", "/core/v1/billing/create_payment_intent", {
      key: accountKey,
      body: { amount_cents: 1000 },
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(200);
    stub.succeed(created.body.payment_intent_id);
    const { payload, header } = stub.sign(
      stub.event("payment_intent.succeeded", created.body.payment_intent_id),
    );
    const w = await s.api("POST", "/core/v1/billing/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    expect(w.status, JSON.stringify(w.body)).to.equal(200);
    expect(w.body.outcome).to.equal("credited");
    const balance = await s.api("GET", "/core/v1/billing/balance", { key: accountKey });
    expect(balance.body.balance_cents).to.equal(1000);
  });

  it("a deeply nested body to a billing route: 400 json_too_deep before billing reads it", async () => {
    const r = await s.api("POST", "/core/v1/billing/create_payment_intent", {
      key: accountKey,
      rawBody: `{"amount_cents": ${"[".repeat(5_000)}${"]".repeat(5_000)}}`,
      headers: { "content-type": "application/json" },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(400);
    expect(r.body.error.code).to.equal("json_too_deep");
  });

  it("billing keeps its own 16 KB body limit: 413 payload_too_large", async () => {
    const r = await s.api("POST", "/core/v1/billing/create_payment_intent", {
      key: accountKey,
      body: { amount_cents: 1000, pad: "x".repeat(20_000) },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(413);
    expect(r.body.error.code).to.equal("payload_too_large");
  });
});
