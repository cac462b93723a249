/**
 * Errors that teach: every code documented in docs/errors.md has a fix and an anchor, and every error
 * answer carries the catalogue's `fix` and a `docs_url` that points at the code's anchor.
 */
import { expect } from "chai";
import * as fs from "node:fs";
import * as path from "node:path";
import { BILLING_ERROR_CATALOGUE } from "../../relayer/billing/errorCatalogue";
import { ERROR_CATALOGUE } from "../../relayer/errorCatalogue";
import { ApiError, type ErrorCode } from "../../relayer/errors";
import { setupAccount, startStack, type ApiResponse, type Stack } from "../helpers/stack";

const DOCS = fs.readFileSync(path.join(__dirname, "..", "..", "docs", "errors.md"), "utf8");
const ALL: Record<string, { status: number; fix: string }> = {
  ...ERROR_CATALOGUE,
  ...BILLING_ERROR_CATALOGUE,
};

/** The rows of docs/errors.md's tables: code, status, why, fix. */
function documentedRows(): { code: string; why: string; fix: string }[] {
  const rows: { code: string; why: string; fix: string }[] = [];
  for (const line of DOCS.split("\n")) {
    if (!/^\| `[a-z_]+` +\| \d+ +\|/.test(line)) continue;
    // Cells split on unescaped pipes ("{succeed\|fail}" stays one cell).
    const cells = line
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((c) => c.trim());
    rows.push({ code: cells[0].slice(1, -1), why: cells[2], fix: cells[3] });
  }
  return rows;
}

function expectTeaching(r: ApiResponse, code: string): void {
  expect(r.body.error.code, JSON.stringify(r.body)).to.equal(code);
  expect(r.body.error.fix).to.equal(ALL[code].fix);
  expect(r.body.error.docs_url).to.equal(`docs/errors.md#${code}`);
  expect(DOCS).to.contain(`<a id="${code}"></a>`);
}

describe("relayer: errors that teach (fix and docs_url)", function () {
  this.timeout(120_000);

  describe("docs/errors.md", () => {
    it("documents every catalogued code", () => {
      const documented = new Set(documentedRows().map((r) => r.code));
      for (const code of Object.keys(ALL)) expect(documented.has(code), code).to.equal(true);
    });
    it("every documented code has a fix", () => {
      const rows = documentedRows();
      expect(rows.length).to.be.greaterThan(100);
      for (const r of rows) expect(r.fix, r.code).to.not.equal("");
    });
    it("every documented fix is the catalogue's", () => {
      for (const r of documentedRows()) expect(r.fix.replace(/\\\|/g, "|"), r.code).to.equal(ALL[r.code].fix);
    });
    it("every documented code has an anchor named after it", () => {
      for (const r of documentedRows()) expect(r.why, r.code).to.contain(`<a id="${r.code}"></a>`);
    });
  });

  describe("ApiError bodies", () => {
    it("every catalogued code renders with its fix and docs_url", () => {
      for (const [code, e] of Object.entries(ALL)) {
        const err = new ApiError(code as ErrorCode, "m");
        expect(err.status, code).to.equal(e.status);
        const body = err.toJSON();
        expect(body.fix, code).to.equal(e.fix);
        expect(body.docs_url, code).to.equal(`docs/errors.md#${code}`);
      }
    });
  });

  describe("answers over HTTP", () => {
    let s: Stack;
    let a: Awaited<ReturnType<typeof setupAccount>>;
    before(async () => {
      s = await startStack();
      a = await setupAccount(s);
    });
    after(async () => {
      await s?.close();
    });

    it("401 missing_api_key carries its fix", async () => {
      expectTeaching(await s.api("GET", "/core/v1/groups"), "missing_api_key");
    });
    it("400 invalid_json (body parser) carries its fix", async () => {
      expectTeaching(
        await s.api("POST", "/core/v1/groups", {
          key: a.accountKey,
          rawBody: "{not json",
          headers: { "content-type": "application/json" },
        }),
        "invalid_json",
      );
    });
    it("403 missing_scope carries its fix", async () => {
      const k = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "k", execute_in_groups: [a.groupId] },
      });
      expectTeaching(
        await s.api("POST", "/core/v1/pkps/create", { key: k.body.usage_api_key, body: {} }),
        "missing_scope",
      );
    });
    it("404 group_not_found carries its fix", async () => {
      expectTeaching(await s.api("GET", "/core/v1/groups/999", { key: a.accountKey }), "group_not_found");
    });
  });
});
