/**
 * The Triggers page in a real Chromium on the real stack (anvil, contracts, executor, the trigger
 * service running its runs): a schedule trigger made through the form (a bad cron refused inline
 * first, the next three times previewed), a webhook trigger with an HMAC whose secret is shown once,
 * accepted by the hook, and gone after a reload; "fire now" followed to a succeeded run in the
 * history; the history paged; an edit of the cron; disable; a bad contract address refused inline, then the chain-event trigger made; the
 * usage key revoked on the Usage keys page, after which a firing fails with the refusal; delete. Each
 * view passes axe.
 */
import { createHmac } from "node:crypto";
import { AxeBuilder } from "@axe-core/playwright";
import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import type { Stack } from "../helpers/stack";
import { accountWithKey } from "../triggers/helpers";
import { openPage, type WatchedPage } from "./browser";
import { check, guardSteps, signIn, startDashboardRig, visit, type DashboardRig } from "./support";

/** The fields of a trigger answer these steps read (`schedule` or `webhook` by kind). */
interface TriggerJson {
  id: string;
  name: string;
  kind: string;
  enabled: boolean;
  cid: string;
  run_as: { key_address: string };
  schedule: { cron: string };
  webhook: { url: string; hmac: unknown };
  chain_event: Record<string, unknown>;
}

const HEARTBEAT = `async function main(p) {
  return { sig: await Actions.signMessage({ pkpId: p.trigger.pkp_ids[0], message: "heartbeat" }) };
}`;

