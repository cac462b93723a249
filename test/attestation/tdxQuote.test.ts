/**
 * The SDK's TDX quote verification (sdk/tdx.ts) against a real, published TDX quote and Intel's collateral
 * for it. They are third-party data and are not in this repository: the tests read them from the folder
 * shared/fixtures/tdx/ beside the checkout (its README names the source and the checked recipe) and are
 * skipped, saying so, when that folder is absent.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { Quote, verify as dcapVerify } from "@phala/dcap-qvl";
import {
  AttestationError,
  checkTdxBinding,
  parseTdReport,
  verifyTdxQuote,
  type AttestationDocument,
  type TdxCollateral,
} from "../../sdk/index";

const FIXTURES = path.resolve(__dirname, "..", "..", "..", "shared", "fixtures", "tdx");
/** One hour into the collateral's validity (its TCB info: 2025-06-19T10:16:03Z to 2025-07-19T10:16:03Z). */
const INSIDE_VALIDITY = Date.parse("2025-06-19T11:16:03Z") / 1000;

async function refusal(p: Promise<unknown>): Promise<AttestationError> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(AttestationError);
    return e as AttestationError;
  }
  throw new Error("expected a refusal");
}

function refusalOf(f: () => unknown): AttestationError {
  try {
    f();
  } catch (e) {
    expect(e).to.be.instanceOf(AttestationError);
    return e as AttestationError;
  }
  throw new Error("expected a refusal");
}

describe("attestation: TDX quote verification against a published quote and Intel's collateral", function () {
  let quote: Uint8Array;
  let collateral: TdxCollateral;

  before(function () {
    if (!fs.existsSync(path.join(FIXTURES, "tdx_quote"))) {
      console.log(
        `    (skipped: the TDX fixtures are not at ${FIXTURES}; they are kept outside the repository)`,
      );
      this.skip();
    }
    quote = Uint8Array.from(fs.readFileSync(path.join(FIXTURES, "tdx_quote")));
    collateral = JSON.parse(fs.readFileSync(path.join(FIXTURES, "tdx_quote_collateral.json"), "utf8"));
  });

  const flipped = (byte: number) => {
    const q = Uint8Array.from(quote);
    q[byte] ^= 0x01;
    return q;
  };

  it("accepts the quote at a time inside the collateral's validity: TCB status UpToDate", async () => {
    const v = await verifyTdxQuote(quote, { collateral, now: INSIDE_VALIDITY });
    expect(v.tcbStatus).to.equal("UpToDate");
    expect(v.advisoryIds).to.deep.equal([]);
  });

  it("reads the TD report at the offsets dcap-qvl's own parser finds", () => {
    const mine = parseTdReport(quote);
    const td = Quote.parse(quote).report.asTd10()!;
    const hex = (b: Uint8Array) => "0x" + Buffer.from(b).toString("hex");
    expect(mine).to.deep.equal({
      mrTd: hex(td.mrTd),
      rtmr0: hex(td.rtMr0),
      rtmr1: hex(td.rtMr1),
      rtmr2: hex(td.rtMr2),
      rtmr3: hex(td.rtMr3),
      reportData: hex(td.reportData),
    });
    expect(dcapVerify(quote, collateral, INSIDE_VALIDITY).status).to.equal("UpToDate");
  });

  it("refuses the quote with one bit flipped: quote_invalid", async () => {
    const e = await refusal(verifyTdxQuote(flipped(100), { collateral, now: INSIDE_VALIDITY }));
    expect(e.reason).to.equal("quote_invalid");
    expect(e.message).to.include("signature is invalid");
  });

  it("refuses the collateral today, after its validity: collateral_expired", async () => {
    const e = await refusal(verifyTdxQuote(quote, { collateral }));
    expect(e.reason).to.equal("collateral_expired");
    expect(e.message).to.include("TCBInfo expired");
  });

  it("refuses a TCB status the caller does not accept: tcb_not_accepted", async () => {
    const e = await refusal(
      verifyTdxQuote(quote, { collateral, now: INSIDE_VALIDITY, acceptedTcbStatuses: ["OutOfDate"] }),
    );
    expect(e.reason).to.equal("tcb_not_accepted");
  });

  it("fetches nothing unless told where: no collateral and no PCCS is collateral_unavailable", async () => {
    const e = await refusal(verifyTdxQuote(quote, { now: INSIDE_VALIDITY }));
    expect(e.reason).to.equal("collateral_unavailable");
  });

  describe("the verified report against what the caller expects", function () {
    let report: ReturnType<typeof parseTdReport>;
    before(async () => {
      report = (await verifyTdxQuote(quote, { collateral, now: INSIDE_VALIDITY })).report;
    });
    // Not a Sigil document: its report data is whatever the quote's author put there, so any document
    // is "the wrong report data" for it.
    const doc = { format: "sigil-attestation/v1", nonce: "n" } as unknown as AttestationDocument;

    it("refuses a document whose binding is not the quote's report data: report_data_mismatch", () => {
      expect(refusalOf(() => checkTdxBinding(doc, report)).reason).to.equal("report_data_mismatch");
    });

    it("refuses another MRTD than expected: tdx_measurement_mismatch", () => {
      const wrong = "0x" + "00".repeat(48);
      expect(refusalOf(() => checkTdxBinding(doc, report, { expectedMrTd: wrong })).reason).to.equal(
        "tdx_measurement_mismatch",
      );
    });

    it("passes the measurement check with the quote's own MRTD (and stops at the report data)", () => {
      const e = refusalOf(() => checkTdxBinding(doc, report, { expectedMrTd: report.mrTd }));
      expect(e.reason).to.equal("report_data_mismatch");
    });
  });
});
