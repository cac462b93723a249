/**
 * What the browser tests of the dashboard share: the real stack with a billing ledger (simulated
 * processor, or Stripe against the local stub), a Chromium, moving between pages, the axe check and
 * screenshot of a settled page, and the per-step guards (no console errors; a picture of every tab
 * when a step fails).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import { createBilling, SimulatedProcessor, type PaymentProcessor } from "../../relayer/billing";
import type { RelayerOptions } from "../../relayer/config";
import { ensureDashboardBuilt } from "../../scripts/start/dashboardBuild";
import { startStack, type Stack } from "../helpers/stack";
import { launchBrowser, screenshot, seriousViolations, type WatchedPage } from "./browser";

export interface DashboardRig {
  stack: Stack;
  browser: Browser;
  close(): Promise<void>;
}

/** Builds the dashboard if stale, then starts the stack (its ledger in a temp folder) and Chromium. */
export async function startDashboardRig(
  opts: {
    processor?: PaymentProcessor;
    signupCreditCents?: number;
    /** The ledger's prices, when a suite needs others than the defaults (e.g. free writes). */
    prices?: Parameters<typeof createBilling>[0]["prices"];
    /** The relayer's own options for this suite (e.g. a quicker trigger poll). */
    relayer?: Partial<RelayerOptions>;
  } = {},
): Promise<DashboardRig> {
  if (!ensureDashboardBuilt((m) => process.stderr.write(`  (${m})\n`)))
    throw new Error("dashboard build failed");
  const ledgerDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-dashboard-ledger-"));
  const billing = await createBilling({
    dbPath: path.join(ledgerDir, "ledger.sqlite"),
    processor: opts.processor ?? new SimulatedProcessor(),
    signupCreditCents: opts.signupCreditCents ?? 100,
    ...(opts.prices ? { prices: opts.prices } : {}),
    chargeFlushMs: 0,
  });
  const stack = await startStack({ ...opts.relayer, billing });
  const browser = await launchBrowser();
  return {
    stack,
    browser,
    async close() {
      await browser.close();
      await stack.close();
      fs.rmSync(ledgerDir, { recursive: true, force: true });
    },
  };
}

/** Opens `#/<hash>` and waits for the page's heading. */
export async function visit(w: WatchedPage, hash: string, heading: string): Promise<void> {
  await w.page.goto(`/#/${hash}`);
  await w.page.getByRole("heading", { level: 1, name: heading }).waitFor();
}

/** axe + screenshot once the page has settled (no "Loading" status left). */
export async function check(page: Page, name: string): Promise<void> {
  await page.getByText(/^Loading /).waitFor({ state: "detached", timeout: 20_000 });
  expect(await seriousViolations(page), `axe on ${name}`).to.deep.equal([]);
  await screenshot(page, name);
}

/**
 * The usage-keys page's whole "new key" flow for a key that may only execute in `group`: fills the
 * form, creates it, reads the value shown once, confirms it was saved, and waits for the list's scope
 * summary. `onForm` and `onList` run the caller's own checks (axe, screenshot) on the filled form and
 * on the list afterwards. Returns the key.
 */
export async function createExecuteOnlyUsageKey(
  page: Page,
  group: string,
  hooks: { onForm?: () => Promise<void>; onList?: () => Promise<void> } = {},
): Promise<string> {
  await page.getByRole("button", { name: "New usage key" }).click();
  await page.getByLabel("Key name").fill("server");
  await page
    .getByRole("group", { name: "Execute in" })
    .getByRole("checkbox", { name: new RegExp(group) })
    .check();
  await hooks.onForm?.();
  await page.getByRole("button", { name: "Create key" }).click();
  const value = page.getByTestId("shown-once-value");
  await value.waitFor();
  const key = (await value.textContent())!;
  expect(key).to.match(/^uk_[0-9a-f]{64}$/);
  await page.getByLabel("I have saved it").check();
  await page.getByRole("button", { name: "Continue" }).click();
  await page
    .getByTestId("scope-summary")
    .filter({ hasText: `execute: ${group}` })
    .waitFor();
  await hooks.onList?.();
  return key;
}

/** Signs a tab in with a key through the sign-in page. */
export async function signIn(w: WatchedPage, key: string): Promise<void> {
  await w.page.goto("/");
  await w.page.getByLabel("Key", { exact: true }).fill(key);
  await w.page.getByRole("button", { name: "Sign in" }).click();
  await w.page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
}

/**
 * Registers the guards every step runs under, for the tabs `tabs()` returns at that moment: a failed
 * step leaves a picture of each tab in the temp folder; a console error or an uncaught exception in
 * any tab fails the step (`allowed` lists console lines a suite expects, e.g. an offline script).
 */
export function guardSteps(
  tabs: () => Record<string, WatchedPage | undefined>,
  allowed: RegExp[] = [],
): void {
  afterEach(async function () {
    if (this.currentTest?.state !== "failed") return;
    const name = this.currentTest.title.replace(/[^a-z0-9]+/gi, "-").slice(0, 60);
    for (const [tab, w] of Object.entries(tabs()))
      await w?.page
        .screenshot({ path: path.join(os.tmpdir(), `sigil-dashboard-${name}-${tab}.png`), timeout: 10_000 })
        .catch(() => undefined);
  });
  afterEach(function () {
    const problems: string[] = [];
    for (const w of Object.values(tabs())) {
      if (!w) continue;
      problems.push(...w.problems.filter((p) => !allowed.some((a) => a.test(p))));
      w.problems.length = 0;
    }
    expect(problems).to.deep.equal([]);
  });
}
