/**
 * The dashboard end to end, in a real Chromium, on the real stack (anvil, contracts, relayer, SES
 * executor, SQLite ledger with the simulated processor), the built dashboard served by the relayer.
 * One account is walked through in order, like a newcomer would: each `it` is one step and relies on
 * the steps before it. Every page visited is checked with axe-core and photographed to docs/dashboard/.
 */
import * as fs from "node:fs";
import { expect } from "chai";
import { verifyMessage } from "ethers";
import type { Browser } from "playwright-core";
import { registryInterface } from "../../scripts/safe/lib/registryCalls";
import { openPage, type WatchedPage } from "./browser";
import type { Stack } from "../helpers/stack";
import { ANVIL_ACCOUNT_1, injectWallet } from "./injectedWallet";
import {
  check,
  createExecuteOnlyUsageKey,
  guardSteps,
  startDashboardRig,
  visit,
  type DashboardRig,
} from "./support";

describe("dashboard: end to end in Chromium", function () {
  this.timeout(240_000);
  let rig: DashboardRig;
  let stack: Stack;
  let browser: Browser;
  let owner: WatchedPage; // the tab signed in with the account key
  let server: WatchedPage; // a second tab signed in with the usage key
  const s: {
    accountKey?: string;
    pkpId?: string;
    pkpAddress?: string;
    cid?: string;
    groupId?: number;
    usageKey?: string;
  } = {};

  before(async function () {
    rig = await startDashboardRig();
    ({ stack, browser } = rig);
    owner = await openPage(browser, stack.url);
  });

  after(async () => {
    await rig?.close();
  });

  guardSteps(() => ({ owner, server }));

  it("serves the page with a Content-Security-Policy without Stripe, and hashed assets cached for a year", async () => {
    const index = await fetch(stack.url + "/");
    const csp = index.headers.get("content-security-policy") ?? "";
    expect(index.headers.get("cache-control")).to.equal("no-cache");
    expect(csp).to.contain("script-src 'self';");
    expect(csp).to.contain("frame-ancestors 'none'");
    expect(csp).not.to.contain("stripe");
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(await index.text())![1];
    const js = await fetch(stack.url + asset);
    expect(js.status).to.equal(200);
    expect(js.headers.get("cache-control")).to.equal("public, max-age=31536000, immutable");
  });

  it("signs in nobody with a malformed key: inline error, nothing sent", async () => {
    const { page } = owner;
    await page.goto("/");
    await page.getByLabel("Key", { exact: true }).fill("ak_not-a-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("That is not a Sigil key").waitFor();
    expect(owner.requests).to.deep.equal([]);
    await check(page, "sign-in");
  });

  it("creates an account and shows its key once, with a copy button and an 'I have saved it' step", async () => {
    const { page } = owner;
    await page.getByLabel("Account name").fill("dashboard test");
    await page.getByRole("button", { name: "Create account" }).click();
    const value = page.getByTestId("shown-once-value");
    await value.waitFor();
    s.accountKey = (await value.textContent())!;
    expect(s.accountKey).to.match(/^ak_[0-9a-f]{64}$/);
    await page.getByRole("button", { name: "Copy Your account key" }).waitFor();
    expect(await page.getByRole("button", { name: "Continue" }).isDisabled()).to.equal(true);
    await check(page, "account-key-once");
  });

  it("keeps the key in sessionStorage only: not in localStorage, a cookie or the URL", async () => {
    const { page, context } = owner;
    // Evaluated in the page (a string: this file is compiled without the DOM's types).
    const stores = (await page.evaluate(
      "({ session: Object.values(sessionStorage), local: Object.values(localStorage), url: location.href })",
    )) as { session: string[]; local: string[]; url: string };
    expect(stores.session).to.include(s.accountKey);
    expect(stores.local.join(" ")).not.to.contain(s.accountKey!.slice(3));
    expect(stores.url).not.to.contain(s.accountKey!.slice(3));
    expect(await context.cookies()).to.deep.equal([]);
  });

  it("never shows the account key again after a reload, and stays signed in", async () => {
    const { page } = owner;
    await page.reload();
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
    expect(await page.getByTestId("shown-once-value").count()).to.equal(0);
    expect(await page.content()).not.to.contain(s.accountKey!.slice(3));
  });

  it("the overview of an empty account shows the mode, the balance and the next step", async () => {
    const { page } = owner;
    await page.getByTestId("balance").filter({ hasText: "$1.00" }).waitFor();
    expect(await page.getByTestId("mode").textContent()).to.equal("API");
    await page.getByRole("heading", { name: "Next step" }).waitFor();
    await check(page, "overview");
  });

  it("creates a PKP and lists it with the address and public key the API reports", async () => {
    const { page } = owner;
    await visit(owner, "pkps", "PKPs");
    await page.getByText("No PKPs yet").waitFor();
    await page.getByLabel("New PKP name").fill("signer");
    await page.getByRole("button", { name: "Create PKP" }).click();
    const row = page.locator("tr[data-pkp-id]");
    await row.waitFor();
    s.pkpId = (await row.getAttribute("data-pkp-id"))!;
    s.pkpAddress = (await row.getAttribute("data-address"))!;
    const api = await stack.api<{ items: Array<{ pkp_id: string; address: string }> }>(
      "GET",
      "/core/v1/pkps",
      {
        key: s.accountKey,
      },
    );
    expect(api.body.items.map((p) => [p.pkp_id, p.address])).to.deep.equal([[s.pkpId, s.pkpAddress]]);
    // Its Solana and Bitcoin keys: the API's values, each with a copy button.
    const listed = api.body.items[0] as unknown as Record<string, string>;
    for (const field of ["solana_address", "taproot_address", "ed25519_public_key", "schnorr_public_key"]) {
      const cell = row.locator(`[data-field=${field}]`);
      expect(await cell.locator("code").getAttribute("title"), field).to.equal(listed[field]);
      expect(await cell.getByRole("button", { name: /^Copy / }).count(), field).to.equal(1);
    }
    await check(page, "pkps");
  });

  it("computes the CID as you type and pins the action from the editor", async () => {
    const { page } = owner;
    await visit(owner, "actions", "Actions");
    const live = page.getByTestId("live-cid");
    await live.filter({ hasText: /^Qm/ }).waitFor();
    const first = (await live.textContent())!;
    await page.locator(".cm-content").click();
    await page.keyboard.press("Control+End");
    await page.keyboard.type("// v2");
    await live.filter({ hasNotText: first }).filter({ hasText: /^Qm/ }).waitFor();
    for (let i = 0; i < 5; i++) await page.keyboard.press("Backspace");
    await live.filter({ hasText: first }).waitFor();
    await page.getByRole("button", { name: "Pin action" }).click();
    await page.getByTestId("pinned-cid").waitFor();
    s.cid = (await page.getByTestId("pinned-cid").textContent())!;
    expect(s.cid).to.equal(first);
    const stored = await stack.api("GET", `/core/v1/actions/${s.cid}`, { key: s.accountKey });
    expect(stored.status).to.equal(200);
    await check(page, "actions");
  });

  it("refuses a bad CID in the group form with an inline error and sends nothing", async () => {
    const { page } = owner;
    await visit(owner, "groups", "Groups");
    await page.getByLabel("Group name").fill("demo");
    await page.getByLabel("Other action CIDs").fill("QmNotACid");
    owner.requests.length = 0;
    await page.getByRole("button", { name: "Create group" }).click();
    await page.getByText('"QmNotACid" is not a CID').waitFor();
    expect(owner.requests.filter((r) => r.startsWith("POST"))).to.deep.equal([]);
  });

  it("creates a group with the PKP and the pinned action", async () => {
    const { page } = owner;
    await page.getByRole("checkbox", { name: /signer/ }).check();
    await page.getByLabel("Other action CIDs").fill("");
    await page.getByRole("group", { name: "Pinned actions in the group" }).getByRole("checkbox").check();
    await page.getByRole("button", { name: "Create group" }).click();
    await page.getByTestId("toasts").getByText("Group “demo” created").waitFor();
    const row = page.locator("tr[data-group-id]");
    await row.waitFor();
    s.groupId = Number(await row.getAttribute("data-group-id"));
    const g = await stack.api<{ pkps: string[]; actions: string[] }>("GET", `/core/v1/groups/${s.groupId}`, {
      key: s.accountKey,
    });
    expect(g.body.actions).to.deep.equal([s.cid]);
    expect(g.body.pkps.map((p) => p.toLowerCase())).to.deep.equal([s.pkpId!.toLowerCase()]);
    await check(page, "groups");
  });

  it("creates a usage key that may only execute in that group, shown once, summarised as such", async () => {
    const { page } = owner;
    await visit(owner, "keys", "Usage keys");
    s.usageKey = await createExecuteOnlyUsageKey(page, "demo", {
      onForm: () => check(page, "usage-key-create"),
      onList: () => check(page, "usage-keys"),
    });
  });

  it("with the usage key: billing is hidden, and the action runs with a signature that verifies to the PKP", async () => {
    server = await openPage(browser, stack.url);
    const { page } = server;
    await page.goto("/");
    await page.getByLabel("Key", { exact: true }).fill(s.usageKey!);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
    expect(await page.getByRole("link", { name: "Billing" }).count()).to.equal(0);
    await visit(server, "actions", "Actions");
    await page.getByRole("radio", { name: "a pinned action by CID" }).check();
    await page.getByLabel("Action CID").fill(s.cid!);
    await page.getByLabel("PKP", { exact: true }).selectOption(s.pkpId!);
    await page.getByLabel("Params (JSON object)").fill('{ "message": "hello from the dashboard" }');
    await page.getByRole("button", { name: "Run", exact: true }).click();
    await page.getByTestId("run-result").waitFor();
    expect(await page.getByTestId("run-result").getByTestId("run-status").textContent()).to.equal(
      "Succeeded",
    );
    const response = JSON.parse((await page.getByTestId("run-response").textContent())!);
    expect(verifyMessage("hello from the dashboard", response.signature)).to.equal(s.pkpAddress);
    // Signed requests: the usage key itself never crossed the wire.
    expect(server.requests.length).to.be.greaterThan(0);
    await check(page, "run-with-usage-key");
  });

  it("after the owner revokes the key, the runner shows the API's 401 and its code", async () => {
    await visit(owner, "keys", "Usage keys");
    await owner.page.getByRole("button", { name: "Revoke" }).click();
    // The confirmation sits in the middle of the screen, not in a corner over the header.
    const box = (await owner.page.getByRole("dialog").boundingBox())!;
    const viewport = owner.page.viewportSize()!;
    expect(Math.abs(box.x + box.width / 2 - viewport.width / 2)).to.be.below(2);
    expect(Math.abs(box.y + box.height / 2 - viewport.height / 2)).to.be.below(2);
    await owner.page.getByRole("button", { name: "Revoke key" }).click();
    await owner.page.getByTestId("toasts").getByText("Usage key “server” revoked.").waitFor();
    await owner.page.getByText("No usage keys yet").waitFor({ timeout: 30_000 });
    const { page } = server;
    const error = page.getByTestId("run-error").getByRole("alert");
    for (let i = 0; i < 20 && (await error.count()) === 0; i++) {
      await page.getByRole("button", { name: "Run", exact: true }).click();
      await page.getByRole("button", { name: "Run", exact: true }).and(page.locator(":enabled")).waitFor();
      if ((await error.count()) === 0) await page.waitForTimeout(250);
    }
    const text = (await error.textContent()) ?? "";
    expect(text).to.contain("(HTTP 401)");
    expect(text).to.contain("unknown_api_key");
    await check(page, "run-after-revoke");
  });

  it("when the key expires mid-session, the next page shows the API's api_key_expired", async () => {
    const expiration = Math.floor(Date.now() / 1000) + 8;
    const created = await stack.api<{ usage_api_key: string }>("POST", "/core/v1/add_usage_api_key", {
      key: s.accountKey,
      body: { name: "short-lived", expiration, execute_in_groups: [s.groupId] },
    });
    expect(created.status).to.equal(201);
    const { page } = server;
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("Key", { exact: true }).fill(created.body.usage_api_key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByTestId("mode").waitFor();
    while (Date.now() / 1000 < expiration + 1) await page.waitForTimeout(250);
    await visit(server, "pkps", "PKPs");
    const error = page.getByRole("alert").filter({ hasText: "api_key_expired" });
    await error.waitFor();
    expect(await error.textContent()).to.contain("(HTTP 401)");
    await check(page, "expired-key");
  });

  it("refuses a top-up of 499 cents inline and sends nothing", async () => {
    const { page } = owner;
    await visit(owner, "billing", "Billing");
    await page.getByText("simulated (no money moves)").waitFor();
    await page.getByLabel("Amount in cents").fill("499");
    owner.requests.length = 0;
    await page.getByRole("button", { name: "Continue to payment" }).click();
    await page.getByText("At least 500 cents").waitFor();
    expect(owner.requests.filter((r) => r.startsWith("POST"))).to.deep.equal([]);
  });

  it("credits a simulated top-up once when Pay is double-clicked", async () => {
    const { page } = owner;
    const before = await stack.api<{ balance_cents: number }>("GET", "/core/v1/billing/balance", {
      key: s.accountKey,
    });
    await page.getByLabel("Amount in cents").fill("500");
    await page.getByRole("button", { name: "Continue to payment" }).click();
    await page.getByText("Simulated:").waitFor();
    await check(page, "billing-simulated-payment");
    owner.requests.length = 0;
    await page.getByRole("button", { name: "Pay $5.00 (simulated)" }).dblclick();
    await page.getByText("Credited $5.00.").waitFor();
    // The page confirms once (the second click is ignored while the first is in flight) ...
    expect(
      owner.requests.filter((r) => /^POST \/core\/v1\/billing\/(simulated|confirm)/.test(r)),
    ).to.have.length(2);
    // ... and the service would credit an intent once anyway.
    const after = await stack.api<{ balance_cents: number }>("GET", "/core/v1/billing/balance", {
      key: s.accountKey,
    });
    expect(after.body.balance_cents - before.body.balance_cents).to.equal(500);
    await page.getByRole("cell", { name: "+$5.00" }).waitFor();
    expect(await page.getByRole("cell", { name: "+$5.00" }).count()).to.equal(1);
    // The spend chart (its own chunk) plots the writes and the execution spent so far.
    await page.getByRole("img", { name: /^Spend per day and action\. \d{4}-\d\d-\d\d: \d+ cents/ }).waitFor();
    await check(page, "billing");
  });

  it("proposes an ownership transfer to a wallet (bad address refused inline), shows it pending, and cancels it", async () => {
    const { page } = owner;
    await visit(owner, "ownership", "Ownership");
    await page.getByLabel("New owner address").fill("0x1234");
    await page.getByRole("button", { name: "Propose transfer" }).click();
    await page.getByText("An Ethereum address").waitFor();
    await page.getByLabel("New owner address").fill(ANVIL_ACCOUNT_1);
    await page.getByRole("button", { name: "Propose transfer" }).click();
    await page.getByTestId("pending-owner").waitFor();
    expect((await page.getByTestId("pending-owner").textContent())!.toLowerCase()).to.equal(
      ANVIL_ACCOUNT_1.toLowerCase(),
    );
    await check(page, "ownership-pending");
    await visit(owner, "overview", "Overview");
    expect(await page.getByTestId("mode").textContent()).to.equal("transfer pending");
    await visit(owner, "ownership", "Ownership");
    await page.getByRole("button", { name: "Cancel transfer" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Cancel transfer" }).click();
    await page.getByRole("button", { name: "Propose transfer" }).waitFor({ timeout: 30_000 });
  });

  it("accepts the transfer through an injected wallet after a preview, and shows ChainSecured", async () => {
    const { page } = owner;
    await injectWallet(owner, stack);
    await page.reload();
    await page.getByLabel("New owner address").fill(ANVIL_ACCOUNT_1);
    await page.getByRole("button", { name: "Propose transfer" }).click();
    await page.getByRole("button", { name: "Accept as the new owner…" }).click();
    const preview = page.getByTestId("tx-preview");
    await preview.waitFor();
    expect(await preview.getByTestId("tx-function").textContent()).to.equal("acceptOwnership");
    expect(await preview.textContent()).to.contain(stack.deployment.registry);
    await check(page, "ownership-accept-preview");
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    await page.getByTestId("chain-secured").waitFor({ timeout: 30_000 });
    const account = await stack.api<{ mode: string; owner_address: string }>("GET", "/core/v1/account", {
      key: s.accountKey,
    });
    expect(account.body.mode).to.equal("chain_secured");
    expect(account.body.owner_address.toLowerCase()).to.equal(ANVIL_ACCOUNT_1.toLowerCase());
    await visit(owner, "overview", "Overview");
    expect(await page.getByTestId("mode").textContent()).to.equal("ChainSecured");
  });

  it("once ChainSecured, turns creating a group into a previewed owner transaction that the wallet sends", async () => {
    const { page } = owner;
    await visit(owner, "groups", "Groups");
    await page.getByText("Create a group").click();
    await page.getByLabel("Group name").fill("owner-made");
    owner.requests.length = 0;
    await page.getByRole("button", { name: "Create group" }).click();
    const preview = page.getByTestId("tx-preview");
    await preview.waitFor();
    // Nothing went to the API: the change is the owner's own transaction.
    expect(owner.requests.filter((r) => r.startsWith("POST"))).to.deep.equal([]);
    expect(await preview.getByTestId("tx-function").textContent()).to.equal("createGroup");
    expect(await preview.textContent()).to.contain("owner-made");
    await check(page, "groups-owner-transaction");
    // The Safe Transaction Builder file carries the calldata the Safe tool (npm run safe) encodes.
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      preview.getByRole("button", { name: "Download Safe Transaction Builder file" }).click(),
    ]);
    const batch = JSON.parse(fs.readFileSync((await download.path())!, "utf8"));
    expect(batch.chainId).to.equal("31337");
    expect(batch.transactions).to.deep.equal([
      {
        to: stack.deployment.registry,
        value: "0",
        data: registryInterface.encodeFunctionData("createGroup", ["owner-made", "", [], []]),
        contractMethod: null,
        contractInputsValues: null,
      },
    ]);
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    await page.getByRole("cell", { name: "owner-made" }).waitFor({ timeout: 30_000 });
  });

  it("has no serious accessibility violations in the dark theme", async () => {
    const { page } = owner;
    await visit(owner, "overview", "Overview");
    await page.getByRole("button", { name: "Dark theme" }).click();
    expect(await page.evaluate("document.documentElement.dataset.theme")).to.equal("dark");
    await check(page, "overview-dark");
  });

  it("signing out forgets the key", async () => {
    const { page } = owner;
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    expect(await page.evaluate("Object.keys(sessionStorage)")).to.deep.equal([]);
    await page.reload();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
  });
});
