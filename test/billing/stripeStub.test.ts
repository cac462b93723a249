import { expect } from "chai";
import Stripe from "stripe";
import { StripeStub } from "../helpers/stripeStub";

/** The stub must be strict where Stripe is, or the flow tests above it prove less than they claim. */
describe("billing: the Stripe PaymentIntents stub answers the real SDK like Stripe", function () {
  let stub: StripeStub;
  let stripe: Stripe;

  beforeEach(async function () {
    stub = await new StripeStub().start();
    stripe = new Stripe(stub.secretKey, {
      host: "127.0.0.1",
      port: stub.port,
      protocol: "http",
      maxNetworkRetries: 0,
    });
  });
  afterEach(async () => stub.stop());

  const params = {
    amount: 500,
    currency: "usd",
    metadata: { account_id: "1" },
    payment_method_types: ["card", "crypto"],
  };

  it("creates and retrieves an intent with Stripe's shape", async function () {
    const pi = await stripe.paymentIntents.create(params, { idempotencyKey: "k1" });
    expect(pi).to.include({
      object: "payment_intent",
      amount: 500,
      currency: "usd",
      status: "requires_payment_method",
    });
    expect(pi.client_secret).to.match(new RegExp(`^${pi.id}_secret_`));
    const again = await stripe.paymentIntents.retrieve(pi.id);
    expect(again.id).to.equal(pi.id);
  });

  it("replays a request with the same Idempotency-Key and marks it Idempotent-Replayed", async function () {
    const a = await stripe.paymentIntents.create(params, { idempotencyKey: "k2" });
    const b = await stripe.paymentIntents.create(params, { idempotencyKey: "k2" });
    expect(b.id).to.equal(a.id);
    expect(b.lastResponse.headers["idempotent-replayed"]).to.equal("true");
    expect(stub.intents.size).to.equal(1);
  });

  it("refuses the same Idempotency-Key with other parameters (StripeIdempotencyError)", async function () {
    await stripe.paymentIntents.create(params, { idempotencyKey: "k3" });
    let err: unknown;
    try {
      await stripe.paymentIntents.create({ ...params, amount: 501 }, { idempotencyKey: "k3" });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(Stripe.errors.StripeIdempotencyError);
  });

  it("refuses a POST whose Idempotency-Key the SDK generated itself", async function () {
    let err: unknown;
    try {
      await stripe.paymentIntents.create(params);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(Stripe.errors.StripeInvalidRequestError);
    expect((err as Error).message).to.contain("explicit Idempotency-Key");
  });

  it("refuses a wrong secret key (StripeAuthenticationError)", async function () {
    const wrong = new Stripe("sk_test_wrong", {
      host: "127.0.0.1",
      port: stub.port,
      protocol: "http",
      maxNetworkRetries: 0,
    });
    let err: unknown;
    try {
      await wrong.paymentIntents.retrieve("pi_x");
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(Stripe.errors.StripeAuthenticationError);
  });

  it("refuses unknown parameters and amounts below Stripe's 50-cent floor", async function () {
    for (const bad of [
      { ...params, colour: "red" },
      { ...params, amount: 49 },
    ]) {
      let err: unknown;
      try {
        await stripe.paymentIntents.create(bad as Stripe.PaymentIntentCreateParams, {
          idempotencyKey: "k-" + Math.random(),
        });
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(Stripe.errors.StripeInvalidRequestError);
    }
  });

  it("answers resource_missing for an unknown intent", async function () {
    let err: Stripe.errors.StripeError | undefined;
    try {
      await stripe.paymentIntents.retrieve("pi_nope");
    } catch (e) {
      err = e as Stripe.errors.StripeError;
    }
    expect(err?.code).to.equal("resource_missing");
  });

  it("cancels, and refuses to cancel a succeeded intent with payment_intent_unexpected_state", async function () {
    const a = await stripe.paymentIntents.create(params, { idempotencyKey: "k4" });
    expect((await stripe.paymentIntents.cancel(a.id, {}, { idempotencyKey: "c4" })).status).to.equal(
      "canceled",
    );
    const b = await stripe.paymentIntents.create(params, { idempotencyKey: "k5" });
    stub.succeed(b.id);
    let err: Stripe.errors.StripeError | undefined;
    try {
      await stripe.paymentIntents.cancel(b.id, {}, { idempotencyKey: "c5" });
    } catch (e) {
      err = e as Stripe.errors.StripeError;
    }
    expect(err?.code).to.equal("payment_intent_unexpected_state");
  });

  it("signs webhooks that the SDK's constructEvent accepts, and only with the right secret", function () {
    stub.intents.set("pi_w", {
      id: "pi_w",
      object: "payment_intent",
      amount: 500,
      amount_received: 500,
      currency: "usd",
      status: "succeeded",
      client_secret: "pi_w_secret_x",
      metadata: {},
      payment_method_types: ["card"],
      automatic_payment_methods: null,
      last_payment_error: null,
      canceled_at: null,
      cancellation_reason: null,
      created: 1,
      livemode: false,
    });
    const { payload, header } = stub.sign(stub.event("payment_intent.succeeded", "pi_w"));
    expect(stripe.webhooks.constructEvent(payload, header, stub.webhookSecret).type).to.equal(
      "payment_intent.succeeded",
    );
    expect(() => stripe.webhooks.constructEvent(payload, header, "whsec_other")).to.throw(
      Stripe.errors.StripeSignatureVerificationError,
    );
  });
});