describe("dashboard: the Triggers page, in Chromium", function () {
  this.timeout(240_000);
  let rig: DashboardRig;
  let stack: Stack;
  let browser: Browser;
  let tab: WatchedPage;
  let a: Awaited<ReturnType<typeof accountWithKey>>;
  let heartbeatId: string;
  let hookId: string;
  let hookUrl: string;
  let hookSecret: string;

  const api = (method: string, route: string, body?: unknown) =>
    stack.api(method, `/core/v1${route}`, { key: a.accountKey, ...(body ? { body } : {}) });
  const triggers = async () => (await api("GET", "/triggers")).body.items as TriggerJson[];

  /** Like the walk-through's pages: no axe violation of any impact, not only serious ones. */
  async function axeAll(page: Page, name: string) {
    const all = (await new AxeBuilder({ page }).analyze()).violations.map(
      (v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`,
    );
    expect(all, `axe on ${name}, any impact`).to.deep.equal([]);
  }

  /** The form's common part: name, action, the one PKP, the usage key. */
  async function fillCommon(page: Page, name: string) {
    await page.getByLabel("Name", { exact: true }).fill(name);
    await page.getByLabel("Action (CID)").selectOption(a.cid);
    await page.getByRole("checkbox", { name: /^p1 / }).check();
    await page.getByLabel("Runs as usage key").selectOption(a.keyAddress);
  }

  before(async () => {
    // Credit for the runs of these steps: each reserves its 30 s worst case before it runs.
    rig = await startDashboardRig({ signupCreditCents: 10_000, relayer: { triggers: { pollMs: 50 } } });
    ({ stack, browser } = rig);
    a = await accountWithKey(stack, HEARTBEAT);
    tab = await openPage(browser, stack.url);
    await signIn(tab, a.accountKey);
  });

  after(async () => {
    await rig?.close();
  });

  guardSteps(() => ({ tab }));

  it("a bad cron is refused inline; the fixed one previews three times and makes a schedule trigger", async () => {
    const { page } = tab;
    await visit(tab, "triggers", "Triggers");
    await page.getByText("No triggers yet.").waitFor();
    await check(page, "triggers-empty");
    await page.getByRole("button", { name: "New trigger" }).click();
    await page.getByTestId("trigger-form").waitFor();
    await fillCommon(page, "heartbeat");

    const cron = page.getByLabel("Cron (five fields, UTC)");
    await cron.fill("*/5 * * * * *");
    // The client's preview says what is wrong at once; the service's refusal lands under the field.
    await page
      .getByTestId("cron-preview")
      .getByText(/this has 6/)
      .waitFor();
    await page.getByRole("button", { name: "Create trigger" }).click();
    const cronError = page.locator(".field-error", {
      hasText: "`schedule.cron` must have exactly five fields",
    });
    await cronError.waitFor();
    expect(await cron.getAttribute("aria-invalid")).to.equal("true");
    expect(await triggers()).to.deep.equal([]);

    await cron.fill("*/5 * * * *");
    await cronError.waitFor({ state: "detached" });
    const preview = await page.getByTestId("cron-preview").innerText();
    expect(preview.match(/\d\d:\d\d UTC/g), preview).to.have.length(3);
    // The JSON preview is what is sent.
    const sent = JSON.parse((await page.getByTestId("trigger-preview").textContent()) ?? "");
    expect(sent).to.deep.include({
      name: "heartbeat",
      kind: "schedule",
      cid: a.cid,
      pkp_ids: [a.pkpId],
      run_as: { key_address: a.keyAddress },
      schedule: { cron: "*/5 * * * *", missed: "skip" },
    });
    await check(page, "triggers-new");
    await axeAll(page, "triggers-new");
    await page.getByRole("button", { name: "Create trigger" }).click();
    await page.getByRole("heading", { level: 2, name: "heartbeat" }).waitFor();

    const [t] = await triggers();
    expect(t).to.deep.include({ name: "heartbeat", kind: "schedule", enabled: true, cid: a.cid });
    expect(t.schedule.cron).to.equal("*/5 * * * *");
    expect(t.run_as.key_address).to.equal(a.keyAddress);
    heartbeatId = t.id;
    expect(await page.evaluate("location.hash")).to.equal(`#/triggers/${t.id}`);
    await page.getByText("No runs yet.").waitFor();
    await check(page, "triggers-detail");
    await axeAll(page, "triggers-detail");
  });

  it("a webhook trigger's HMAC secret is shown once, works at the hook, and is gone after a reload", async () => {
    const { page } = tab;
    await visit(tab, "triggers/new", "Triggers");
    await page.getByRole("radio", { name: "Webhook" }).check();
    await fillCommon(page, "deploy hook");
    await page.getByRole("checkbox", { name: /Require an HMAC/ }).check();
    await page.getByRole("button", { name: "Create trigger" }).click();
    const secret = (hookSecret = (await page.getByTestId("shown-once-value").innerText()).trim());
    expect(secret).to.match(/^whsec_/);
    await check(page, "triggers-secret");
    await axeAll(page, "triggers-secret");

    const t = (await triggers()).find((x) => x.name === "deploy hook")!;
    expect(t.webhook.hmac).to.deep.equal({ header: "x-sigil-signature", prefix: "sha256=", encoding: "hex" });
    hookId = t.id;
    hookUrl = t.webhook.url;
    // The secret on the page is the one the hook checks: a delivery signed with it is accepted.
    const body = JSON.stringify({ ref: "main" });
    const signed = await fetch(t.webhook.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-sigil-signature": "sha256=" + createHmac("sha256", secret).update(body).digest("hex"),
      },
      body,
    });
    expect(signed.status).to.equal(202);

    await page.getByLabel("I have saved it").check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("heading", { level: 2, name: "deploy hook" }).waitFor();
    await page.getByTestId("webhook-url").getByText(t.webhook.url).waitFor();
    await page.reload();
    await page.getByRole("heading", { level: 2, name: "deploy hook" }).waitFor();
    expect(await page.getByTestId("shown-once-value").count()).to.equal(0);
    expect(await page.content()).to.not.contain(secret);
    expect(await page.evaluate("JSON.stringify({ ...sessionStorage, ...localStorage })")).to.not.contain(
      secret,
    );
    // The signed delivery's run is in this trigger's history.
    await page.locator("[data-testid=trigger-runs] tr[data-status=succeeded]").waitFor({ timeout: 30_000 });
  });

  it("lists both triggers: kind, what fires them, the key's name and address, state; no overflow at 390 px", async () => {
    const { page } = tab;
    await visit(tab, "triggers", "Triggers");
    const rows = page.locator("[data-testid=triggers-table] tbody tr");
    await rows.nth(1).waitFor();
    await page.setViewportSize({ width: 390, height: 900 });
    const overflow = (await page.evaluate(
      "document.documentElement.scrollWidth - document.documentElement.clientWidth",
    )) as number;
    expect(overflow, "horizontal overflow at 390 px").to.be.at.most(0);
    await page.setViewportSize({ width: 1366, height: 900 });
    const heartbeat = page.locator(`tr[data-trigger-id="${heartbeatId}"]`);
    expect(await heartbeat.innerText()).to.match(
      /Schedule[\s\S]*\*\/5 \* \* \* \*[\s\S]*next [\s\S]*trigger-key/,
    );
    const hook = page.locator(`tr[data-trigger-id="${hookId}"]`);
    expect(await hook.innerText()).to.match(/Webhook[\s\S]*\/hooks\/v1\/hk_[\s\S]*HMAC in x-sigil-signature/);
    expect(await hook.getByTestId("trigger-state").innerText()).to.equal("enabled");
    await check(page, "triggers");
    await axeAll(page, "triggers");
  });

  it("fire now: the run succeeds in the history, with its logs and response", async () => {
    const { page } = tab;
    await page.getByRole("link", { name: "heartbeat" }).click();
    await page.getByRole("heading", { level: 2, name: "heartbeat" }).waitFor();
    await page.getByRole("button", { name: "Fire now" }).click();
    const row = page.locator("[data-testid=trigger-runs] tbody tr[data-status=succeeded]");
    await row.waitFor({ timeout: 30_000 });
    expect(await row.innerText()).to.match(/manual:[0-9a-f-]{36}/);
    await row.getByText("Logs and response").click();
    expect(await row.locator("pre").nth(1).innerText()).to.match(/"sig"/);

    const runs = await api("GET", `/triggers/${heartbeatId}/runs`);
    expect(runs.body.items.map((r: { status: string }) => r.status)).to.deep.equal(["succeeded"]);
    // The status filter asks the service for that status only.
    await page.getByLabel("Status", { exact: true }).selectOption("failed");
    await page.getByText("No failed runs.").waitFor();
    await page.getByLabel("Status", { exact: true }).selectOption("");
    await row.waitFor();
    await check(page, "triggers-run");
    await axeAll(page, "triggers-run");
  });

  it("pages the history: 21 runs are 20 newest first, then the oldest one", async () => {
    const { page } = tab;
    for (let i = 0; i < 20; i++) {
      const body = JSON.stringify({ n: i });
      const r = await fetch(hookUrl, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-sigil-signature": "sha256=" + createHmac("sha256", hookSecret).update(body).digest("hex"),
        },
        body,
      });
      expect(r.status).to.equal(202);
    }
    const until = Date.now() + 60_000;
    for (;;) {
      const runs = (await api("GET", `/triggers/${hookId}/runs?page_size=100`)).body;
      const done = runs.items.filter((r: { status: string }) => r.status === "succeeded").length;
      if (runs.total === 21 && done === 21) break;
      if (Date.now() > until)
        throw new Error(`runs: ${JSON.stringify(runs.items.map((r: { status: string }) => r.status))}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    const all = (await api("GET", `/triggers/${hookId}/runs?page_size=100`)).body.items as Array<{
      id: string;
    }>;
    await visit(tab, `triggers/${hookId}`, "Triggers");
    await page.getByText("Page 1 of 2").waitFor();
    const ids = () =>
      page
        .locator("[data-testid=trigger-runs] tbody tr")
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-run-id")));
    expect(await ids()).to.deep.equal(all.slice(0, 20).map((r) => r.id));
    await page.getByRole("button", { name: "Older runs" }).click();
    await page.getByText("Page 2 of 2").waitFor();
    expect(await ids()).to.deep.equal([all[20].id]);
    await page.getByRole("button", { name: "Newer runs" }).click();
    await page.getByText("Page 1 of 2").waitFor();
    // Back to the schedule trigger for the next steps.
    await visit(tab, `triggers/${heartbeatId}`, "Triggers");
    await page.getByRole("heading", { level: 2, name: "heartbeat" }).waitFor();
  });

  it("edit: the form starts from the trigger, sends no kind, and the new cron is saved", async () => {
    const { page } = tab;
    await page.getByRole("button", { name: "Edit", exact: true }).click();
    const cron = page.getByLabel("Cron (five fields, UTC)");
    expect(await cron.inputValue()).to.equal("*/5 * * * *");
    await cron.fill("0 * * * *");
    const sent = JSON.parse((await page.getByTestId("trigger-preview").textContent()) ?? "");
    expect(sent).to.not.have.property("kind");
    expect(sent.schedule).to.deep.equal({ cron: "0 * * * *", missed: "skip" });
    await page.getByRole("button", { name: "Save trigger" }).click();
    await page.getByTestId("trigger-settings").getByText("0 * * * *", { exact: true }).waitFor();
    expect((await api("GET", `/triggers/${heartbeatId}`)).body.schedule.cron).to.equal("0 * * * *");
  });

  it("disable: the page and the service say disabled", async () => {
    const { page } = tab;
    await page.getByRole("button", { name: "Disable" }).click();
    await page.getByRole("button", { name: "Enable" }).waitFor();
    expect(await page.getByTestId("trigger-settings").getByTestId("trigger-state").innerText()).to.equal(
      "disabled",
    );
    expect((await api("GET", `/triggers/${heartbeatId}`)).body.enabled).to.equal(false);
  });

  it("a chain-event trigger with a bad contract address is refused next to that field", async () => {
    const { page } = tab;
    await visit(tab, "triggers/new", "Triggers");
    await page.getByRole("radio", { name: "Chain event" }).check();
    await fillCommon(page, "sweep");
    expect(await page.getByLabel("Chain id").inputValue()).to.equal("31337");
    await page.getByLabel("Contract address").fill("0x1234");
    // The address helper: an indexed address as a topic filter.
    await page.getByLabel("Address to turn into a topic").fill(a.keyAddress);
    await page.getByRole("button", { name: "Use as topic 2" }).click();
    expect(await page.getByLabel("Topic 2 filter").inputValue()).to.equal(
      "0x" + "0".repeat(24) + a.keyAddress.slice(2).toLowerCase(),
    );
    await page.getByRole("button", { name: "Create trigger" }).click();
    const error = page.locator(".field-error", {
      hasText: "`chain_event.address` must be a contract address",
    });
    await error.waitFor();
    expect(await page.getByLabel("Contract address").getAttribute("aria-invalid")).to.equal("true");
    expect((await triggers()).map((t) => t.name)).to.not.include("sweep");
    await check(page, "triggers-invalid");
    await axeAll(page, "triggers-invalid");

    // Fixed (the registry is a contract on this chain), it is made: "when this contract emits
    // Transfer to my address, sign a sweep".
    const registry = (await stack.api("GET", "/core/v1/config")).body.registry_address as string;
    await page.getByLabel("Contract address").fill(registry);
    await error.waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Create trigger" }).click();
    await page.getByRole("heading", { level: 2, name: "sweep" }).waitFor();
    const sweep = (await triggers()).find((t) => t.name === "sweep")!;
    expect(sweep.chain_event).to.deep.include({
      chain_id: 31337,
      address: registry.toLowerCase(),
      topics: [null, "0x" + "0".repeat(24) + a.keyAddress.slice(2).toLowerCase()],
    });
    expect(await page.getByTestId("trigger-settings").innerText()).to.contain("chain 31337");
  });

  it("revoking the usage key on the Usage keys page: the list says so and the next firing fails with the refusal", async () => {
    const { page } = tab;
    await visit(tab, "keys", "Usage keys");
    await page.getByRole("button", { name: "Revoke", exact: true }).click();
    await page.getByRole("button", { name: "Revoke key" }).click();
    await page.getByText("No usage keys yet.").waitFor();

    await visit(tab, "triggers", "Triggers");
    await page
      .locator(`tr[data-trigger-id="${hookId}"]`)
      .getByText("not a key of this account now")
      .waitFor();
    await page.getByRole("link", { name: "deploy hook" }).click();
    await page.getByRole("heading", { level: 2, name: "deploy hook" }).waitFor();
    await page.getByRole("button", { name: "Fire now" }).click();
    const failed = page.locator("[data-testid=trigger-runs] tbody tr[data-status=failed]");
    await failed.waitFor({ timeout: 30_000 });
    expect(await failed.innerText()).to.contain("unknown_api_key");
  });

  it("delete asks first, then the trigger is gone from the page and the service", async () => {
    const { page } = tab;
    await visit(tab, `triggers/${heartbeatId}`, "Triggers");
    await page.getByRole("heading", { level: 2, name: "heartbeat" }).waitFor();
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await page.getByRole("button", { name: "Delete trigger" }).click();
    await page.locator(`tr[data-trigger-id="${hookId}"]`).waitFor();
    expect(await page.locator(`tr[data-trigger-id="${heartbeatId}"]`).count()).to.equal(0);
    const gone = await api("GET", `/triggers/${heartbeatId}`);
    expect([gone.status, gone.body.error.code]).to.deep.equal([404, "trigger_not_found"]);
  });
});

describe("dashboard: a trigger paused for want of credits, in Chromium", function () {
  this.timeout(240_000);
  let rig: DashboardRig;
  let tab: WatchedPage;

  before(async () => {
    // No sign-up credit; setting up is free, a run is not (it reserves its 30 s worst case).
    rig = await startDashboardRig({
      signupCreditCents: 0,
      prices: { write_cents: 0, pin_cents_per_100kb: 0, execution_cents_per_second: 1 },
      relayer: { triggers: { pollMs: 50 } },
    });
    tab = await openPage(rig.browser, rig.stack.url);
  });
  after(async () => {
    await rig?.close();
  });
  guardSteps(() => ({ tab }));

  it("says paused with a link to Billing; its skipped run names why; fire now is refused inline", async () => {
    const { stack } = rig;
    const a = await accountWithKey(stack, HEARTBEAT);
    const t = await stack.api("POST", "/core/v1/triggers", {
      key: a.accountKey,
      body: {
        name: "broke",
        kind: "webhook",
        cid: a.cid,
        pkp_ids: [a.pkpId],
        run_as: { key_address: a.keyAddress },
      },
    });
    expect(t.status, JSON.stringify(t.body)).to.equal(201);
    const fired = await stack.api("POST", `/core/v1/triggers/${t.body.id}/fire`, {
      key: a.accountKey,
      body: {},
    });
    expect(fired.status, JSON.stringify(fired.body)).to.equal(202);

    const { page } = tab;
    await signIn(tab, a.accountKey);
    await visit(tab, "triggers", "Triggers");
    const row = page.locator(`tr[data-trigger-id="${t.body.id}"]`);
    await row.getByText("paused: out of credits").waitFor({ timeout: 30_000 });
    expect(await row.innerText()).to.match(/skipped insufficient_credits/);
    await check(page, "triggers-paused");

    await row.getByRole("link", { name: "broke" }).click();
    await page.getByRole("heading", { level: 2, name: "broke" }).waitFor();
    await page
      .locator("[data-testid=trigger-runs] tr[data-status=skipped]")
      .getByText("insufficient_credits")
      .waitFor();
    await page.getByRole("button", { name: "Fire now" }).click();
    await page.getByRole("alert").filter({ hasText: "insufficient_credits" }).waitFor();
    expect(await page.getByRole("alert").filter({ hasText: "HTTP 402" }).count()).to.equal(1);

    await page.getByTestId("trigger-settings").getByRole("link", { name: "Add credits" }).click();
    await page.getByRole("heading", { level: 1, name: "Billing" }).waitFor();
  });
});
