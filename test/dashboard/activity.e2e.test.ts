/**
 * The Activity page (the account's audit log) in a real Chromium on the real stack: the setup's writes
 * listed newest first, then an execution and a write appear after they happen; filters narrow the list
 * (and a backwards range is refused inline, nothing sent); "Older entries" follows the cursor; the
 * detail view shows every field of an entry, its request id among them; the download is a JSON Lines
 * export that the SDK's verifier accepts against the attestation's identity, the page verifies it too,
 * and an edited copy is refused with the sequence it breaks at; a usage key is told whose log it is.
 */
import * as fs from "node:fs";
import { AxeBuilder } from "@axe-core/playwright";
import { expect } from "chai";
import type { Browser, Page } from "playwright-core";
import { verifyAttestation, verifyAuditExport } from "../../sdk/index";
import { setupAccount, type Stack } from "../helpers/stack";
import { openPage, type WatchedPage } from "./browser";
import { check, guardSteps, signIn, startDashboardRig, visit, type DashboardRig } from "./support";

const SIGN = `async function main(p) {
  return { sig: await Actions.signMessage({ pkpId: p.pkp, message: "activity" }) };
}`;

interface Row {
  seq: number;
  kind: string;
}

/** The table's rows as the page shows them now. */
async function rows(page: Page): Promise<Row[]> {
  return page.locator("[data-testid=activity-table] tbody tr").evaluateAll((trs) =>
    trs.map((tr) => ({
      seq: Number(tr.getAttribute("data-seq")),
      kind: tr.getAttribute("data-kind") ?? "",
    })),
  );
}

/** Waits (bounded) until the rows satisfy `ok`, and returns them. */
async function rowsWhen(page: Page, ok: (r: Row[]) => boolean): Promise<Row[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await rows(page);
    if (ok(r)) return r;
    if (Date.now() > deadline) throw new Error(`rows never matched: ${JSON.stringify(r)}`);
    await page.waitForTimeout(100);
  }
}

