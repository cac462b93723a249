/**
 * The first hour's mistakes in the dashboard, in Chromium on the real stack: a wrong key at sign-in, an
 * empty usage-key form, an action that throws, one that runs past its time limit, and a run whose page
 * is left before it answers. Each costs little, and the page says what happened and what to do.
 */
import { expect } from "chai";
import { setupAccount, type Stack } from "../helpers/stack";
import { openPage, type WatchedPage } from "./browser";
import { check, guardSteps, signIn, startDashboardRig, visit, type DashboardRig } from "./support";

describe("dashboard: the first hour's mistakes, in Chromium", function () {
  this.timeout(240_000);
  let rig: DashboardRig;
  let stack: Stack;
  let tab: WatchedPage;
  let account: Awaited<ReturnType<typeof setupAccount>>;
  const pin = async (code: string): Promise<string> =>
    (await stack.api("POST", "/core/v1/actions", { key: account.accountKey, body: { code } })).body.cid;

  before(async function () {
    rig = await startDashboardRig();
    stack = rig.stack;
    account = await setupAccount(stack);
    tab = await openPage(rig.browser, stack.url);
  });
  after(async () => {
    await rig?.close();
  });
  guardSteps(() => ({ tab }));

  it("a well-formed key the service does not know stays on the sign-in form with the reason and the fix", async () => {
    const { page } = tab;
    await page.goto("/");
    await page.getByLabel("Key", { exact: true }).fill("uk_" + "3d".repeat(32));
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    const alert = page.getByRole("alert").filter({ hasText: "unknown_api_key" });
    await alert.waitFor();
    expect(await alert.getByTestId("error-fix").textContent()).to.contain("Use a live key");
    expect(await page.getByRole("heading", { level: 1, name: "Sign in" }).count()).to.equal(1);
    expect(await page.evaluate("sessionStorage.length")).to.equal(0);
    await check(page, "sign-in-refused");
  });

  it("an empty new usage key is refused inline (a name, a permission) and nothing is sent", async () => {
    await signIn(tab, account.accountKey);
    const { page } = tab;
    await visit(tab, "keys", "Usage keys");
    await page.getByRole("button", { name: "New usage key" }).click();
    tab.requests.length = 0;
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByText("Give the key a name").waitFor();
    await page.getByText("Tick at least one permission").waitFor();
    expect(tab.requests.filter((r) => !r.startsWith("GET "))).to.deep.equal([]);
    await check(page, "usage-key-empty-refused");
  });

  it("a key with no permissions is created once that is confirmed, with a toast", async () => {
    const { page } = tab;
    await page.getByLabel("Key name").fill("read-only");
    await page.getByLabel("Yes, no permissions: this key may only read").check();
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByTestId("shown-once-value").waitFor();
    await page.getByLabel("I have saved it").check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByTestId("toasts").getByText("Usage key “read-only” created.").waitFor();
    await page.getByTestId("scope-summary").filter({ hasText: "no permissions" }).waitFor();
  });

  it("an action that throws is a red Failed run, with its error and its cost", async () => {
    const cid = await pin("async function main() { throw new Error('boom'); }");
    const { page } = tab;
    await visit(tab, "actions", "Actions");
    await page.getByRole("radio", { name: "a pinned action by CID" }).check();
    await page.getByLabel("Action CID").fill(cid);
    await page.getByLabel("PKP", { exact: true }).selectOption(account.pkpId);
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const status = page.getByTestId("run-result").getByTestId("run-status");
    await status.filter({ hasText: "Failed" }).waitFor();
    expect(await status.getAttribute("class")).to.contain("badge-failed");
    expect(await page.getByTestId("run-result").textContent()).to.contain("boom");
    expect(await page.getByTestId("run-cost").textContent()).to.equal("1 cent");
    await check(page, "run-failed");
  });

  it("a runaway loop stops at the runner's time limit and costs that limit, not the service's", async () => {
    const cid = await pin("async function main() { for (;;) {} }");
    const { page } = tab;
    await page.getByLabel("Action CID").fill(cid);
    await page.getByLabel("Time limit (seconds)").fill("1");
    expect(await page.getByTestId("worst-case").textContent()).to.contain("at most 1 cent");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const result = page.getByTestId("run-result");
    await result.getByTestId("run-status").filter({ hasText: "Failed" }).waitFor({ timeout: 20_000 });
    expect(await result.textContent()).to.contain("the time limit was 1 s");
    expect(await page.getByTestId("run-cost").textContent()).to.equal("1 cent");
  });

  it("a run whose page is left before it answers shows its result on coming back, with the earlier runs", async () => {
    const cid = await pin("async function main() { await sleep(1500); return 'slept'; }");
    const { page } = tab;
    await page.getByLabel("Action CID").fill(cid);
    await page.getByLabel("Time limit (seconds)").fill("5");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    await page.getByTestId("run-status").filter({ hasText: "Running" }).waitFor();
    await visit(tab, "pkps", "PKPs");
    await page.waitForTimeout(2_500);
    await visit(tab, "actions", "Actions");
    const result = page.getByTestId("run-result");
    await result.getByTestId("run-status").filter({ hasText: "Succeeded" }).waitFor();
    expect(await page.getByTestId("run-response").textContent()).to.equal('"slept"');
    expect(await page.getByTestId("recent-runs").locator("li").count()).to.equal(2);
    // Kept for this tab only, and forgotten at sign-out.
    const stored = (await page.evaluate('sessionStorage.getItem("sigil.session.runs")')) as string;
    expect(JSON.parse(stored)).to.have.length(3);
    expect(stored).to.not.contain(account.accountKey.slice(3));
    await check(page, "runs-after-leaving");
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    expect(await page.evaluate("sessionStorage.length")).to.equal(0);
  });
});
