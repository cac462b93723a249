/**
 * A real Chromium for the dashboard tests: the one shipped inside the @sparticuz/chromium npm package
 * (unpacked to /tmp/chromium on first use), driven by playwright-core. Nothing to install besides
 * `npm install`, and it works offline.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { AxeBuilder } from "@axe-core/playwright";
import type { Browser, BrowserContext, Page } from "playwright-core";

/**
 * Where the pictures go: docs/dashboard/ only when asked (SIGIL_UPDATE_SCREENSHOTS=1), since every run
 * shows new keys and addresses and `npm test` must leave the tree clean; a temp folder otherwise.
 */
export const SCREENSHOTS =
  process.env.SIGIL_UPDATE_SCREENSHOTS === "1"
    ? path.resolve(__dirname, "../../docs/dashboard")
    : path.join(os.tmpdir(), "sigil-dashboard-screenshots");

export async function launchBrowser(): Promise<Browser> {
  const chromium = require("@sparticuz/chromium").default;
  const { chromium: pw } = require("playwright-core") as typeof import("playwright-core");
  return pw.launch({ executablePath: await chromium.executablePath(), args: chromium.args, headless: true });
}

/**
 * The browser's own report of an API answer with an error status ("Failed to load resource: the server
 * responded with a status of 401"). The page shows those errors to the user on purpose; anything else
 * on the console, and any uncaught exception, is a bug.
 */
const API_STATUS_REPORT = /^Failed to load resource: the server responded with a status of 4\d\d/;

export interface WatchedPage {
  page: Page;
  context: BrowserContext;
  /** Console errors and uncaught exceptions so far, API status reports excepted. */
  problems: string[];
  /** Every API request the page sent, as "METHOD /path". */
  requests: string[];
}

export async function openPage(browser: Browser, baseURL: string): Promise<WatchedPage> {
  const context = await browser.newContext({ baseURL, viewport: { width: 1366, height: 900 } });
  const page = await context.newPage();
  // Every wait is bounded, so a stuck page fails its step with a locator in the message, not mocha's timeout.
  page.setDefaultTimeout(30_000);
  const watched: WatchedPage = { page, context, problems: [], requests: [] };
  page.on("console", (m) => {
    if (m.type() === "error" && !API_STATUS_REPORT.test(m.text()))
      watched.problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => watched.problems.push(`uncaught: ${e.message}`));
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith("/core/v1/")) watched.requests.push(`${r.method()} ${u.pathname}`);
  });
  return watched;
}

/** axe-core's serious and critical violations on the page as it is now, as readable lines. */
export async function seriousViolations(page: Page): Promise<string[]> {
  const result = await new AxeBuilder({ page }).analyze();
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}

export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
