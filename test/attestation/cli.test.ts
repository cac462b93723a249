/**
 * `sigil attestation verify` (cli/commands/attestation.ts), run as a user runs it (bin/sigil.js): against a
 * live service, and on saved documents the dstack stand-in quoted. A refusal exits 4 and names the check.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Enclave } from "../../enclave";
import { startDstackStandIn } from "../helpers/dstackGuestAgent";
import { startStack, type Stack } from "../helpers/stack";

const ROOT = path.resolve(__dirname, "..", "..");
const BIN = path.join(ROOT, "bin", "sigil.js");
const FIXTURES = path.resolve(ROOT, "..", "shared", "fixtures", "tdx");

/** Runs the CLI in a child process without blocking this one (the test's service answers from here). */
function sigil(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: ROOT, env: { ...process.env, SIGIL_URL: "", SIGIL_API_KEY: "" }, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== "number") reject(err);
        else resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}

describe("attestation: sigil attestation verify", function () {
  this.timeout(120_000);
  let dir: string;
  let tdxDoc: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-attest-cli-"));
    const agent = await startDstackStandIn();
    try {
      const enclave = await Enclave.open({ provider: "dstack", dstack: { endpoint: agent.endpoint } });
      const id = enclave.attestationIdentity();
      const doc = await enclave.attest({
        format: "sigil-attestation/v1",
        measurement: "0x" + "ab".repeat(32),
        identity: { address: id.address, public_key: id.publicKey },
        chain_id: 31337,
        registry_address: "0x" + "11".repeat(20),
        forwarder_address: "0x" + "22".repeat(20),
        service_version: "0.0.0",
        timestamp: 1_700_000_000,
        nonce: "saved-1",
      });
      tdxDoc = path.join(dir, "tdx.json");
      fs.writeFileSync(tdxDoc, JSON.stringify(doc));
    } finally {
      await agent.close();
    }
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  describe("against a live service (file provider)", function () {
    let s: Stack;
    before(async () => {
      s = await startStack();
    });
    after(async () => {
      await s?.close();
    });

    it("accepts it with the pinned identity, exit 0, and says it is not hardware-backed", async () => {
      const r = await sigil([
        "--url",
        s.url,
        "attestation",
        "verify",
        "--expect-identity",
        s.enclave.attestationIdentity().address,
      ]);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.match(/tee\s+none/);
      expect(r.stdout).to.include('tee is "none"');
    });

    it("refuses it when a TEE is required: exit 4, tee_required", async () => {
      const r = await sigil(["--url", s.url, "attestation", "verify", "--require-tee"]);
      expect(r.code).to.equal(4);
      expect(r.stderr).to.match(/^attestation refused: tee_required: /);
    });
  });

  it("refuses a saved document that does not echo the nonce: exit 4, nonce_mismatch", async () => {
    const r = await sigil(["attestation", "verify", "--document", tdxDoc, "--nonce", "other"]);
    expect(r.code).to.equal(4);
    expect(r.stderr).to.match(/^attestation refused: nonce_mismatch: /);
  });

  it("refuses a tdx document when no collateral or PCCS is named: exit 4, collateral_unavailable", async () => {
    const r = await sigil(["--json", "attestation", "verify", "--document", tdxDoc, "--nonce", "saved-1"]);
    expect(r.code).to.equal(4);
    expect(JSON.parse(r.stdout)).to.include({ verified: false, reason: "collateral_unavailable" });
  });

  it("refuses the stand-in's unsigned quote against Intel's collateral: exit 4, quote_invalid", async function () {
    const collateral = path.join(FIXTURES, "tdx_quote_collateral.json");
    if (!fs.existsSync(collateral)) {
      console.log(
        `    (skipped: no Intel collateral at ${FIXTURES}; the fixtures are kept outside the repository)`,
      );
      this.skip();
    }
    const r = await sigil([
      "attestation",
      "verify",
      "--document",
      tdxDoc,
      "--nonce",
      "saved-1",
      "--collateral",
      collateral,
      "--at",
      "2025-06-19T11:16:03Z",
    ]);
    expect(r.code).to.equal(4);
    expect(r.stderr).to.match(/^attestation refused: quote_invalid: /);
  });
});