describe("dashboard: the Activity page (audit log), in Chromium", function () {
  this.timeout(240_000);
  let rig: DashboardRig;
  let stack: Stack;
  let browser: Browser;
  let owner: WatchedPage;
  let runner: WatchedPage | undefined;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let usage: { id: string; value: string };
  let identity: string;
  let requestId: string;
  let downloaded: string;

  before(async () => {
    rig = await startDashboardRig();
    ({ stack, browser } = rig);
    a = await setupAccount(stack, SIGN);
    const u = await stack.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "runner", execute_in_groups: [a.groupId] },
    });
    expect(u.status, JSON.stringify(u.body)).to.equal(201);
    usage = { id: u.body.id, value: u.body.usage_api_key };
    identity = verifyAttestation((await stack.api("GET", "/core/v1/attestation")).body).identity;
    owner = await openPage(browser, stack.url);
    await signIn(owner, a.accountKey);
  });

  after(async () => {
    await rig?.close();
  });

  guardSteps(() => ({ owner, runner }));

  it("lists the setup's writes newest first; an execution and a write appear after they happen", async () => {
    const { page } = owner;
    await visit(owner, "activity", "Activity");
    const before = await rowsWhen(page, (r) => r.length >= 3);
    // create_pkp, create_group, add_usage_api_key: path-A writes, newest first.
    expect(before.map((r) => r.kind)).to.deep.equal(["write", "write", "write"]);
    expect(before.map((r) => r.seq)).to.deep.equal([...before.map((r) => r.seq)].sort((x, y) => y - x));

    const run = await stack.api("POST", "/core/v1/svc_action", {
      key: usage.value,
      body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId } },
    });
    expect(run.status, JSON.stringify(run.body)).to.equal(200);
    requestId = run.headers.get("x-request-id")!;
    expect(requestId).to.be.a("string");
    const pkp = await stack.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "p2" } });
    expect(pkp.status, JSON.stringify(pkp.body)).to.equal(201);

    // Not there until asked: the page reads the log when opened or filtered.
    await page.getByRole("button", { name: "Apply filters" }).click();
    const after = await rowsWhen(page, (r) => r.length === before.length + 2);
    expect(after.slice(0, 2).map((r) => r.kind)).to.deep.equal(["write", "execution"]);
    expect(after[0].seq).to.equal(before[0].seq + 2);
    await check(page, "activity");
    // Like the walk-through's pages: no axe violation of any impact, not only serious ones.
    const all = (await new AxeBuilder({ page }).analyze()).violations.map((v) => `${v.id} (${v.impact})`);
    expect(all, "axe, any impact").to.deep.equal([]);
  });

  it("a filter narrows them; a backwards time range is refused inline and nothing is sent", async () => {
    const { page } = owner;
    await page.getByLabel("Type").selectOption("execution");
    await page.getByRole("button", { name: "Apply filters" }).click();
    const executions = await rowsWhen(page, (r) => r.length > 0 && r.every((x) => x.kind === "execution"));
    expect(executions).to.have.length(1);

    await page.getByLabel("Type").selectOption("");
    await page.getByLabel("PKP id").fill(a.pkpId);
    await page.getByRole("button", { name: "Apply filters" }).click();
    // The setup's PKP: its creation, the group that holds it and the run that used it; not p2.
    const byPkp = await rowsWhen(page, (r) => r.length > 0 && r.length < 5);
    expect(byPkp.map((r) => r.kind)).to.include("execution");

    await page.getByLabel("From", { exact: true }).fill("2030-01-02T00:00");
    await page.getByLabel("To", { exact: true }).fill("2030-01-01T00:00");
    owner.requests.length = 0;
    await page.getByText("The end of the range must come after its start.").waitFor();
    expect(await page.getByRole("button", { name: "Apply filters" }).isDisabled()).to.equal(true);
    expect(owner.requests).to.deep.equal([]);

    await page.getByLabel("To", { exact: true }).fill("2030-01-03T00:00");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await page.getByText("No entry matches these filters.").waitFor();
    expect(owner.requests).to.deep.equal(["GET /core/v1/audit"]);

    await page.getByRole("button", { name: "Clear" }).click();
    await rowsWhen(page, (r) => r.length >= 5);
  });

  it("the detail view shows every field of an entry's data, the request id among them", async () => {
    const { page } = owner;
    await page.getByLabel("Type").selectOption("execution");
    await page.getByRole("button", { name: "Apply filters" }).click();
    const [run] = await rowsWhen(page, (r) => r.length === 1 && r[0].kind === "execution");
    await page.getByRole("button", { name: `Details of entry ${run.seq}` }).click();
    const detail = page.getByTestId("audit-entry-detail");
    await detail.getByRole("heading", { name: `Entry ${run.seq}` }).waitFor();
    expect(await detail.locator("[data-field=request_id] dd").textContent()).to.equal(requestId);
    expect(await detail.locator("[data-field=cid] dd").textContent()).to.equal(a.cid);
    expect(await detail.locator("[data-field=has_error] dd").textContent()).to.equal("false");
    expect(await detail.locator("[data-field=pkps_used] dd").textContent()).to.contain(a.pkpId.toLowerCase());
    expect(await detail.locator("[data-field=Hash] dd").textContent()).to.match(/^0x[0-9a-f]{64}/);
    // Every field the service chained is shown: the API's data, key for key.
    const api = await stack.api("GET", `/core/v1/audit?type=execution`, { key: a.accountKey });
    const fields = await detail
      .getByTestId("audit-entry-data")
      .locator("[data-field]")
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-field")));
    expect(fields).to.deep.equal(Object.keys(api.body.items[0].data));
    await check(page, "activity-detail");
    // At phone width the table becomes cards and long hashes wrap: nothing wider than the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const overflow = (await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth",
      )) as number;
      // The widest offenders, named in the failure.
      const wide = (await page.evaluate(`[...document.querySelectorAll("#main *")]
        .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
        .slice(0, 5)
        .map((e) => e.tagName.toLowerCase() + "." + e.className + " " + Math.round(e.getBoundingClientRect().right))`)) as string[];
      expect(overflow, `horizontal overflow at 390 px: ${wide.join(", ")}`).to.be.at.most(0);
      await check(page, "activity-detail-390");
    } finally {
      await page.setViewportSize({ width: 1366, height: 900 });
    }
    await page.getByRole("button", { name: "Close" }).click();
    await page.getByRole("button", { name: "Clear" }).click();
  });

  it("'Older entries' follows the cursor to the first entry, without a repeat", async () => {
    const { page } = owner;
    // 50 refusals of the usage key (a write it may not make): past the page's 50 rows.
    for (let i = 0; i < 50; i++) {
      const r = await stack.api("POST", "/core/v1/groups", { key: usage.value, body: { name: `no${i}` } });
      expect(r.status).to.equal(403);
    }
    await page.getByRole("button", { name: "Apply filters" }).click();
    const first = await rowsWhen(page, (r) => r.length === 50);
    expect(first.at(-1)!.seq).to.be.greaterThan(1);
    await page.getByRole("button", { name: "Older entries" }).click();
    const all = await rowsWhen(page, (r) => r.length > 50);
    expect(all.map((r) => r.seq)).to.deep.equal(
      Array.from({ length: all[0].seq }, (_, i) => all[0].seq - i),
      "every entry once, newest first, down to 1",
    );
    await page.getByText("The oldest entry is shown.").waitFor();
    expect(await page.getByRole("button", { name: "Older entries" }).count()).to.equal(0);
  });

  it("downloads a JSON Lines export that verifies with the SDK; the page verifies it; an edited copy names the entry", async () => {
    const { page } = owner;
    // The identity is filled in from the service's attestation, checked in the page.
    const field = page.getByLabel("Identity address");
    for (const deadline = Date.now() + 20_000; (await field.inputValue()) === "" && Date.now() < deadline;)
      await page.waitForTimeout(100);
    expect(await page.getByLabel("Identity address").inputValue()).to.equal(identity);
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download export" }).click(),
    ]);
    expect(download.suggestedFilename()).to.match(/^sigil-audit-.*\.jsonl$/);
    downloaded = fs.readFileSync((await download.path())!, "utf8");
    const lines = downloaded
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; seq?: number; data?: Record<string, unknown> });
    expect(lines[0].type).to.equal("header");
    expect(lines.filter((l) => l.type === "entry").map((l) => l.data?.request_id)).to.include(requestId);
    const v = verifyAuditExport(downloaded, { identity });
    expect(v.ok, JSON.stringify(v.break)).to.equal(true);
    expect(v.firstSeq).to.equal(1);
    expect(v.signedThrough).to.equal(v.lastSeq);

    await page.getByTestId("audit-downloaded").waitFor();
    await page.getByRole("button", { name: "Verify the downloaded export" }).click();
    const ok = page.getByTestId("audit-verified");
    await ok.waitFor();
    expect(await ok.textContent()).to.contain(`entries 1 to ${v.lastSeq}`);

    // The same file with one entry's data edited: the page names the entry.
    const edited = lines.map((l) =>
      l.type === "entry" && l.seq === 2 ? { ...l, data: { ...l.data, operation: "edited" } } : l,
    );
    await page.getByLabel("Or verify a file").setInputFiles({
      name: "edited.jsonl",
      mimeType: "application/x-ndjson",
      buffer: Buffer.from(edited.map((l) => JSON.stringify(l)).join("\n") + "\n"),
    });
    const broken = page.getByTestId("audit-broken");
    await broken.waitFor();
    expect(await broken.getByTestId("audit-break-seq").textContent()).to.equal("2");
    expect(await broken.textContent()).to.contain("hash_mismatch");
    await check(page, "activity-verify-broken");

    // Nothing of the log is kept in the browser's storage: the export lived in the page's memory only.
    const stored = (await page.evaluate(
      "JSON.stringify([Object.values(sessionStorage), Object.values(localStorage)])",
    )) as string;
    expect(stored).not.to.contain(requestId);
  });

  it("a time range export (the browser's local time, sent as UTC) verifies too, widened to its checkpoints", async () => {
    const { page } = owner;
    // The last ten minutes, as a datetime-local value in the browser's own time zone.
    const local = (await page.evaluate(
      `(() => { const d = new Date(Date.now() - 10 * 60_000 - new Date().getTimezoneOffset() * 60_000);
        return d.toISOString().slice(0, 16); })()`,
    )) as string;
    await page.getByLabel("Export from", { exact: true }).fill(local);
    const [request, download] = await Promise.all([
      page.waitForRequest((r) => new URL(r.url()).pathname === "/core/v1/audit/export"),
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download export" }).click(),
    ]);
    // Sent as UTC, ten minutes ago to the minute whatever the browser's time zone.
    const from = new URL(request.url()).searchParams.get("from")!;
    expect(from).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z$/);
    expect(Math.abs(Date.parse(from) - (Date.now() - 10 * 60_000))).to.be.below(2 * 60_000);
    const text = fs.readFileSync((await download.path())!, "utf8");
    const v = verifyAuditExport(text, { identity });
    expect(v.ok, JSON.stringify(v.break)).to.equal(true);
    // Up to the head, like the whole log's export (nothing was chained since).
    expect(v.lastSeq).to.equal(verifyAuditExport(downloaded, { identity }).lastSeq);
    await page.getByRole("button", { name: "Verify the downloaded export" }).click();
    await page.getByTestId("audit-verified").waitFor();
    await page.getByLabel("Export from", { exact: true }).fill("");
  });

  it("a usage key is told the log is the account's (owner_only), not shown a blank page", async () => {
    runner = await openPage(browser, stack.url);
    await signIn(runner, usage.value);
    await visit(runner, "activity", "Activity");
    const { page } = runner;
    await page.getByRole("alert").filter({ hasText: "owner_only" }).first().waitFor();
    expect(await page.getByTestId("audit-error-explained").first().textContent()).to.contain("account key");
    expect(await page.getByTestId("activity-table").count()).to.equal(0);
    // Nothing offered that cannot work for this key: no filters, no export.
    expect(await page.getByRole("button", { name: "Download export" }).count()).to.equal(0);
    expect(await page.getByRole("button", { name: "Apply filters" }).count()).to.equal(0);
    await check(page, "activity-usage-key");
  });
});
