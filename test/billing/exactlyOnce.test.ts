import { expect } from "chai";
import { join } from "node:path";
import { type Billing, StripeProcessor, createBilling } from "../../relayer/billing";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { StripeStub } from "../helpers/stripeStub";
import { type Json, type TestServer, serve, tempDir } from "./harness";

describeOnEngines("billing: exactly-once crediting under concurrency and webhook replays", function (engine) {
  this.timeout(60_000);
  let stub: StripeStub;
  let tmp: ReturnType<typeof tempDir>;
  const billings: Billing[] = [];
  const servers: TestServer[] = [];
  const A = "7";

  function processor() {
    return new StripeProcessor({
      secretKey: stub.secretKey,
      publishableKey: "pk_test_stub",
      webhookSecret: stub.webhookSecret,
      host: "127.0.0.1",
      port: stub.port,
      protocol: "http",
    });
  }

  beforeEach(async function () {
    tmp = tempDir();
    stub = await new StripeStub().start();
    // Two Billing instances on ONE database (one SQLite file, or one PostgreSQL database): two
    // relayer instances sharing the ledger, each with its own connection(s).
    const databaseUrl = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    for (let i = 0; i < 2; i++) {
      const b = await createBilling({
        dbPath: join(tmp.dir, "billing.sqlite"),
        databaseUrl,
        processor: processor(),
      });
      billings.push(b);
      servers.push(await serve(b));
    }
  });

  afterEach(async function () {
    for (const s of servers.splice(0)) await s.close();
    for (const b of billings.splice(0)) await b.close();
    await stub.stop();
    tmp.cleanup();
  });

  function webhook(srv: TestServer, event: Record<string, unknown>) {
    const { payload, header } = stub.sign(event);
    return srv.call("POST", "/webhook", {
      rawBody: payload,
      headers: { "stripe-signature": header, "content-type": "application/json" },
    });
  }

  it("100 concurrent confirms plus duplicate and out-of-order webhooks credit one intent exactly once", async function () {
    const created = await servers[0].call("POST", "/create_payment_intent", {
      account: A,
      body: { amount_cents: 5000 },
    });
    const id = created.body.payment_intent_id as string;
    stub.process(id);
    const now = Math.floor(Date.now() / 1000);
    const processingEvt = stub.event("payment_intent.processing", id, { created: now - 5 });
    stub.succeed(id);
    const succeededEvt = stub.event("payment_intent.succeeded", id, { created: now });
    const redelivery = stub.event("payment_intent.succeeded", id, {
      created: now,
      eventId: "evt_distinct_redelivery",
    });

    const calls: Array<Promise<{ status: number; body: Json }>> = [];
    for (let i = 0; i < 100; i++) {
      const srv = servers[i % 2];
      calls.push(srv.call("POST", "/confirm_payment", { account: A, body: { payment_intent_id: id } }));
      if (i % 20 === 0) calls.push(webhook(servers[(i / 20) % 2], succeededEvt)); // same event id, 5 deliveries
      if (i % 25 === 10) calls.push(webhook(servers[1], processingEvt)); // older event arriving late
      if (i === 50) calls.push(webhook(servers[0], redelivery));
    }
    const results = await Promise.all(calls);

    const confirms = results.filter((r) => r.body.status !== undefined);
    const hooks = results.filter((r) => r.body.received === true);
    expect(confirms).to.have.length(100);
    expect(hooks).to.have.length(5 + 4 + 1);
    for (const c of confirms) {
      expect(c.status).to.equal(200);
      expect(c.body).to.include({ status: "succeeded", credited_cents: 5000 });
    }
    const credits =
      confirms.filter((c) => c.body.newly_credited).length +
      hooks.filter((h) => h.body.outcome === "credited").length;
    expect(credits).to.equal(1);

    for (const b of billings) {
      expect(await b.audit(A)).to.deep.equal({ balance_cents: 5000, ledger_sum_cents: 5000 });
      expect((await b.history(A, 0, 100)).total).to.equal(1);
    }
    // The late "processing" event did not roll the credited intent back.
    const again = await servers[1].call("POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: id },
    });
    expect(again.body).to.include({ status: "succeeded", newly_credited: false, balance_cents: 5000 });
  });

  it("a replayed webhook event id is answered 200 as a duplicate and changes nothing", async function () {
    const created = await servers[0].call("POST", "/create_payment_intent", {
      account: A,
      body: { amount_cents: 800 },
    });
    const id = created.body.payment_intent_id as string;
    stub.succeed(id);
    const evt = stub.event("payment_intent.succeeded", id);
    const first = await webhook(servers[0], evt);
    const second = await webhook(servers[1], evt);
    expect(first.body.outcome).to.equal("credited");
    expect(second.status).to.equal(200);
    expect(second.body.outcome).to.equal("duplicate");
    expect(await billings[0].audit(A)).to.deep.equal({ balance_cents: 800, ledger_sum_cents: 800 });
  });

  it("a payment_failed event older than the processing status already recorded is ignored as stale", async function () {
    const created = await servers[0].call("POST", "/create_payment_intent", {
      account: A,
      body: { amount_cents: 800 },
    });
    const id = created.body.payment_intent_id as string;
    const now = Math.floor(Date.now() / 1000);
    stub.fail(id);
    const oldFailure = stub.event("payment_intent.payment_failed", id, { created: now - 60 });
    stub.process(id);
    expect(
      (await webhook(servers[0], stub.event("payment_intent.processing", id, { created: now }))).body.outcome,
    ).to.equal("status_recorded");
    expect((await webhook(servers[0], oldFailure)).body.outcome).to.equal("stale");
    const c = await servers[0].call("POST", "/confirm_payment", {
      account: A,
      body: { payment_intent_id: id },
    });
    expect(c.status).to.equal(202);
  });
});
