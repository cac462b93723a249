/**
 * The Billing page with the Stripe processor, in a real Chromium on the real stack, the processor
 * being the real `stripe` SDK against the local PaymentIntents stub. This machine is offline, so
 * Stripe.js (which must come from https://js.stripe.com) cannot load: the tests check that the page
 * asks for it and, when it does not come, says so inline and names the command-line path. The return
 * page does not need Stripe.js, so it is tested end to end: an intent created through the API, moved on
 * in the stub as a card or a wallet would, then the URL Stripe sends the browser back to. Then the
 * chart of spend per action, from executions of two actions.
 */
import { expect } from "chai";
import type { Browser } from "playwright-core";
import { StripeProcessor } from "../../relayer/billing";
import { setupAccount, type Stack } from "../helpers/stack";
import { StripeStub } from "../helpers/stripeStub";
import { openPage, type WatchedPage } from "./browser";
import { check, guardSteps, signIn, startDashboardRig, visit, type DashboardRig } from "./support";

// Offline, Chromium reports the refused Stripe.js script on the console; that is the case under test.
const STRIPE_JS_OFFLINE = /^console: Failed to load resource: net::ERR_/;

describe("dashboard: Billing with Stripe (the local stub), in Chromium", function () {
  this.timeout(240_000);
  let stub: StripeStub;
  let rig: DashboardRig;
  let stack: Stack;
  let browser: Browser;
  let owner: WatchedPage;
  let account: Awaited<ReturnType<typeof setupAccount>>;
  /** Every request the page made outside its own origin. */
  const external: string[] = [];

  const balance = async () =>
    (
      await stack.api<{ balance_cents: number }>("GET", "/core/v1/billing/balance", {
        key: account.accountKey,
      })
    ).body.balance_cents;
  const createIntent = async (amount_cents: number) => {
    const r = await stack.api<{ payment_intent_id: string; client_secret: string }>(
      "POST",
      "/core/v1/billing/create_payment_intent",
      { key: account.accountKey, body: { amount_cents } },
    );
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body;
  };
  const href = async () => (await owner.page.evaluate("location.href")) as string;
  const historyLength = async () => (await owner.page.evaluate("history.length")) as number;

  before(async function () {
    stub = await new StripeStub().start();
    rig = await startDashboardRig({
      processor: new StripeProcessor({
        secretKey: stub.secretKey,
        publishableKey: "pk_test_stub",
        webhookSecret: stub.webhookSecret,
        host: "127.0.0.1",
        port: stub.port,
        protocol: "http",
        maxNetworkRetries: 0,
      }),
    });
    ({ stack, browser } = rig);
    account = await setupAccount(stack);
    owner = await openPage(browser, stack.url);
    owner.page.on("request", (r) => {
      if (!r.url().startsWith(stack.url)) external.push(r.url());
    });
    await signIn(owner, account.accountKey);
  });

  after(async () => {
    await rig?.close();
    await stub?.stop();
  });

  guardSteps(() => ({ owner }), [STRIPE_JS_OFFLINE]);

  it("refuses a custom amount over 1,000,000 cents inline and sends nothing", async () => {
    const { page } = owner;
    await visit(owner, "billing", "Billing");
    await page.getByText("Stripe", { exact: true }).waitFor();
    await page.getByLabel("Amount in cents").fill("1000001");
    owner.requests.length = 0;
    await page.getByRole("button", { name: "Continue to payment" }).click();
    await page.getByText("At most 1,000,000 cents ($10000.00) in one payment.").waitFor();
    expect(owner.requests.filter((r) => r.startsWith("POST"))).to.deep.equal([]);
    expect(stub.requests.filter((r) => r.method === "POST")).to.deep.equal([]);
  });

  it("creates the intent, asks js.stripe.com for Stripe.js, and when it cannot load says so inline with the CLI path", async () => {
    const { page } = owner;
    await page.getByLabel("Amount in cents").fill("500");
    owner.requests.length = 0;
    await page.getByRole("button", { name: "Continue to payment" }).click();
    const note = page.getByTestId("stripe-unavailable");
    await note.waitFor();
    expect(await note.textContent()).to.contain("could not be loaded from js.stripe.com");
    expect(await note.textContent()).to.contain("npx sigil billing top-up");
    expect(owner.requests).to.include("POST /core/v1/billing/create_payment_intent");
    expect(external.filter((u) => u.startsWith("https://js.stripe.com/"))).to.have.length.greaterThan(0);
    // The client secret lives in the page's memory only: never in the URL or in storage.
    const secret = [...stub.intents.values()].at(-1)!.client_secret;
    expect(await href()).not.to.contain(secret);
    const stored = (await page.evaluate(
      "JSON.stringify([Object.values(sessionStorage), Object.values(localStorage)])",
    )) as string;
    expect(stored).not.to.contain(secret);
    await check(page, "billing-stripe-unavailable");
  });

  it("cancels the abandoned intent at Stripe when asked, and offers the form again", async () => {
    const { page } = owner;
    const id = [...stub.intents.values()].at(-1)!.id;
    await page.getByRole("button", { name: "Cancel this payment" }).click();
    await page.getByRole("button", { name: "Continue to payment" }).waitFor();
    expect(stub.intents.get(id)!.status).to.equal("canceled");
  });

  it("the return page credits a succeeded payment once and drops the client secret from the URL and history", async () => {
    const { page } = owner;
    const intent = await createIntent(700);
    stub.succeed(intent.payment_intent_id);
    const before = await balance();
    const length = await historyLength();
    // Where Stripe sends the browser: the return_url with its parameters in the query string.
    await page.goto(
      `/?payment_intent=${intent.payment_intent_id}&payment_intent_client_secret=${intent.client_secret}&redirect_status=succeeded#/billing/return`,
    );
    await page.getByTestId("payment-credited").filter({ hasText: "$7.00 credited" }).waitFor();
    expect(await balance()).to.equal(before + 700);
    const url = await href();
    expect(url).not.to.contain(intent.client_secret);
    expect(url).not.to.contain("secret");
    expect(new URL(url).search).to.equal("");
    expect(new URL(url).hash).to.equal(
      `#/billing/return?payment_intent=${intent.payment_intent_id}&redirect_status=succeeded`,
    );
    // Replaced, not pushed: the URL with the secret is not left behind in the tab's history.
    expect(await historyLength()).to.equal(length + 1);
    await page
      .getByTestId("balance")
      .filter({ hasText: `$${((before + 700) / 100).toFixed(2)}` })
      .waitFor();
    await check(page, "billing-return-succeeded");
  });

  it("a reload of the return page confirms again and credits nothing more", async () => {
    const { page } = owner;
    const before = await balance();
    owner.requests.length = 0;
    await page.reload();
    await page.getByTestId("payment-credited").filter({ hasText: "$7.00 credited" }).waitFor();
    expect(owner.requests).to.include("POST /core/v1/billing/confirm_payment");
    expect(await balance()).to.equal(before);
    const history = await stack.api<{ items: Array<{ reference: string }> }>(
      "GET",
      "/core/v1/billing/history?page_number=0&page_size=100",
      { key: account.accountKey },
    );
    const id = new URL(await href()).hash.match(/payment_intent=([^&]+)/)![1];
    expect(history.body.items.filter((i) => i.reference === `pi:${id}`)).to.have.length(1);
  });

  it("a client secret inside the hash (a typed or bookmarked URL) is dropped too", async () => {
    const { page } = owner;
    const intent = await createIntent(500);
    stub.succeed(intent.payment_intent_id);
    await page.goto(
      `/#/billing/return?payment_intent=${intent.payment_intent_id}&payment_intent_client_secret=${intent.client_secret}&redirect_status=succeeded`,
    );
    await page.getByTestId("payment-credited").filter({ hasText: "$5.00 credited" }).waitFor();
    expect(await href()).not.to.contain(intent.client_secret);
  });

  it("redirect_status=failed with a declined payment explains it inline and credits nothing", async () => {
    const { page } = owner;
    const intent = await createIntent(600);
    stub.fail(intent.payment_intent_id, "Your card was declined.");
    const before = await balance();
    await page.goto(`/#/billing/return?payment_intent=${intent.payment_intent_id}&redirect_status=failed`);
    const refused = page.getByTestId("payment-refused");
    await refused.waitFor();
    const text = (await refused.textContent()) ?? "";
    expect(text).to.contain("The payment failed.");
    expect(text).to.contain("Your card was declined.");
    expect(text).to.contain("payment_failed");
    expect(text).to.contain("(HTTP 409)");
    expect(await balance()).to.equal(before);
    await check(page, "billing-return-failed");
  });

  it("redirect_status=failed on a payment never completed says so, and credits nothing", async () => {
    const { page } = owner;
    const intent = await createIntent(600);
    const before = await balance();
    await page.goto(`/#/billing/return?payment_intent=${intent.payment_intent_id}&redirect_status=failed`);
    await page.getByTestId("payment-refused").filter({ hasText: "The payment was not completed." }).waitFor();
    expect(await balance()).to.equal(before);
  });

  it("charts spend per action: each action's executions as its own series, writes and pins apart", async () => {
    const { page } = owner;
    const second = 'async function main() { return "second"; }';
    const pinned = await stack.api<{ cid: string }>("POST", "/core/v1/actions", {
      key: account.accountKey,
      body: { code: second },
    });
    const group = await stack.api("POST", "/core/v1/groups", {
      key: account.accountKey,
      body: { name: "second", pkps: [], actions: [pinned.body.cid] },
    });
    expect(group.status, JSON.stringify(group.body)).to.equal(201);
    for (const cid of [account.cid, account.cid, pinned.body.cid]) {
      const r = await stack.api("POST", "/core/v1/svc_action", { key: account.accountKey, body: { cid } });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    }
    await visit(owner, "billing", "Billing");
    await page.reload(); // the hash alone changed (from the return page): load the history afresh
    const chart = page.getByRole("img", { name: /^Spend per day and action\./ });
    await chart.waitFor();
    const label = (await chart.getAttribute("aria-label"))!;
    expect(label).to.contain(`${account.cid} 2 cents`);
    expect(label).to.contain(`${pinned.body.cid} 1 cents`);
    // setupAccount's PKP, pin and group, this test's pin and group: writes and pins, not actions.
    expect(label).to.match(/writes and pins \d+ cents/);
    const legend = await page.getByTestId("spend-legend").allTextContents();
    expect(legend[0]).to.match(/^ Qm\w+…\w+: 2¢$/);
    await check(page, "billing-spend-per-action");
  });
});
