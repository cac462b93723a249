/**
 * GET /core/v1/attestation on a real stack, checked with ethers directly and with the SDK's
 * verifyAttestation.
 */
import * as path from "node:path";
import { expect } from "chai";
import { ethers } from "ethers";
import { canonicalJson, measureEnclave } from "../../enclave";
import { AttestationError, createSigil, verifyAttestation, type AttestationDocument } from "../../sdk/index";
import { startStack, type Stack } from "../helpers/stack";

const REPO = path.resolve(__dirname, "..", "..");
const ATTESTATION = "/core/v1/attestation";

/** What ethers says signed the document (its fields but the signature, canonical JSON, EIP-191). */
function signerOf(doc: Record<string, unknown>): string {
  const { signature, ...fields } = doc;
  return ethers.verifyMessage(canonicalJson(fields), signature as string);
}

describe("attestation: GET /core/v1/attestation", function () {
  this.timeout(120_000);
  let s: Stack;

  before(async () => {
    s = await startStack();
  });
  after(async () => {
    await s?.close();
  });

  const attest = async (query = "") => {
    const r = await s.api("GET", ATTESTATION + query);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body as AttestationDocument;
  };

  it("is public and describes this deployment: tee none, no quote, chain and contracts, version", async () => {
    const doc = await attest();
    expect(doc.format).to.equal("sigil-attestation/v1");
    expect(doc.tee).to.equal("none");
    expect(doc.quote).to.equal(null);
    expect(doc.chain_id).to.equal(31337);
    expect(ethers.getAddress(doc.registry_address)).to.equal(ethers.getAddress(s.deployment.registry));
    expect(ethers.getAddress(doc.forwarder_address)).to.equal(ethers.getAddress(s.deployment.forwarder));
    expect(doc.service_version).to.equal(require("../../package.json").version);
    expect(Math.abs(doc.timestamp - Date.now() / 1000)).to.be.below(60);
    expect(doc.nonce).to.equal(null);
  });

  it("names the root key's public identity, not any key the service signs other things with", async () => {
    const doc = await attest();
    const identity = s.enclave.attestationIdentity();
    expect(doc.identity).to.deep.equal({ address: identity.address, public_key: identity.publicKey });
    expect(ethers.computeAddress(doc.identity.public_key)).to.equal(doc.identity.address);
    expect(doc.identity.address).to.not.equal(s.enclave.gasAddress(0));
  });

  it("carries the measurement of enclave/ as built in this checkout", async () => {
    const doc = await attest();
    expect(doc.measurement).to.equal(measureEnclave(REPO).measurement);
  });

  it("the signature verifies with ethers alone: the identity signed the canonical JSON of the other fields", async () => {
    const doc = await attest("?nonce=abc");
    expect(signerOf(doc)).to.equal(doc.identity.address);
  });

  it("tampering with any field breaks the signature", async () => {
    const doc = (await attest("?nonce=n1")) as unknown as Record<string, unknown>;
    const changed: Record<string, unknown> = {
      format: "sigil-attestation/v2",
      tee: "tdx",
      measurement: "0x" + "00".repeat(32),
      identity: { ...(doc.identity as object), public_key: "0x04" + "11".repeat(64) },
      chain_id: 1,
      registry_address: ethers.ZeroAddress,
      forwarder_address: ethers.ZeroAddress,
      service_version: "9.9.9",
      timestamp: (doc.timestamp as number) + 1,
      nonce: "n2",
      quote: "0x00",
    };
    expect(Object.keys(changed).sort()).to.deep.equal(
      Object.keys(doc)
        .filter((k) => k !== "signature")
        .sort(),
    );
    for (const [field, value] of Object.entries(changed)) {
      const tampered = { ...doc, [field]: value };
      expect(signerOf(tampered), field).to.not.equal(
        doc.identity && (doc.identity as { address: string }).address,
      );
      expect(() => verifyAttestation(tampered as unknown as AttestationDocument), field)
        .to.throw(AttestationError)
        .with.property("reason", field === "format" ? "malformed" : "bad_signature");
    }
  });

  it("echoes the nonce", async () => {
    const doc = await attest("?nonce=client-42.x:y");
    expect(doc.nonce).to.equal("client-42.x:y");
  });

  it("refuses a malformed nonce: 400 invalid_request naming the field", async () => {
    for (const q of ["?nonce=", "?nonce=" + "a".repeat(129), "?nonce=a%20b"]) {
      const r = await s.api("GET", ATTESTATION + q);
      expect(r.status, q).to.equal(400);
      expect(r.body.error.code, q).to.equal("invalid_request");
      expect(r.body.error.details, q).to.deep.equal({ field: "nonce" });
    }
  });

  it("identity and measurement are the same after a restart", async () => {
    const before = await attest();
    await s.restartRelayer();
    const after = await attest();
    expect(after.identity).to.deep.equal(before.identity);
    expect(after.measurement).to.equal(before.measurement);
  });

  describe("SDK: verifyAttestation", function () {
    const pins = () => ({
      expectedIdentity: s.enclave.attestationIdentity().address,
      expectedMeasurement: measureEnclave(REPO).measurement,
      expectedChainId: 31337,
      expectedRegistry: s.deployment.registry,
      expectedForwarder: s.deployment.forwarder,
    });

    it("accepts the document with every pin and the nonce, and says it is not hardware-backed", async () => {
      const sigil = createSigil({ baseUrl: s.url });
      const doc = await sigil.attestation("n-ok");
      const v = verifyAttestation(doc, { ...pins(), nonce: "n-ok" });
      expect(v.identity).to.equal(s.enclave.attestationIdentity().address);
      expect(v.tee).to.equal("none");
      expect(v.hardwareBacked).to.equal(false);
      expect(v.caveats[0]).to.include('tee is "none"');
    });

    const refusals: Array<[string, Record<string, unknown>, string]> = [
      [
        "another pinned identity",
        { expectedIdentity: ethers.Wallet.createRandom().address },
        "identity_mismatch",
      ],
      ["another measurement", { expectedMeasurement: "0x" + "ab".repeat(32) }, "measurement_mismatch"],
      ["another nonce", { nonce: "someone-else" }, "nonce_mismatch"],
      ["another chain", { expectedChainId: 1 }, "chain_mismatch"],
      ["another registry", { expectedRegistry: ethers.Wallet.createRandom().address }, "chain_mismatch"],
      ["another forwarder", { expectedForwarder: ethers.Wallet.createRandom().address }, "chain_mismatch"],
      ["a required TEE", { requireTee: true }, "tee_required"],
    ];
    for (const [label, opts, reason] of refusals) {
      it(`refuses ${label}: ${reason}`, async () => {
        const doc = await attest("?nonce=n-ok");
        expect(() => verifyAttestation(doc, { ...pins(), nonce: "n-ok", ...opts }))
          .to.throw(AttestationError)
          .with.property("reason", reason);
      });
    }

    it("refuses a document signed by another key that names itself as the identity", async () => {
      const doc = await attest();
      const forger = ethers.Wallet.createRandom();
      const { signature: _s, ...fields } = {
        ...doc,
        identity: { address: forger.address, public_key: forger.signingKey.publicKey },
      };
      const forged = { ...fields, signature: await forger.signMessage(canonicalJson(fields)) };
      // Self-consistent, so only the pin catches it.
      expect(verifyAttestation(forged as AttestationDocument).identity).to.equal(forger.address);
      expect(() => verifyAttestation(forged as AttestationDocument, pins()))
        .to.throw(AttestationError)
        .with.property("reason", "identity_mismatch");
    });
  });
});
