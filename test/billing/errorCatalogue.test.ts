import { expect } from "chai";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BILLING_ERROR_CATALOGUE } from "../../relayer/billing/errorCatalogue";
import { ERROR_CATALOGUE } from "../../relayer/errorCatalogue";
import { ApiError, catalogueEntry, type ErrorCode } from "../../relayer/errors";

const ROOT = join(__dirname, "..", "..");

/**
 * Every `new ApiError("code"` under relayer/billing. The status is no longer written at the throw site (the
 * constructor takes it from the catalogue), so "thrown with the catalogue's status" holds by construction;
 * this still proves billing's throws are found and catalogued.
 */
function thrownCodes(): string[] {
  const dir = join(ROOT, "relayer", "billing");
  const out: string[] = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".ts"))) {
    for (const m of readFileSync(join(dir, f), "utf8").matchAll(/ApiError\(\s*"([a-z_]+)"/g)) out.push(m[1]);
  }
  return out;
}

/** The billing section of the error catalogue: the "## Billing" section at the end of docs/errors.md. */
function billingDocs(): string {
  const text = readFileSync(join(ROOT, "docs", "errors.md"), "utf8");
  const at = text.indexOf("\n## Billing");
  expect(at, "docs/errors.md has no '## Billing' section").to.be.greaterThan(-1);
  return text.slice(at);
}

describe("billing: error catalogue", function () {
  it("every code billing throws is catalogued with the status it is thrown with", function () {
    const codes = thrownCodes();
    expect(codes.length).to.be.greaterThan(15);
    for (const code of codes) {
      const entry = catalogueEntry(code);
      expect(entry, `${code} is not in any catalogue`).to.not.equal(undefined);
      expect(new ApiError(code as ErrorCode, "m").status, code).to.equal(entry!.status);
    }
  });

  it("billing's own codes do not redefine the relayer's", function () {
    for (const code of Object.keys(BILLING_ERROR_CATALOGUE))
      expect(ERROR_CATALOGUE, code).to.not.have.property(code);
  });

  it("every billing code is documented with its status in the billing section of the error docs", function () {
    const docs = billingDocs();
    for (const [code, e] of Object.entries(BILLING_ERROR_CATALOGUE)) {
      expect(docs, code).to.match(new RegExp("\\|\\s*`" + code + "`\\s*\\|\\s*" + e.status + "\\s*\\|"));
    }
  });
});
