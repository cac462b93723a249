/**
 * An endpoint's life beyond single deliveries: disabled after the retry window with a notice, enabled
 * again, a resend; a rotated secret signing beside the new one; and the ledger's events
 * (payment.credited, balance.low once per crossing) with the billing ledger in the same database.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { exponentialBackoff } from "../../relayer/webhooks";
import { verifyWebhookSignature } from "../../sdk/webhooks";
import type { Stack } from "../helpers/stack";
import { Receiver } from "./receiver";
import { newAccount, register, startWebhookStack, testWebhookOptions } from "./support";
const { verifySigilSignature } = require("./verifySnippet.js");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("webhooks: endpoint lifecycle and ledger events", function () {
  this.timeout(120_000);
  let s: Stack;
  let billing: Billing;
  let dir: string;
  let key: string;
  const receivers: Receiver[] = [];

  async function receiver(): Promise<Receiver> {
    const r = await new Receiver().start();
    receivers.push(r);
    return r;
  }
  const createPkp = async () =>
    expect((await s.api("POST", "/core/v1/pkps/create", { key, body: { name: "p" } })).status).to.equal(201);

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-wh-billing-"));
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 0,
    });
    s = await startWebhookStack(
      testWebhookOptions({
        // Given up 1.5 s after the first failure: the three days of production, in a test's time.
        retry: exponentialBackoff({ baseMs: 200, maxMs: 400, giveUpAfterMs: 1_500, random: () => 0.5 }),
        lowBalanceCents: 97,
        ledgerSettleMs: 0,
      }),
      { billing },
    );
    ({ key } = await newAccount(s));
  });
  after(async () => {
    for (const r of receivers) await r.close();
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  // After each top-level test only: the nested suite's tests share one endpoint.
  afterEach(async function () {
    if (this.currentTest?.parent?.parent !== this.test?.parent?.parent) return;
    const list = await s.api("GET", "/core/v1/webhooks", { key });
    for (const e of list.body.items) await s.api("DELETE", `/core/v1/webhooks/${e.id}`, { key });
  });

  describe("an endpoint that fails for the whole retry window", () => {
    let r: Receiver;
    let hook: { id: string; secret: string };

    before(async () => {
      r = await receiver();
      r.behaviour = () => ({ status: 500 });
      hook = await register(s, key, r.url, ["pkp.created"]);
      await createPkp();
      for (let i = 0; i < 100; i++) {
        if ((await s.api("GET", `/core/v1/webhooks/${hook.id}`, { key })).body.enabled === false) break;
        await sleep(100);
      }
    });

    it("is disabled with a webhook.disabled notice", async () => {
      const e = await s.api("GET", `/core/v1/webhooks/${hook.id}`, { key });
      expect(e.body.enabled).to.equal(false);
      expect(e.body.notice).to.match(/^webhook\.disabled: /);
      expect(e.body.disabled_at).to.be.a("number");
    });

    it("its delivery is marked failed and is not attempted again", async () => {
      const seen = r.received.length;
      await sleep(1_000);
      expect(r.received.length).to.equal(seen);
      const d = await s.api("GET", `/core/v1/webhooks/${hook.id}/deliveries`, { key });
      expect(d.body.items[0]).to.include({ status: "failed", last_status: 500 });
    });

    it("a resend while disabled is refused with webhook_disabled", async () => {
      const d = await s.api("GET", `/core/v1/webhooks/${hook.id}/deliveries`, { key });
      const resend = await s.api(
        "POST",
        `/core/v1/webhooks/${hook.id}/deliveries/${d.body.items[0].id}/resend`,
        {
          key,
          body: {},
        },
      );
      expect([resend.status, resend.body.error?.code]).to.deep.equal([409, "webhook_disabled"]);
    });

    it("enabled again, a resend delivers the same event", async () => {
      r.behaviour = () => ({ status: 200 });
      const en = await s.api("POST", `/core/v1/webhooks/${hook.id}`, { key, body: { enabled: true } });
      expect(en.body).to.include({ enabled: true, notice: null });
      const d = await s.api("GET", `/core/v1/webhooks/${hook.id}/deliveries`, { key });
      const before = r.received.length;
      const resend = await s.api(
        "POST",
        `/core/v1/webhooks/${hook.id}/deliveries/${d.body.items[0].id}/resend`,
        {
          key,
          body: {},
        },
      );
      expect(resend.status, JSON.stringify(resend.body)).to.equal(202);
      await r.until(() => r.received.length > before);
      expect(JSON.parse(r.received.at(-1)!.body).id).to.equal(d.body.items[0].event_id);
    });
  });

  it("after a rotation, deliveries carry two signatures: the new and, for the grace period, the old secret", async () => {
    const r = await receiver();
    const hook = await register(s, key, r.url, ["pkp.created"]);
    const rot = await s.api("POST", `/core/v1/webhooks/${hook.id}/rotate_secret`, { key, body: {} });
    await createPkp();
    await r.until(() => r.received.length >= 1);
    const { headers, body } = r.received[0];
    const header = String(headers["sigil-signature"]);
    expect(header.match(/v1=/g)).to.have.length(2);
    expect([
      verifySigilSignature(rot.body.secret, header, body),
      verifySigilSignature(hook.secret, header, body),
    ]).to.deep.equal([true, true]);
  });

  it("the SDK's verifyWebhookSignature accepts a delivery and refuses one outside the tolerance", async () => {
    const r = await receiver();
    const hook = await register(s, key, r.url, ["pkp.created"]);
    await createPkp();
    await r.until(() => r.received.length >= 1);
    const { headers, body } = r.received[0];
    const header = String(headers["sigil-signature"]);
    expect(verifyWebhookSignature(hook.secret, header, body)).to.equal(true);
    const later = Math.floor(Date.now() / 1000) + 301;
    expect(verifyWebhookSignature(hook.secret, header, body, { nowSeconds: later })).to.equal(false);
  });

  it("balance.low fires once when a charge crosses the threshold, not on later charges below it", async () => {
    const { key: k2 } = await newAccount(s, "low");
    const r = await receiver();
    await register(s, k2, r.url, ["balance.low"]);
    // 100 cents of sign-up credit, 1 cent per write: 99, 98 stay above 97; 96 crosses; 95, 94 stay below.
    for (let i = 0; i < 6; i++)
      expect((await s.api("POST", "/core/v1/pkps/create", { key: k2, body: {} })).status).to.equal(201);
    await r.until(() => r.received.length >= 1);
    await sleep(1_500);
    const evs = r.received.map((x) => JSON.parse(x.body));
    expect(evs.map((e) => [e.type, e.data.balance_cents, e.data.threshold_cents])).to.deep.equal([
      ["balance.low", 96, 97],
    ]);
  });

  it("payment.credited fires when a payment is credited", async () => {
    const { key: k3 } = await newAccount(s, "payer");
    const r = await receiver();
    await register(s, k3, r.url, ["payment.credited"]);
    const pi = await s.api("POST", "/core/v1/billing/create_payment_intent", {
      key: k3,
      body: { amount_cents: 500 },
    });
    const id = pi.body.payment_intent_id;
    await s.api("POST", `/core/v1/billing/simulated/intents/${id}/succeed`, { key: k3 });
    const c = await s.api("POST", "/core/v1/billing/confirm_payment", {
      key: k3,
      body: { payment_intent_id: id },
    });
    expect(c.status, JSON.stringify(c.body)).to.equal(200);
    await r.until(() => r.received.length >= 1);
    const ev = JSON.parse(r.received[0].body);
    expect([ev.type, ev.data]).to.deep.equal([
      "payment.credited",
      { amount_cents: 500, balance_cents: 600, payment_intent_id: id },
    ]);
  });
});
