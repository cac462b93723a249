/**
 * Every form's bad input, in a real Chromium on the real stack (simulated processor): either the page
 * refuses it inline and sends nothing (counted: every API request the tab makes is recorded), or the
 * API refuses it and the page shows its typed error with the code. Then the Actions page's list of
 * pinned actions. (The first e2e file covers a bad CID in the group form, 499 cents, a malformed key,
 * a bad owner address, a revoked and an expired key.)
 */
import { expect } from "chai";
import type { Browser } from "playwright-core";
import { setupAccount, type Stack } from "../helpers/stack";
import { openPage, type WatchedPage } from "./browser";
import { check, guardSteps, signIn, startDashboardRig, visit, type DashboardRig } from "./support";

describe("dashboard: bad input in every form, and the pinned actions, in Chromium", function () {
  this.timeout(240_000);
  let rig: DashboardRig;
  let stack: Stack;
  let browser: Browser;
  let owner: WatchedPage;
  let account: Awaited<ReturnType<typeof setupAccount>>;

  /** Runs `act` and returns the write requests (anything but GET) the tab sent meanwhile. */
  const writesDuring = async (act: () => Promise<void>): Promise<string[]> => {
    owner.requests.length = 0;
    await act();
    return owner.requests.filter((r) => !r.startsWith("GET "));
  };

  before(async function () {
    rig = await startDashboardRig();
    ({ stack, browser } = rig);
    account = await setupAccount(stack);
    owner = await openPage(browser, stack.url);
    await signIn(owner, account.accountKey);
  });

  after(async () => {
    await rig?.close();
  });

  guardSteps(() => ({ owner }));

  describe("usage key form", () => {
    before(async () => {
      await visit(owner, "keys", "Usage keys");
      await owner.page.getByRole("button", { name: "New usage key" }).click();
      await owner.page.getByLabel("Key name").fill("limited");
    });

    it("refuses an expiration date in the past inline and sends nothing", async () => {
      const { page } = owner;
      await page.getByLabel("Expires on").fill("2020-01-01");
      const sent = await writesDuring(async () => {
        await page.getByRole("button", { name: "Create key" }).click();
        await page.getByText("The expiration must be in the future.").waitFor();
      });
      expect(sent).to.deep.equal([]);
      await check(page, "form-usage-key-bad-date");
    });

    it("refuses a spend cap that is not a whole number of cents inline and sends nothing", async () => {
      const { page } = owner;
      await page.getByLabel("Expires on").fill("");
      for (const cap of ["1.5", "-5", "ten"]) {
        await page.getByLabel("Spend cap (cents)").fill(cap);
        const sent = await writesDuring(async () => {
          await page.getByRole("button", { name: "Create key" }).click();
          await page.getByText("A whole number of cents, e.g. 500.").waitFor();
        });
        expect(sent, cap).to.deep.equal([]);
      }
    });
  });

  it("shows the API's string_too_long for a group name over 256 bytes (100 characters of 3 bytes each), and creates nothing", async () => {
    const { page } = owner;
    await visit(owner, "groups", "Groups");
    await page.getByText("Create a group").click(); // folded away once the account has a group
    await page.getByLabel("Group name").fill("€".repeat(100));
    const alert = page.getByRole("alert").filter({ hasText: "string_too_long" });
    await page.getByRole("button", { name: "Create group" }).click();
    await alert.waitFor();
    expect(await alert.textContent()).to.contain("(HTTP 400)");
    const groups = await stack.api<{ items: unknown[] }>("GET", "/core/v1/groups", {
      key: account.accountKey,
    });
    expect(groups.body.items).to.have.length(1);
    await check(page, "form-group-name-too-long");
  });

  describe("runner", () => {
    before(async () => {
      await visit(owner, "actions", "Actions");
      await owner.page.getByLabel("PKP", { exact: true }).selectOption(account.pkpId);
    });

    it("refuses params that are not JSON inline and sends nothing", async () => {
      const { page } = owner;
      await page.getByLabel("Params (JSON object)").fill('{ "message": ');
      const sent = await writesDuring(async () => {
        await page.getByRole("button", { name: "Run", exact: true }).click();
        await page.getByText(/^Not valid JSON: /).waitFor();
      });
      expect(sent).to.deep.equal([]);
      await check(page, "form-run-bad-params");
    });

    it("refuses params that are JSON but not an object inline and sends nothing", async () => {
      const { page } = owner;
      for (const params of ["[1, 2]", '"text"', "null", "42"]) {
        await page.getByLabel("Params (JSON object)").fill(params);
        const sent = await writesDuring(async () => {
          await page.getByRole("button", { name: "Run", exact: true }).click();
          await page.getByText("Params must be a JSON object.").waitFor();
        });
        expect(sent, params).to.deep.equal([]);
      }
    });

    it("refuses a CID that is not one inline and sends nothing", async () => {
      const { page } = owner;
      await page.getByLabel("Params (JSON object)").fill("{}");
      await page.getByRole("radio", { name: "a pinned action by CID" }).check();
      await page.getByLabel("Action CID").fill("QmNotACid");
      const sent = await writesDuring(async () => {
        await page.getByRole("button", { name: "Run", exact: true }).click();
        await page.getByText("Not a CID (Qm… or b…).").waitFor();
      });
      expect(sent).to.deep.equal([]);
    });
  });

  describe("pinned actions", () => {
    before(async () => {
      await visit(owner, "actions", "Actions");
      await owner.page.reload(); // a fresh page: nothing left from the runner's refusals above
    });

    it("lists the pinned action with its CID, size and date; Load puts its CID into the runner", async function () {
      const { page } = owner;
      const table = page.getByTestId("pinned-actions");
      await table.locator(`code[title="${account.cid}"]`).waitFor();
      await table.getByRole("button", { name: `Load into the runner: ${account.cid}` }).click();
      // React applies the choice on its next render: wait for it rather than read it at once.
      await page
        .getByRole("radio", { name: "a pinned action by CID" })
        .and(page.locator(":checked"))
        .waitFor();
      expect(await page.getByLabel("Action CID").inputValue()).to.equal(account.cid);
      await check(page, "actions-pinned");
    });
  });
});
