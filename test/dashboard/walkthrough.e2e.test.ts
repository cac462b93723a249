/**
 * The README walk-through in the dashboard alone, as a newcomer would do it in the browser: an account,
 * a PKP, the action written in the editor and run as the owner (no group needed), pinned, a group, a usage
 * key, then the action run as that key, and its signature verified with ethers. Done four times: at
 * 1280 px and at 390 px (a phone), in the light and the dark theme, with axe-core reporting no violations
 * (of any impact) on every page visited, and no page wider than the screen.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { AxeBuilder } from "@axe-core/playwright";
import { expect } from "chai";
import { verifyMessage } from "ethers";
import type { Page } from "playwright-core";
import { openPage, SCREENSHOTS, type WatchedPage } from "./browser";
import { createExecuteOnlyUsageKey, guardSteps, startDashboardRig, type DashboardRig } from "./support";

const SHOTS = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-walkthrough-"));
/** The pictures the README and docs/dashboard.md show (the rest stay in the temp folder). */
const PUBLISHED = new Set(["1280-light-run-as-owner", "390-dark-run-as-owner"]);

async function axeClean(page: Page, name: string): Promise<void> {
  await page.getByText(/^Loading /).waitFor({ state: "detached", timeout: 20_000 });
  const result = await new AxeBuilder({ page }).analyze();
  const violations = result.violations.map(
    (v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`,
  );
  expect(violations, `axe on ${name}`).to.deep.equal([]);
  // Usable at phone width: nothing wider than the screen (a table 776 px wide at 390 px was the bug).
  const overflow = (await page.evaluate(
    "document.documentElement.scrollWidth - document.documentElement.clientWidth",
  )) as number;
  expect(overflow, `horizontal overflow on ${name}`).to.be.at.most(0);
  const file = path.join(
    PUBLISHED.has(name) ? SCREENSHOTS : SHOTS,
    `${PUBLISHED.has(name) ? "walkthrough-" : ""}${name}.png`,
  );
  await page.screenshot({ path: file, fullPage: true });
}

async function goTo(w: WatchedPage, hash: string, heading: string): Promise<void> {
  await w.page
    .getByRole("navigation", { name: "Pages" })
    .getByRole("link", { name: heading, exact: true })
    .click();
  await w.page.getByRole("heading", { level: 1, name: heading }).waitFor();
  expect(w.page.url()).to.contain(`#/${hash}`);
}

const MESSAGE = "hello from Sigil";

// One service and one browser for the four walk-throughs: each signs up its own account in its own
// browser context (fresh storage), so nothing one walk-through makes is visible to the next, and a
// stack and a Chromium start once instead of four times.
describe("dashboard: the README walk-through", function () {
  this.timeout(240_000);
  let rig: DashboardRig | undefined;
  before(async function () {
    rig = await startDashboardRig();
  });
  after(async () => {
    await rig?.close();
  });

  for (const width of [1280, 390])
    for (const theme of ["light", "dark"] as const)
      describe(`at ${width} px, ${theme} theme`, function () {
        const tag = `${width}-${theme}`;
        let w: WatchedPage | undefined;
        const s: { pkpAddress?: string; cid?: string; usageKey?: string } = {};

        before(async function () {
          w = await openPage(rig!.browser, rig!.stack.url);
          await w.page.setViewportSize({ width, height: 900 });
          await w.context.addInitScript(`localStorage.setItem("sigil.theme", "${theme}")`);
        });
        // The context stays open until the browser closes: this Chromium runs as one process
        // (--single-process), and closing a context ends the browser with it.
        guardSteps(() => ({ tab: w }));

        it("creates an account on the sign-in page and shows its key once", async () => {
          const { page } = w!;
          await page.goto("/");
          expect(await page.evaluate("document.documentElement.dataset.theme")).to.equal(theme);
          await axeClean(page, `${tag}-sign-in`);
          await page.getByLabel("Account name").fill("my first account");
          await page.getByRole("button", { name: "Create account" }).click();
          await page.getByTestId("shown-once-value").waitFor();
          await axeClean(page, `${tag}-account-key`);
          await page.getByLabel("I have saved it").check();
          await page.getByRole("button", { name: "Continue" }).click();
          await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
          await axeClean(page, `${tag}-overview`);
        });

        it("creates a PKP", async () => {
          const { page } = w!;
          await goTo(w!, "pkps", "PKPs");
          await page.getByLabel("New PKP name").fill("signer");
          await page.getByRole("button", { name: "Create PKP" }).click();
          await page.getByTestId("toasts").getByText("PKP “signer” created.").waitFor();
          const row = page.locator("tr[data-pkp-id]");
          await row.waitFor();
          s.pkpAddress = (await row.getAttribute("data-address"))!;
          await axeClean(page, `${tag}-pkps`);
        });

        it("runs the action in the editor as the owner, with no group, and shows what it cost", async () => {
          const { page } = w!;
          await goTo(w!, "actions", "Actions");
          await page.getByTestId("live-cid").filter({ hasText: /^Qm/ }).waitFor();
          await page
            .getByLabel("PKP", { exact: true })
            .selectOption({ label: `signer · ${short(s.pkpAddress!)}` });
          await page.getByLabel("Params (JSON object)").fill(JSON.stringify({ message: MESSAGE }));
          expect(await page.getByLabel("Time limit (seconds)").inputValue()).to.equal("5");
          expect(await page.getByTestId("worst-case").textContent()).to.contain("at most 5 cents");
          await page.getByRole("button", { name: "Run", exact: true }).click();
          const result = page.getByTestId("run-result");
          await result.waitFor();
          expect(await result.getByTestId("run-status").textContent()).to.equal("Succeeded");
          expect(await page.getByTestId("run-cost").textContent()).to.equal("1 cent");
          const response = JSON.parse((await page.getByTestId("run-response").textContent())!);
          expect(verifyMessage(MESSAGE, response.signature)).to.equal(s.pkpAddress);
          await axeClean(page, `${tag}-run-as-owner`);
        });

        it("pins the action", async () => {
          const { page } = w!;
          await page.getByRole("button", { name: "Pin action" }).click();
          await page.getByTestId("pinned-cid").waitFor();
          s.cid = (await page.getByTestId("pinned-cid").textContent())!;
          expect(s.cid).to.match(/^Qm/);
        });

        it("creates a group with the PKP and the pinned action, picked by name", async () => {
          const { page } = w!;
          await goTo(w!, "groups", "Groups");
          await page.getByLabel("Group name").fill("demo");
          await page
            .getByRole("group", { name: "PKPs in the group" })
            .getByRole("checkbox", { name: /signer/ })
            .check();
          await page
            .getByRole("group", { name: "Pinned actions in the group" })
            .getByRole("checkbox")
            .check();
          await axeClean(page, `${tag}-group-form`);
          await page.getByRole("button", { name: "Create group" }).click();
          await page.getByTestId("toasts").getByText("Group “demo” created").waitFor();
          await page.locator("tr[data-group-id]").waitFor();
          await axeClean(page, `${tag}-groups`);
        });

        it("creates a usage key that may execute in the group, shown once", async () => {
          const { page } = w!;
          await goTo(w!, "keys", "Usage keys");
          s.usageKey = await createExecuteOnlyUsageKey(page, "demo", {
            onForm: () => axeClean(page, `${tag}-usage-key-form`),
            onList: () => axeClean(page, `${tag}-usage-keys`),
          });
        });

        it("the billing page shows the sign-up credit and the charges in words", async () => {
          const { page } = w!;
          await goTo(w!, "billing", "Billing");
          await page.getByText("Sign-up credit").waitFor();
          await axeClean(page, `${tag}-billing`);
        });

        it("signs in with the usage key and runs the pinned action; the signature verifies with ethers", async () => {
          const { page } = w!;
          await page.getByRole("button", { name: "Sign out" }).click();
          await page.getByLabel("Key", { exact: true }).fill(s.usageKey!);
          await page.getByRole("button", { name: "Sign in", exact: true }).click();
          await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
          await goTo(w!, "actions", "Actions");
          await page.getByRole("radio", { name: "a pinned action by CID" }).check();
          await page.getByLabel("Action CID").fill(s.cid!);
          await page
            .getByLabel("PKP", { exact: true })
            .selectOption({ label: `signer · ${short(s.pkpAddress!)}` });
          await page.getByLabel("Params (JSON object)").fill(JSON.stringify({ message: MESSAGE }));
          await page.getByRole("button", { name: "Run", exact: true }).click();
          const result = page.getByTestId("run-result");
          await result.waitFor();
          expect(await result.getByTestId("run-status").textContent()).to.equal("Succeeded");
          const response = JSON.parse((await page.getByTestId("run-response").textContent())!);
          expect(verifyMessage(MESSAGE, response.signature)).to.equal(s.pkpAddress);
          await axeClean(page, `${tag}-run-as-usage-key`);
        });
      });
});

/** The dashboard's shortening of long hex (components/ui.tsx). */
function short(hex: string, keep = 10): string {
  return hex.length > keep * 2 + 1 ? `${hex.slice(0, keep)}…${hex.slice(-keep + 2)}` : hex;
}
