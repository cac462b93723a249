/**
 * The binding between Sigil's attestation documents and their TD quote (enclave/attestation.ts,
 * sdk/tdx.ts), on documents the dstack stand-in quotes (test/helpers/dstackGuestAgent.ts). Its quotes have
 * a TD quote's layout but no Intel signature, so these tests check what does not need one (the report
 * data, the nonce, the event log and the compose hash); tdxQuote.test.ts checks Intel's signature on a
 * real quote.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { ethers } from "ethers";
import { attestationReportData, canonicalJson, Enclave } from "../../enclave";
import {
  AttestationError,
  checkTdxBinding,
  parseTdReport,
  tdxReportData,
  verifyAttestation,
  verifyTdxAttestation,
  type AttestationDocument,
} from "../../sdk/index";
import { startDstackStandIn, type DstackStandIn } from "../helpers/dstackGuestAgent";

const FIXTURES = path.resolve(__dirname, "..", "..", "..", "shared", "fixtures", "tdx");

type Doc = AttestationDocument & { event_log: string; compose_hash: string; app_id: string };

const FIELDS = {
  format: "sigil-attestation/v1",
  measurement: "0x" + "ab".repeat(32),
  identity: { address: ethers.ZeroAddress, public_key: "0x04" + "00".repeat(64) },
  chain_id: 31337,
  registry_address: "0x" + "11".repeat(20),
  forwarder_address: "0x" + "22".repeat(20),
  service_version: "0.0.0",
  timestamp: 1_700_000_000,
};

function refusalOf(f: () => unknown): AttestationError {
  try {
    f();
  } catch (e) {
    expect(e).to.be.instanceOf(AttestationError);
    return e as AttestationError;
  }
  throw new Error("expected a refusal");
}

async function refusal(p: Promise<unknown>): Promise<AttestationError> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(AttestationError);
    return e as AttestationError;
  }
  throw new Error("expected a refusal");
}

describe("attestation: documents bound to a TD quote (dstack stand-in)", function () {
  this.timeout(30_000);
  let agent: DstackStandIn;
  let enclave: Enclave;

  before(async () => {
    agent = await startDstackStandIn();
    enclave = await Enclave.open({ provider: "dstack", dstack: { endpoint: agent.endpoint } });
  });
  after(async () => {
    await agent?.close();
  });

  const attest = async (nonce: string | null = "n-1") => {
    const identity = enclave.attestationIdentity();
    return (await enclave.attest({
      ...FIELDS,
      identity: { address: identity.address, public_key: identity.publicKey },
      nonce,
    })) as unknown as Doc;
  };
  const reportOf = (doc: Doc) => parseTdReport(Uint8Array.from(Buffer.from(doc.quote!.slice(2), "hex")));
  // A document with some fields changed after it was served (its signature no longer matters here).
  const changed = (doc: Doc, change: Partial<Doc>): Doc => ({ ...doc, ...change });

  it("is a tdx document with the quote, the event log, the compose hash and the app id", async () => {
    const doc = await attest();
    expect(doc.tee).to.equal("tdx");
    expect(doc.quote).to.match(/^0x([0-9a-f]{2})+$/);
    expect(JSON.parse(doc.event_log)).to.be.an("array");
    expect(doc.compose_hash).to.equal("0x" + agent.composeHash);
    expect(doc.app_id).to.equal("0x" + agent.appId);
  });

  it("the quote's report data is SHA-512 of the canonical JSON of every field but quote, event_log and signature", async () => {
    const doc = await attest();
    const { quote: _q, event_log: _e, signature: _s, ...bound } = doc;
    const expected = ethers.sha512(ethers.toUtf8Bytes(canonicalJson(bound)));
    expect(reportOf(doc).reportData).to.equal(expected);
  });

  it("the SDK computes the same report data as the enclave", async () => {
    const doc = await attest();
    expect(tdxReportData(doc as unknown as Record<string, unknown>)).to.equal(
      ethers.hexlify(attestationReportData(doc as unknown as Record<string, unknown>)),
    );
  });

  it("the identity signature covers the quote and the event log too", async () => {
    const doc = await attest();
    const { signature, ...fields } = doc;
    expect(ethers.verifyMessage(canonicalJson(fields), signature)).to.equal(doc.identity.address);
    expect(() => verifyAttestation({ ...doc, event_log: "[]" } as AttestationDocument))
      .to.throw(AttestationError)
      .with.property("reason", "bad_signature");
  });

  it("the binding holds for the document as served, with the expected compose hash", async () => {
    const doc = await attest();
    checkTdxBinding(doc, reportOf(doc), { expectedComposeHash: "0x" + agent.composeHash });
  });

  it("each nonce gets its own quote", async () => {
    const a = await attest("n-a");
    const b = await attest("n-b");
    expect(reportOf(a).reportData).to.not.equal(reportOf(b).reportData);
  });

  it("refuses a quote made for another nonce: report_data_mismatch", async () => {
    const doc = await attest("mine");
    const other = await attest("someone-else");
    const replayed = changed(doc, { quote: other.quote, event_log: other.event_log });
    expect(refusalOf(() => checkTdxBinding(replayed, reportOf(replayed))).reason).to.equal(
      "report_data_mismatch",
    );
  });

  for (const [field, value] of [
    ["measurement", "0x" + "cd".repeat(32)],
    ["registry_address", "0x" + "33".repeat(20)],
    ["chain_id", 1],
    ["compose_hash", "0x" + "44".repeat(32)],
    ["nonce", "n-2"],
  ] as const) {
    it(`refuses the quote for a document whose ${field} was changed: report_data_mismatch`, async () => {
      const doc = changed(await attest(), { [field]: value } as Partial<Doc>);
      expect(refusalOf(() => checkTdxBinding(doc, reportOf(doc))).reason).to.equal("report_data_mismatch");
    });
  }

  it("refuses an event log whose digests do not replay to RTMR3: event_log_mismatch", async () => {
    const doc = await attest();
    const events = JSON.parse(doc.event_log) as Array<{ digest: string }>;
    events[0].digest = "77".repeat(48);
    const tampered = changed(doc, { event_log: JSON.stringify(events) });
    const e = refusalOf(() => checkTdxBinding(tampered, reportOf(tampered)));
    expect(e.reason).to.equal("event_log_mismatch");
    expect(e.message).to.include("RTMR3");
  });

  it("refuses a compose-hash event whose payload is not what its digest measured: event_log_mismatch", async () => {
    const doc = await attest();
    const events = JSON.parse(doc.event_log) as Array<{ event: string; event_payload: string }>;
    events.find((e) => e.event === "compose-hash")!.event_payload = "55".repeat(32);
    const tampered = changed(doc, { event_log: JSON.stringify(events) });
    expect(refusalOf(() => checkTdxBinding(tampered, reportOf(tampered))).reason).to.equal(
      "event_log_mismatch",
    );
  });

  it("refuses another compose hash than the one expected: compose_hash_mismatch", async () => {
    const doc = await attest();
    const e = refusalOf(() =>
      checkTdxBinding(doc, reportOf(doc), { expectedComposeHash: "0x" + "66".repeat(32) }),
    );
    expect(e.reason).to.equal("compose_hash_mismatch");
  });

  it("accepts the expected app id, measured in the event log", async () => {
    const doc = await attest();
    checkTdxBinding(doc, reportOf(doc), { expectedAppId: "0x" + agent.appId });
  });

  it("refuses another app id than the one expected: app_id_mismatch", async () => {
    const doc = await attest();
    const e = refusalOf(() => checkTdxBinding(doc, reportOf(doc), { expectedAppId: "0x" + "99".repeat(20) }));
    expect(e.reason).to.equal("app_id_mismatch");
  });

  it("verifyAttestation still checks the nonce of a tdx document: nonce_mismatch", async () => {
    const doc = await attest("n-ok");
    expect(() => verifyAttestation(doc, { nonce: "n-other" }))
      .to.throw(AttestationError)
      .with.property("reason", "nonce_mismatch");
  });

  it("verifyTdxAttestation refuses a stand-in quote without collateral: collateral_unavailable", async () => {
    const e = await refusal(verifyTdxAttestation(await attest("n-ok"), { nonce: "n-ok" }));
    expect(e.reason).to.equal("collateral_unavailable");
  });

  it("verifyTdxAttestation refuses a stand-in quote against Intel's collateral: quote_invalid (no signature)", async function () {
    if (!fs.existsSync(path.join(FIXTURES, "tdx_quote_collateral.json"))) {
      console.log(
        `    (skipped: no Intel collateral at ${FIXTURES}; the fixtures are kept outside the repository)`,
      );
      this.skip();
    }
    const collateral = JSON.parse(fs.readFileSync(path.join(FIXTURES, "tdx_quote_collateral.json"), "utf8"));
    const now = Date.parse("2025-06-19T11:16:03Z") / 1000;
    const e = await refusal(verifyTdxAttestation(await attest("n-ok"), { nonce: "n-ok", collateral, now }));
    expect(e.reason).to.equal("quote_invalid");
  });

  it("verifyTdxAttestation refuses a document without a TEE: tee_required", async () => {
    const plain = Enclave.fromRootKey("0x" + "07".repeat(32));
    const id = plain.attestationIdentity();
    const doc = (await plain.attest({
      ...FIELDS,
      identity: { address: id.address, public_key: id.publicKey },
      nonce: null,
    })) as unknown as AttestationDocument;
    expect(doc.tee).to.equal("none");
    expect(doc.quote).to.equal(null);
    const e = await refusal(verifyTdxAttestation(doc));
    expect(e.reason).to.equal("tee_required");
  });
});
