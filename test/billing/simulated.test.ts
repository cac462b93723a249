import { expect } from "chai";
import { join } from "node:path";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { type TestServer, serve, tempDir } from "./harness";

describe("billing: simulated processor (embedded default)", function () {
  let tmp: ReturnType<typeof tempDir>;
  let billing: Billing;
  let srv: TestServer;
  const A = "11";
  const B = "12";

  async function open() {
    billing = await createBilling({
      dbPath: join(tmp.dir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
    });
    srv = await serve(billing);
  }
  async function reopen() {
    await srv.close();
    await billing.close();
    await open();
  }
  async function create(account: string, amount = 500): Promise<string> {
    const r = await srv.call("POST", "/create_payment_intent", { account, body: { amount_cents: amount } });
    expect(r.status).to.equal(200);
    return r.body.payment_intent_id;
  }
  const act = (account: string, id: string, action: string) =>
    srv.call("POST", `/simulated/intents/${id}/${action}`, { account });
  const confirm = (account: string, id: string) =>
    srv.call("POST", "/confirm_payment", { account, body: { payment_intent_id: id } });

  beforeEach(async function () {
    tmp = tempDir();
    await open();
  });
  afterEach(async function () {
    await srv.close();
    await billing.close();
    tmp.cleanup();
  });

  it("stripe_config returns a clearly fake key and mode simulated", async function () {
    const r = await srv.call("GET", "/stripe_config");
    expect(r.body).to.deep.equal({ publishable_key: "pk_sim_local_not_a_real_key", mode: "simulated" });
  });

  it("create → succeed credits through the dev endpoint, and confirm reports it", async function () {
    const id = await create(A, 1500);
    expect(id).to.match(/^pi_sim_/);
    const s = await act(A, id, "succeed");
    expect(s.body).to.deep.equal({ payment_intent_id: id, status: "succeeded", last_error: null });
    const c = await confirm(A, id);
    expect(c.body).to.include({
      status: "succeeded",
      credited_cents: 1500,
      newly_credited: false,
      balance_cents: 1500,
    });
  });

  it("process leaves the intent processing (202 on confirm) until succeed", async function () {
    const id = await create(A);
    await act(A, id, "process");
    expect((await confirm(A, id)).status).to.equal(202);
    await act(A, id, "succeed");
    expect((await confirm(A, id)).body.balance_cents).to.equal(500);
  });

  it("fail makes confirm answer 409 payment_failed, and the account can retry with a new intent", async function () {
    const id = await create(A);
    await act(A, id, "fail");
    const c = await confirm(A, id);
    expect(c.status).to.equal(409);
    expect(c.body.error.code).to.equal("payment_failed");
    const retry = await create(A);
    await act(A, retry, "succeed");
    expect((await billing.balance(A)).balance_cents).to.equal(500);
  });

  it("cancel makes confirm answer 409 payment_canceled", async function () {
    const id = await create(A);
    await act(A, id, "cancel");
    expect((await confirm(A, id)).body.error.code).to.equal("payment_canceled");
  });

  it("cancel_payment cancels a simulated intent", async function () {
    const id = await create(A);
    const r = await srv.call("POST", "/cancel_payment", { account: A, body: { payment_intent_id: id } });
    expect(r.body).to.deep.equal({ payment_intent_id: id, status: "canceled" });
    expect((await confirm(A, id)).body.error.code).to.equal("payment_canceled");
  });

  it("honours Idempotency-Key like Stripe: same intent on replay, refusal with another amount", async function () {
    const call = (amount_cents: number) =>
      srv.call("POST", "/create_payment_intent", {
        account: A,
        body: { amount_cents },
        headers: { "idempotency-key": "order-1" },
      });
    const [a, b] = [await call(600), await call(600)];
    expect(a.body.payment_intent_id).to.equal(b.body.payment_intent_id);
    const c = await call(700);
    expect(c.status).to.equal(503);
    expect(c.body.error.code).to.equal("payment_processor_error");
    expect(c.body.error.details.processor_code).to.equal("idempotency_key_in_use");
  });

  it("an impossible transition answers 409 invalid_simulated_transition", async function () {
    const id = await create(A);
    await act(A, id, "succeed");
    const r = await act(A, id, "fail");
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal("invalid_simulated_transition");
  });

  it("an unknown action answers 400 invalid_simulated_action", async function () {
    const id = await create(A);
    const r = await act(A, id, "refund");
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_simulated_action");
  });

  it("another account cannot drive or confirm my intent (404 payment_intent_not_found)", async function () {
    const id = await create(A);
    expect((await act(B, id, "succeed")).body.error.code).to.equal("payment_intent_not_found");
    await act(A, id, "succeed");
    expect((await confirm(B, id)).status).to.equal(404);
    expect((await billing.balance(B)).balance_cents).to.equal(0);
  });

  it("the dev endpoint takes the account key", async function () {
    const id = await create(A);
    const r = await srv.call("POST", `/simulated/intents/${id}/succeed`);
    expect(r.status).to.equal(401);
  });

  it("intents survive a restart: one left processing can be completed after reopening the file", async function () {
    const id = await create(A, 2000);
    await act(A, id, "process");
    await reopen();
    expect((await confirm(A, id)).status).to.equal(202);
    await act(A, id, "succeed");
    expect((await confirm(A, id)).body).to.include({ status: "succeeded", balance_cents: 2000 });
  });

  it("reconcile credits a simulated intent that succeeded while its credit was not recorded", async function () {
    const id = await create(A, 700);
    // Complete it behind billing's back (as if the process died right after the processor's change).
    const proc = new SimulatedProcessor();
    await srv.close();
    await billing.close();
    const raw = await createBilling({ dbPath: join(tmp.dir, "billing.sqlite"), processor: proc });
    proc.transition(id, "succeed");
    await raw.close();
    await open();
    expect((await billing.balance(A)).balance_cents).to.equal(0);
    expect(await billing.reconcileWithReport()).to.deep.equal({ checked: 1, credited: 1, errors: 0 });
    expect((await billing.balance(A)).balance_cents).to.equal(700);
  });

  it("the webhook endpoint answers 404 webhook_not_configured", async function () {
    const r = await srv.call("POST", "/webhook", {
      rawBody: "{}",
      headers: { "stripe-signature": "t=1,v1=00" },
    });
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal("webhook_not_configured");
  });
});
