import { expect } from "chai";
import Stripe from "stripe";
import { join } from "node:path";
import { type Billing, StripeProcessor, createBilling } from "../../relayer/billing";
import { StripeStub } from "../helpers/stripeStub";
import { type Json, type TestServer, serve, tempDir } from "./harness";

describe("billing: Stripe flows (real stripe SDK against the local PaymentIntents stub)", function () {
  let stub: StripeStub;
  let billing: Billing;
  let srv: TestServer;
  let tmp: ReturnType<typeof tempDir>;
  const A = "1";
  const B = "2";

  beforeEach(async function () {
    tmp = tempDir();
    stub = await new StripeStub().start();
    billing = await createBilling({
      dbPath: join(tmp.dir, "billing.sqlite"),
      processor: new StripeProcessor({
        secretKey: stub.secretKey,
        publishableKey: "pk_test_stub",
        webhookSecret: stub.webhookSecret,
        host: "127.0.0.1",
        port: stub.port,
        protocol: "http",
        maxNetworkRetries: 1,
      }),
    });
    srv = await serve(billing);
  });

  afterEach(async function () {
    await srv.close();
    await billing.close();
    await stub.stop();
    tmp.cleanup();
  });

  async function createIntent(account: string, amount: number): Promise<string> {
    const r = await srv.call("POST", "/create_payment_intent", { account, body: { amount_cents: amount } });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.payment_intent_id as string;
  }

  async function deliver(type: string, id: string, opts: { eventId?: string; created?: number } = {}) {
    const { payload, header } = stub.sign(stub.event(type, id, opts));
    return srv.call("POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
  }

  it("stripe_config returns the publishable key without authentication", async function () {
    const r = await srv.call("GET", "/stripe_config");
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ publishable_key: "pk_test_stub", mode: "stripe" });
  });

  it("packages lists Starter 500, Basic 1000, Standard 2500, Pro 5000", async function () {
    const r = await srv.call("GET", "/packages");
    expect(r.status).to.equal(200);
    expect(r.body.items.map((p: Json) => [p.name, p.amount_cents, p.price_display])).to.deep.equal([
      ["Starter", 500, "$5.00"],
      ["Basic", 1000, "$10.00"],
      ["Standard", 2500, "$25.00"],
      ["Pro", 5000, "$50.00"],
    ]);
    expect(r.body.minimum_payment_cents).to.equal(500);
  });

  it("create_payment_intent refuses 499 cents with 400 amount_below_minimum", async function () {
    const r = await srv.call("POST", "/create_payment_intent", { account: A, body: { amount_cents: 499 } });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("amount_below_minimum");
    expect(r.body.error.details).to.deep.equal({ amount_cents: 499, minimum_cents: 500 });
    expect(r.body.request_id).to.be.a("string");
    expect(stub.requests).to.have.length(0);
  });

  it("create_payment_intent accepts 500 cents and creates a USD card+crypto intent tagged with the account", async function () {
    const r = await srv.call("POST", "/create_payment_intent", { account: A, body: { amount_cents: 500 } });
    expect(r.status).to.equal(200);
    expect(r.body.payment_intent_id).to.match(/^pi_/);
    expect(r.body.client_secret).to.match(new RegExp(`^${r.body.payment_intent_id}_secret_`));
    const pi = stub.intents.get(r.body.payment_intent_id)!;
    expect(pi.amount).to.equal(500);
    expect(pi.currency).to.equal("usd");
    expect(pi.payment_method_types).to.deep.equal(["card", "crypto"]);
    expect(pi.metadata).to.deep.equal({ account_id: A, ledger_id: billing.ledgerId });
  });

  it("create_payment_intent refuses a non-integer amount with 400 invalid_request naming the field", async function () {
    for (const amount_cents of [500.5, "500", null]) {
      const r = await srv.call("POST", "/create_payment_intent", { account: A, body: { amount_cents } });
      expect(r.status).to.equal(400);
      expect(r.body.error.code).to.equal("invalid_request");
      expect(r.body.error.details).to.deep.equal({ field: "amount_cents" });
    }
  });

  it("create_payment_intent refuses more than the maximum with 400 amount_above_maximum", async function () {
    const r = await srv.call("POST", "/create_payment_intent", {
      account: A,
      body: { amount_cents: 1_000_001 },
    });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("amount_above_maximum");
  });

  it("malformed JSON gets 400 invalid_json in the relayer's error format", async function () {
    const r = await srv.call("POST", "/create_payment_intent", {
      account: A,
      rawBody: "{nope",
      headers: { "content-type": "application/json" },
    });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_json");
    expect(r.body.request_id).to.equal(r.headers.get("x-request-id"));
  });

  it("billing endpoints refuse a missing key through the relayer's middleware", async function () {
    const r = await srv.call("GET", "/balance");
    expect(r.status).to.equal(401);
    expect(r.body.error.code).to.equal("missing_api_key");
  });

  it("billing endpoints refuse a usage key with 403 owner_only", async function () {
    const r = await srv.call("GET", "/balance", { account: A, headers: { "x-test-usage-key": "1" } });
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal("owner_only");
  });

  it("card success: confirm_payment credits the amount and balance shows it", async function () {
    const id = await createIntent(A, 1234);
    stub.succeed(id);
    const c = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(c.status).to.equal(200);
    expect(c.body).to.deep.equal({
      payment_intent_id: id,
      status: "succeeded",
      credited_cents: 1234,
      newly_credited: true,
      balance_cents: 1234,
      balance_display: "$12.34",
    });
    const b = await srv.call("GET", "/balance", { account: A });
    expect(b.body).to.deep.equal({ balance_cents: 1234, balance_display: "$12.34", reserved_cents: 0 });
  });

  it("a second confirm of a credited intent reports it without crediting again or asking Stripe", async function () {
    const id = await createIntent(A, 500);
    stub.succeed(id);
    await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    const before = stub.requests.length;
    const c = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(c.status).to.equal(200);
    expect(c.body.newly_credited).to.equal(false);
    expect(c.body.credited_cents).to.equal(500);
    expect(c.body.balance_cents).to.equal(500);
    expect(stub.requests.length).to.equal(before);
  });

  it("crypto: processing answers 202 with status processing and credits nothing, then succeeded credits", async function () {
    const id = await createIntent(A, 2500);
    stub.process(id);
    const p = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(p.status).to.equal(202);
    expect(p.body).to.include({ status: "processing", credited_cents: 0, balance_cents: 0 });
    stub.succeed(id);
    const s = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(s.status).to.equal(200);
    expect(s.body).to.include({ status: "succeeded", credited_cents: 2500, balance_cents: 2500 });
  });

  it("a failed payment answers 409 payment_failed with the reason and credits nothing", async function () {
    const id = await createIntent(A, 500);
    stub.process(id);
    stub.fail(id, "The crypto transaction reverted.");
    const r = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal("payment_failed");
    expect(r.body.error.details).to.include({
      payment_intent_id: id,
      status: "requires_payment_method",
      reason: "The crypto transaction reverted.",
    });
    expect((await billing.balance(A)).balance_cents).to.equal(0);
    expect((await billing.history(A, 0, 10)).total).to.equal(0);
  });

  it("after a failed payment a new intent can be paid and credits", async function () {
    const failed = await createIntent(A, 500);
    stub.fail(failed);
    await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: failed } });
    const retry = await createIntent(A, 500);
    stub.succeed(retry);
    const r = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: retry } });
    expect(r.status).to.equal(200);
    expect(r.body.balance_cents).to.equal(500);
  });

  it("a canceled payment answers 409 payment_canceled", async function () {
    const id = await createIntent(A, 500);
    const c = await srv.call("POST", "/cancel_payment", { account: A, body: { payment_intent_id: id } });
    expect(c.status).to.equal(200);
    expect(c.body).to.deep.equal({ payment_intent_id: id, status: "canceled" });
    const r = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal("payment_canceled");
  });

  it("canceling a succeeded intent answers 409 payment_not_cancelable and credits it", async function () {
    const id = await createIntent(A, 700);
    stub.succeed(id);
    const c = await srv.call("POST", "/cancel_payment", { account: A, body: { payment_intent_id: id } });
    expect(c.status).to.equal(409);
    expect(c.body.error.code).to.equal("payment_not_cancelable");
    expect(c.body.error.details.status).to.equal("succeeded");
    expect((await billing.balance(A)).balance_cents).to.equal(700);
  });

  it("an intent not yet paid answers 409 payment_not_completed", async function () {
    const id = await createIntent(A, 500);
    const r = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal("payment_not_completed");
    expect(r.body.error.details.status).to.equal("requires_payment_method");
  });

  it("one account cannot confirm another account's intent: 404 payment_intent_not_found", async function () {
    const id = await createIntent(A, 500);
    stub.succeed(id);
    const r = await srv.call("POST", "/confirm_payment", { account: B, body: { payment_intent_id: id } });
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal("payment_intent_not_found");
    expect((await billing.balance(B)).balance_cents).to.equal(0);
    expect((await billing.balance(A)).balance_cents).to.equal(0);
  });

  it("one account cannot cancel another account's intent: 404 payment_intent_not_found", async function () {
    const id = await createIntent(A, 500);
    const r = await srv.call("POST", "/cancel_payment", { account: B, body: { payment_intent_id: id } });
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal("payment_intent_not_found");
    expect(stub.intents.get(id)!.status).to.equal("requires_payment_method");
  });

  it("a webhook for another ledger's intent is acknowledged as ignored_foreign and credits nothing", async function () {
    const id = await createIntent(A, 500);
    stub.intents.get(id)!.metadata.ledger_id = "ldg_someone_else";
    stub.succeed(id);
    const w = await deliver("payment_intent.succeeded", id);
    expect(w.status).to.equal(200);
    expect(w.body.outcome).to.equal("ignored_foreign");
    expect((await billing.balance(A)).balance_cents).to.equal(0);
  });

  it("an intent in another currency is never credited, by webhook or by confirm", async function () {
    const id = await createIntent(A, 500);
    stub.intents.get(id)!.currency = "eur";
    stub.succeed(id);
    const w = await deliver("payment_intent.succeeded", id);
    expect(w.body.outcome).to.equal("ignored_foreign");
    const c = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(c.status).to.equal(404);
    expect(await billing.audit(A)).to.deep.equal({ balance_cents: 0, ledger_sum_cents: 0 });
  });

  it("metadata edited to name another account does not move a stored intent's credit", async function () {
    const id = await createIntent(A, 700);
    stub.intents.get(id)!.metadata.account_id = B;
    stub.succeed(id);
    const c = await srv.call("POST", "/confirm_payment", { account: B, body: { payment_intent_id: id } });
    expect(c.status).to.equal(404);
    expect((await deliver("payment_intent.succeeded", id)).body.outcome).to.equal("credited");
    expect(await billing.audit(A)).to.deep.equal({ balance_cents: 700, ledger_sum_cents: 700 });
    expect(await billing.audit(B)).to.deep.equal({ balance_cents: 0, ledger_sum_cents: 0 });
  });

  it("an unknown intent id answers the same 404 as another account's", async function () {
    const r = await srv.call("POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: "pi_doesnotexist" },
    });
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal("payment_intent_not_found");
  });

  it("a malformed intent id answers 400 invalid_request naming the field", async function () {
    const r = await srv.call("POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: "../../v1/charges" },
    });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_request");
    expect(r.body.error.details).to.deep.equal({ field: "payment_intent_id" });
  });

  it("an intent created outside this ledger (other ledger_id) is not credited by confirm", async function () {
    const id = await createIntent(A, 500);
    stub.intents.get(id)!.metadata.ledger_id = "ldg_someone_else";
    stub.succeed(id);
    const r = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(r.status).to.equal(404);
  });

  it("every Stripe POST carries our own Idempotency-Key (the stub refuses the SDK's automatic ones)", async function () {
    const id = await createIntent(A, 500);
    await srv.call("POST", "/cancel_payment", { account: A, body: { payment_intent_id: id } });
    const posts = stub.requests.filter((q) => q.method === "POST");
    expect(posts).to.have.length(2);
    for (const p of posts) expect(p.idempotencyKey).to.match(/^sigil-(create|cancel)-/);
  });

  it("a create whose response was lost is retried by the SDK with the same key and yields one intent", async function () {
    stub.dropNextResponses(1);
    const id = await createIntent(A, 500);
    expect(stub.intents.size).to.equal(1);
    const posts = stub.requests.filter((q) => q.method === "POST");
    expect(posts).to.have.length(2);
    expect(posts[0].idempotencyKey).to.equal(posts[1].idempotencyKey);
    expect(stub.intents.has(id)).to.equal(true);
  });

  it("the client's Idempotency-Key makes a repeated create return the same intent", async function () {
    const call = () =>
      srv.call("POST", "/create_payment_intent", {
        account: A,
        body: { amount_cents: 900 },
        headers: { "idempotency-key": "order-77" },
      });
    const [r1, r2] = [await call(), await call()];
    expect(r1.body.payment_intent_id).to.equal(r2.body.payment_intent_id);
    expect(stub.intents.size).to.equal(1);
  });

  it("reusing the client's Idempotency-Key with another amount is refused by Stripe (503 payment_processor_error)", async function () {
    await srv.call("POST", "/create_payment_intent", {
      account: A,
      body: { amount_cents: 900 },
      headers: { "idempotency-key": "order-78" },
    });
    const r = await srv.call("POST", "/create_payment_intent", {
      account: A,
      body: { amount_cents: 901 },
      headers: { "idempotency-key": "order-78" },
    });
    expect(r.status).to.equal(503);
    expect(r.body.error.code).to.equal("payment_processor_error");
    expect(r.body.error.details.processor_code).to.equal("idempotency_error");
  });

  it("Stripe unreachable answers 503 payment_processor_unavailable with Retry-After", async function () {
    const id = await createIntent(A, 500);
    await stub.stop();
    const r = await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    expect(r.status).to.equal(503);
    expect(r.body.error.code).to.equal("payment_processor_unavailable");
    expect(r.headers.get("retry-after")).to.equal("5");
    stub = await new StripeStub().start(); // afterEach stops it again
  });

  it("webhook payment_intent.succeeded credits the account", async function () {
    const id = await createIntent(A, 1000);
    stub.succeed(id);
    const w = await deliver("payment_intent.succeeded", id);
    expect(w.status).to.equal(200);
    expect(w.body.outcome).to.equal("credited");
    expect((await billing.balance(A)).balance_cents).to.equal(1000);
  });

  it("webhook with a bad signature answers 400 invalid_webhook_signature and changes nothing", async function () {
    const id = await createIntent(A, 1000);
    stub.succeed(id);
    const { payload, header } = stub.sign(stub.event("payment_intent.succeeded", id), "whsec_wrong");
    const w = await srv.call("POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    expect(w.status).to.equal(400);
    expect(w.body.error.code).to.equal("invalid_webhook_signature");
    expect((await billing.balance(A)).balance_cents).to.equal(0);
  });

  it("webhook signature is checked on the raw bytes: re-serialised JSON does not verify", async function () {
    const id = await createIntent(A, 1000);
    stub.succeed(id);
    const { payload, header } = stub.sign(stub.event("payment_intent.succeeded", id));
    const reformatted = JSON.stringify(JSON.parse(payload), null, 2);
    const w = await srv.call("POST", "/webhook", {
      rawBody: reformatted,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    expect(w.status).to.equal(400);
    expect(w.body.error.code).to.equal("invalid_webhook_signature");
  });

  it("webhook payment_intent.payment_failed is recorded and credits nothing", async function () {
    const id = await createIntent(A, 1000);
    stub.fail(id);
    const w = await deliver("payment_intent.payment_failed", id);
    expect(w.status).to.equal(200);
    expect(w.body.outcome).to.equal("status_recorded");
    expect((await billing.balance(A)).balance_cents).to.equal(0);
  });

  it("webhook for an intent we never stored (crash after Stripe's create) adopts it from its metadata and credits", async function () {
    const id = await createIntent(A, 600);
    stub.succeed(id);
    // The process died between Stripe's create and our INSERT: Stripe holds an intent (with our
    // metadata) that the ledger has no row for. Model it as a second intent only Stripe knows.
    const orphan = { ...stub.intents.get(id)!, id: "pi_orphan_" + id.slice(3) };
    stub.intents.set(orphan.id, orphan);
    const w = await deliver("payment_intent.succeeded", orphan.id);
    expect(w.body.outcome).to.equal("credited");
    expect((await billing.balance(A)).balance_cents).to.equal(600);
    const mine = await srv.call("POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: orphan.id },
    });
    expect(mine.body).to.include({ status: "succeeded", newly_credited: false, balance_cents: 600 });
  });

  it("a webhook signed more than five minutes ago is refused (replay protection)", async function () {
    const id = await createIntent(A, 1000);
    stub.succeed(id);
    const payload = JSON.stringify(stub.event("payment_intent.succeeded", id));
    const header = new Stripe("sk_test_x").webhooks.generateTestHeaderString({
      payload,
      secret: stub.webhookSecret,
      timestamp: Math.floor(Date.now() / 1000) - 600,
    });
    const w = await srv.call("POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    expect(w.status).to.equal(400);
    expect(w.body.error.code).to.equal("invalid_webhook_signature");
    expect((await billing.balance(A)).balance_cents).to.equal(0);
  });

  it("webhook events that are not about payment intents are acknowledged and ignored", async function () {
    const id = await createIntent(A, 1000);
    const evt = {
      ...stub.event("payment_intent.succeeded", id),
      type: "customer.created",
      data: { object: { id: "cus_1", object: "customer" } },
    };
    const { payload, header } = stub.sign(evt);
    const w = await srv.call("POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
    expect(w.status).to.equal(200);
    expect(w.body.outcome).to.equal("ignored_type");
  });

  it("reconcile with Stripe unreachable counts the errors and credits nothing; a later reconcile credits", async function () {
    const id = await createIntent(A, 900);
    stub.succeed(id);
    await stub.stop();
    expect(await billing.reconcileWithReport()).to.deep.equal({ checked: 1, credited: 0, errors: 1 });
    expect((await billing.balance(A)).balance_cents).to.equal(0);
    await stub.start(); // a new port: point a fresh Billing on the same file at it
    const again = await createBilling({
      dbPath: join(tmp.dir, "billing.sqlite"),
      processor: new StripeProcessor({
        secretKey: stub.secretKey,
        publishableKey: "pk_test_stub",
        host: "127.0.0.1",
        port: stub.port,
        protocol: "http",
      }),
    });
    try {
      expect(await again.reconcileWithReport()).to.deep.equal({ checked: 1, credited: 1, errors: 0 });
      expect((await again.balance(A)).balance_cents).to.equal(900);
      expect(await again.reconcileWithReport()).to.deep.equal({ checked: 0, credited: 0, errors: 0 });
    } finally {
      await again.close();
    }
  });

  it("the periodic pass credits a processing intent that settled after its page was closed (no webhook)", async function () {
    const fast = await createBilling({
      dbPath: join(tmp.dir, "periodic.sqlite"),
      processor: new StripeProcessor({
        secretKey: stub.secretKey,
        publishableKey: "pk_test_stub",
        host: "127.0.0.1",
        port: stub.port,
        protocol: "http",
      }),
      reconcileProcessingEveryMs: 30,
    });
    const fastSrv = await serve(fast);
    try {
      const c = await fastSrv.call("POST", "/create_payment_intent", {
        account: A,
        body: { amount_cents: 800 },
      });
      const id = c.body.payment_intent_id;
      stub.process(id);
      expect(
        (await fastSrv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } }))
          .status,
      ).to.equal(202);
      stub.succeed(id);
      const deadline = Date.now() + 5000;
      while ((await fast.balance(A)).balance_cents === 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      expect(await fast.audit(A)).to.deep.equal({ balance_cents: 800, ledger_sum_cents: 800 });
    } finally {
      await fastSrv.close();
      await fast.close();
    }
  });

  it("reconcile skips canceled intents", async function () {
    const id = await createIntent(A, 900);
    await srv.call("POST", "/cancel_payment", { account: A, body: { payment_intent_id: id } });
    expect(await billing.reconcileWithReport()).to.deep.equal({ checked: 0, credited: 0, errors: 0 });
  });

  it("a wrong Stripe secret key answers 503 payment_processor_unavailable, never the key", async function () {
    const bad = await createBilling({
      dbPath: join(tmp.dir, "other.sqlite"),
      processor: new StripeProcessor({
        secretKey: "sk_test_wrong_secret_value",
        publishableKey: "pk_test_stub",
        host: "127.0.0.1",
        port: stub.port,
        protocol: "http",
      }),
    });
    const badSrv = await serve(bad);
    try {
      const r = await badSrv.call("POST", "/create_payment_intent", {
        account: A,
        body: { amount_cents: 500 },
      });
      expect(r.status).to.equal(503);
      expect(r.body.error.code).to.equal("payment_processor_unavailable");
      expect(JSON.stringify(r.body)).to.not.contain("sk_test_wrong_secret_value");
    } finally {
      await badSrv.close();
      bad.close();
    }
  });

  it("history lists ledger entries newest first with pagination", async function () {
    for (const amount of [500, 600, 700]) {
      const id = await createIntent(A, amount);
      stub.succeed(id);
      await srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } });
    }
    const r = await srv.call("GET", "/history?page_number=0&page_size=2", { account: A });
    expect(r.status).to.equal(200);
    expect(r.body.total).to.equal(3);
    expect(r.body.page_number).to.equal(0);
    expect(r.body.page_size).to.equal(2);
    expect(r.body.items.map((i: Json) => [i.type, i.amount_cents, i.balance_after_cents])).to.deep.equal([
      ["credit", 700, 1800],
      ["credit", 600, 1100],
    ]);
    const p1 = await srv.call("GET", "/history?page_number=1&page_size=2", { account: A });
    expect(p1.body.items.map((i: Json) => i.amount_cents)).to.deep.equal([500]);
  });

  it("a body that is not a JSON object answers 400 invalid_request", async function () {
    const r = await srv.call("POST", "/confirm_payment", { account: A, body: ["pi_x"] });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_request");
  });

  it("a body over 16 KiB answers 413 payload_too_large", async function () {
    const r = await srv.call("POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: "pi_" + "a".repeat(20_000) },
    });
    expect(r.status).to.equal(413);
    expect(r.body.error.code).to.equal("payload_too_large");
  });

  it("history refuses page_size 101 with 400 invalid_pagination", async function () {
    const r = await srv.call("GET", "/history?page_size=101", { account: A });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_pagination");
  });

  it("the dev-only simulated endpoint does not exist in Stripe mode", async function () {
    const id = await createIntent(A, 500);
    const r = await srv.call("POST", `/simulated/intents/${id}/succeed`, { account: A });
    expect(r.status).to.equal(404);
    expect((await billing.balance(A)).balance_cents).to.equal(0);
  });
});
