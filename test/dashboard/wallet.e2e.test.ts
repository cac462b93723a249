/**
 * The owner of a ChainSecured account in the dashboard, in a real Chromium on the real stack: signs in
 * with an injected EIP-1193 wallet (EIP-4361, one personal_sign), sees the account, and manages usage
 * keys as owner transactions the wallet sends; manages the account's triggers (the one change it makes
 * through the service: a trigger is not a registry write). The wallet is anvil account 1, signing in the test
 * process with its key on the real chain.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet } from "ethers";
import type { Browser, Page } from "playwright-core";
import { createSigil, isSigilError, type OwnerSession } from "sigil/sdk";
import { createBilling, SimulatedProcessor } from "../../relayer/billing";
import { encodeRegistryCall } from "../../scripts/safe/lib";
import { registryInterface } from "../../scripts/safe/lib/registryCalls";
import { ensureDashboardBuilt } from "../../scripts/start/dashboardBuild";
import { setupAccount, startStack, type Stack } from "../helpers/stack";
import { launchBrowser, openPage, screenshot, seriousViolations, type WatchedPage } from "./browser";
import { ANVIL_KEY_1 as OWNER_KEY, injectWallet } from "./injectedWallet";

describe("dashboard: the owner signs in with a wallet (Chromium)", function () {
  this.timeout(240_000);
  let stack: Stack;
  let browser: Browser;
  let tab: WatchedPage;
  let ledgerDir: string;
  let account: Awaited<ReturnType<typeof setupAccount>>;
  let usageKey: string;
  let addedKey: string;
  const owner = new Wallet(OWNER_KEY).address;

  const check = async (page: Page, name: string) => {
    await page.getByText(/^Loading /).waitFor({ state: "detached", timeout: 20_000 });
    expect(await seriousViolations(page), `axe on ${name}`).to.deep.equal([]);
    await screenshot(page, name);
  };
  const visit = async (hash: string, heading: string) => {
    await tab.page.goto(`/#/${hash}`);
    await tab.page.getByRole("heading", { level: 1, name: heading }).waitFor();
  };

  before(async function () {
    if (!ensureDashboardBuilt((m) => process.stderr.write(`  (${m})\n`)))
      throw new Error("dashboard build failed");
    ledgerDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-wallet-ledger-"));
    const billing = await createBilling({
      dbPath: path.join(ledgerDir, "ledger.sqlite"),
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 0,
    });
    stack = await startStack({ billing });
    // An account with a PKP, an action and a group, then ChainSecured: owned by the anvil account.
    account = await setupAccount(stack, 'async function main() { return "hi from the owner\'s key"; }');
    const t = await stack.api("POST", "/core/v1/account/transfer_ownership", {
      key: account.accountKey,
      body: { new_owner: owner },
    });
    expect(t.status).to.equal(200);
    const tx = await new Wallet(OWNER_KEY, stack.provider).sendTransaction({
      to: stack.deployment.registry,
      data: encodeRegistryCall({ op: "accept-ownership", accountId: account.accountId }).data,
    });
    await tx.wait();
    browser = await launchBrowser();
    tab = await openPage(browser, stack.url);
    await injectWallet(tab, stack);
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
    if (ledgerDir) fs.rmSync(ledgerDir, { recursive: true, force: true });
  });

  afterEach(function () {
    const problems = [...(tab?.problems ?? [])];
    if (tab) tab.problems.length = 0;
    expect(problems).to.deep.equal([]);
  });

  it("signs in with the wallet: the overview shows ChainSecured and the owner's address", async () => {
    const { page } = tab;
    await page.goto("/");
    await check(page, "wallet-sign-in");
    await page.getByRole("button", { name: "Sign in with wallet" }).click();
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
    await page.getByTestId("mode").filter({ hasText: "ChainSecured" }).waitFor();
    expect(await page.getByText(owner).count()).to.be.greaterThan(0);
    await check(page, "wallet-overview");
  });

  it("keeps no key in sessionStorage: only the session material, whose key is not the owner's", async () => {
    const stored = (await tab.page.evaluate("JSON.stringify(sessionStorage)")) as string;
    expect(stored).to.not.match(/ak_[0-9a-f]{64}|uk_[0-9a-f]{64}/);
    expect(stored.toLowerCase()).to.not.contain(OWNER_KEY.slice(2).toLowerCase());
    const slots = JSON.parse(stored) as Record<string, string>;
    expect(Object.keys(slots)).to.deep.equal(["sigil.session.owner"]);
    const session = JSON.parse(slots["sigil.session.owner"]) as { sessionKey: string; owner: string };
    expect(session.owner).to.equal(owner);
    expect(new Wallet(session.sessionKey).address).to.not.equal(owner);
  });

  it("creates a PKP as an owner transaction (the registry lets the owner call createPkp)", async () => {
    const { page } = tab;
    await visit("pkps", "PKPs");
    await page.getByLabel("New PKP name").fill("owner-made");
    await page.getByRole("button", { name: "Prepare owner transaction" }).click();
    const preview = page.getByTestId("tx-preview");
    expect(await preview.getByTestId("tx-function").textContent()).to.equal("createPkp");
    await check(page, "wallet-pkp-preview");
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    await page.getByRole("cell", { name: "owner-made", exact: true }).waitFor();
    const pkps = await stack.api("GET", "/core/v1/pkps", { key: account.accountKey });
    expect(pkps.body.items.map((p: { name: string }) => p.name)).to.deep.equal(["p1", "owner-made"]);
  });

  it("creates a usage key as an owner transaction the wallet sends; the key is shown once", async () => {
    const { page } = tab;
    await visit("keys", "Usage keys");
    await page.getByRole("button", { name: "New usage key" }).click();
    await page.getByLabel("Key name").fill("from-the-wallet");
    await page.getByRole("group", { name: "Execute in" }).getByRole("checkbox", { name: /g1/ }).check();
    await page.getByRole("button", { name: "Prepare owner transaction" }).click();
    const preview = page.getByTestId("tx-preview");
    await preview.waitFor();
    expect(await preview.getByTestId("tx-function").textContent()).to.equal("addKey");
    // The same calldata the Safe tool (npm run safe) encodes for this key and these scopes.
    const data = (await preview.locator(".calldata").textContent())!;
    const [key, keyHash] = registryInterface.decodeFunctionData("addKey", data);
    addedKey = key;
    expect(data).to.equal(
      encodeRegistryCall({
        op: "add-key",
        key,
        keyHash,
        name: "from-the-wallet",
        scopes: { execute_in_groups: [account.groupId] },
      }).data,
    );
    await check(page, "wallet-usage-key-preview");
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    const value = page.getByTestId("shown-once-value");
    await value.waitFor();
    usageKey = (await value.textContent())!;
    expect(usageKey).to.match(/^uk_[0-9a-f]{64}$/);
    // The key shown is the one the transaction registered.
    expect(new Wallet("0x" + usageKey.slice(3)).address).to.equal(addedKey);
    await page.getByLabel("I have saved it").check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByTestId("scope-summary").filter({ hasText: "execute: g1" }).waitFor();
    await check(page, "wallet-usage-keys");
  });

  it("the key shown once executes the group's action", async () => {
    const sigil = createSigil({ baseUrl: stack.url, apiKey: usageKey });
    const r = await sigil.waitUntilExecutable({ cid: account.cid, pkp_id: account.pkpId, js_params: {} });
    expect(r.response).to.equal("hi from the owner's key");
  });

  it("manages the account's triggers: sees one made with the account key and fires it", async () => {
    const { page } = tab;
    const made = await stack.api("POST", "/core/v1/triggers", {
      key: account.accountKey,
      body: {
        name: "owner-visible heartbeat",
        kind: "schedule",
        cid: account.cid,
        pkp_ids: [account.pkpId],
        run_as: { key_address: addedKey },
        schedule: { cron: "*/5 * * * *" },
      },
    });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    await visit("triggers", "Triggers");
    const row = page.locator(`tr[data-trigger-id="${made.body.id}"]`);
    expect(await row.innerText()).to.match(/owner-visible heartbeat[\s\S]*Schedule[\s\S]*from-the-wallet/);
    // A trigger is the service's own record, not a registry write: the owner's session manages it.
    expect(await page.getByTestId("triggers-read-only").count()).to.equal(0);
    await page.getByRole("button", { name: "New trigger" }).waitFor();
    await row.getByRole("link", { name: "owner-visible heartbeat" }).click();
    await page.getByTestId("trigger-settings").waitFor();
    await page.getByRole("heading", { level: 2, name: "Run history" }).waitFor();
    for (const name of ["Edit", "Disable", "Delete"])
      expect(await page.getByRole("button", { name, exact: true }).count(), name).to.equal(1);
    await page.getByRole("button", { name: "Fire now", exact: true }).click();
    await page
      .locator("[data-testid=trigger-runs] tbody tr[data-status=succeeded]")
      .waitFor({ timeout: 30_000 });
    await check(page, "wallet-triggers");
  });

  it("revokes it as an owner transaction; the key then gets 401 unknown_api_key", async () => {
    const { page } = tab;
    await visit("keys", "Usage keys");
    await page.getByRole("button", { name: "Revoke" }).click();
    await page.getByRole("button", { name: "Revoke key" }).click();
    const preview = page.getByTestId("tx-preview");
    expect(await preview.getByTestId("tx-function").textContent()).to.equal("removeKey");
    await preview.getByRole("button", { name: "Send with wallet" }).click();
    await page.getByText("No usage keys yet").waitFor({ timeout: 30_000 });
    const sigil = createSigil({ baseUrl: stack.url, apiKey: usageKey });
    const err = await sigil.execute({ cid: account.cid, pkp_id: account.pkpId, js_params: {} }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isSigilError(err) && [err.status, err.code]).to.deep.equal([401, "unknown_api_key"]);
  });

  it("signs out: the tab forgets the session and the service refuses a copy of it (401 siwe_session_revoked)", async () => {
    const { page } = tab;
    // A copy of the tab's session, as someone on a shared machine could take it before sign-out.
    const stored = (await page.evaluate('sessionStorage.getItem("sigil.session.owner")')) as string;
    const copy = createSigil({ baseUrl: stack.url, ownerSession: JSON.parse(stored) as OwnerSession });
    expect((await copy.account()).account_id).to.equal(account.accountId);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in with wallet" }).waitFor();
    expect(await page.evaluate("sessionStorage.length")).to.equal(0);
    const err = await copy.account().then(
      () => null,
      (e: unknown) => e,
    );
    expect(isSigilError(err) && [err.status, err.code]).to.deep.equal([401, "siwe_session_revoked"]);
  });
});
