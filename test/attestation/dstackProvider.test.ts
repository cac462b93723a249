/**
 * The `dstack` root-key provider (enclave/rootKeyProviders/dstack.ts) through the real @phala/dstack-sdk
 * against the stand-in of dstack's guest agent (test/helpers/dstackGuestAgent.ts): TDX hardware does not
 * exist on these machines. Then a whole `npm start` service (startSigil, as scripts/start.ts runs it) with
 * SIGIL_ROOT_KEY_PROVIDER=dstack: the attestation says tdx, the keys survive a restart, and nothing
 * key-shaped reaches the data folder or the logs.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { DSTACK_ROOT_KEY_PATH, DSTACK_ROOT_KEY_PURPOSE, Enclave, isEnclaveError } from "../../enclave";
import { loadConfig } from "../../scripts/start/config";
import { startSigil, type RunningSigil } from "../../scripts/start/service";
import { checkTdxBinding, parseTdReport, verifyAttestation, type AttestationDocument } from "../../sdk/index";
import { standInKey, startDstackStandIn, type DstackStandIn } from "../helpers/dstackGuestAgent";

const OTHER_APP_ID = "a1".repeat(20);

const open = (endpoint: string) => Enclave.open({ provider: "dstack", dstack: { endpoint } });
const identityFor = (appId: string) =>
  Enclave.fromRootKey(standInKey(appId, DSTACK_ROOT_KEY_PATH, DSTACK_ROOT_KEY_PURPOSE)).attestationIdentity();

describe("attestation: the dstack root-key provider", function () {
  this.timeout(30_000);
  const agents: DstackStandIn[] = [];
  const agent = async (opts: Parameters<typeof startDstackStandIn>[0] = {}) => {
    const a = await startDstackStandIn(opts);
    agents.push(a);
    return a;
  };
  afterEach(async () => {
    await Promise.all(agents.splice(0).map((a) => a.close()));
  });

  it("takes the root key the KMS gives the app for the fixed, versioned path", async () => {
    const a = await agent();
    const enclave = await open(a.endpoint);
    expect(enclave.attestationIdentity()).to.deep.equal(identityFor(a.appId));
    expect(a.requests.filter((r) => r.path === "/GetKey").map((r) => r.body)).to.deep.equal([
      { path: "sigil/root-key/v1", purpose: "sigil-root-key", algorithm: "secp256k1" },
    ]);
  });

  it("gives the same keys after a restart of the guest agent and of the enclave", async () => {
    const first = await open((await agent()).endpoint);
    await Promise.all(agents.splice(0).map((a) => a.close()));
    const second = await open((await agent()).endpoint);
    expect(second.attestationIdentity()).to.deep.equal(first.attestationIdentity());
    expect(second.gasAddress(0)).to.equal(first.gasAddress(0));
    expect(second.pkpAddress("0x" + "01".repeat(32))).to.equal(first.pkpAddress("0x" + "01".repeat(32)));
  });

  it("gives another app identity other keys", async () => {
    const mine = await open((await agent()).endpoint);
    const other = await open((await agent({ appId: OTHER_APP_ID })).endpoint);
    expect(other.attestationIdentity().address).to.not.equal(mine.attestationIdentity().address);
    expect(other.pkpAddress("0x" + "01".repeat(32))).to.not.equal(mine.pkpAddress("0x" + "01".repeat(32)));
  });

  it("reports the TEE: tdx, the compose hash and the app id", async () => {
    const a = await agent();
    expect((await open(a.endpoint)).teeInfo()).to.deep.equal({
      tee: "tdx",
      composeHash: "0x" + a.composeHash,
      appId: "0x" + a.appId,
    });
  });

  it("finds the guest agent at DSTACK_SIMULATOR_ENDPOINT, the SDK's documented simulator variable", async () => {
    const a = await agent();
    const saved = process.env.DSTACK_SIMULATOR_ENDPOINT;
    const warn = console.warn;
    process.env.DSTACK_SIMULATOR_ENDPOINT = a.endpoint;
    console.warn = () => {}; // the SDK announces the simulator endpoint; not this test's subject
    try {
      const enclave = await Enclave.open({ provider: "dstack" });
      expect(enclave.attestationIdentity()).to.deep.equal(identityFor(a.appId));
    } finally {
      console.warn = warn;
      if (saved === undefined) delete process.env.DSTACK_SIMULATOR_ENDPOINT;
      else process.env.DSTACK_SIMULATOR_ENDPOINT = saved;
    }
  });

  it("an unreachable guest agent is root_key_unavailable, naming the endpoint", async () => {
    const a = await agent();
    await a.close();
    try {
      await open(a.endpoint);
      expect.fail("opened without a guest agent");
    } catch (e) {
      expect(isEnclaveError(e) && e.code).to.equal("root_key_unavailable");
      expect((e as Error).message).to.include(a.endpoint);
    }
  });

  it("a quote the guest agent cannot give is tee_quote_failed, never a document without one", async () => {
    const a = await agent();
    const enclave = await open(a.endpoint);
    await a.close();
    try {
      await enclave.attest({ format: "sigil-attestation/v1", nonce: "n" });
      expect.fail("attested without a quote");
    } catch (e) {
      expect(isEnclaveError(e) && e.code).to.equal("tee_quote_failed");
    }
  });

  it("the file provider is unchanged: the same root key gives the same identity, tee none", async () => {
    const hex = "0x" + "42".repeat(32);
    const enclave = await Enclave.open({ rootKeyHex: hex });
    expect(enclave.teeInfo()).to.deep.equal({ tee: "none" });
    expect(enclave.attestationIdentity()).to.deep.equal(Enclave.fromRootKey(hex).attestationIdentity());
  });
});

describe("attestation: npm start with SIGIL_ROOT_KEY_PROVIDER=dstack", function () {
  this.timeout(180_000);
  let dir: string;
  let agent: DstackStandIn;
  let running: RunningSigil | undefined;
  const output: string[] = [];

  const start = async () => {
    const config = loadConfig(
      {
        SIGIL_DATA_DIR: path.join(dir, "data"),
        PORT: "0",
        SIGIL_ANVIL_PORT: "0",
        SIGIL_ROOT_KEY_PROVIDER: "dstack",
        SIGIL_DSTACK_ENDPOINT: agent.endpoint,
        SIGIL_LOG_LEVEL: "debug",
      },
      dir,
    );
    running = await startSigil(config, { warn: (m) => output.push(m), step: (m) => output.push(m) });
    return running;
  };
  const stop = async () => {
    await running?.close();
    running = undefined;
  };
  const attestation = async (nonce: string) => {
    const r = await fetch(`${running!.url}/core/v1/attestation?nonce=${nonce}`);
    expect(r.status).to.equal(200);
    return (await r.json()) as AttestationDocument;
  };

  let first: AttestationDocument;
  let second: AttestationDocument;
  let withoutAgent: { status: number; body: { error: { code: string } } };

  // One run of the service, stopped and started again, as an operator would: the tests look at its answers
  // and at what it left behind.
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-dstack-"));
    agent = await startDstackStandIn();
    await start();
    first = await attestation("before-restart");
    await stop();
    await start();
    second = await attestation("after-restart");
    await agent.close(); // the guest agent gone while the service runs: no quote can be had
    const r = await fetch(`${running!.url}/core/v1/attestation?nonce=no-agent`);
    withoutAgent = { status: r.status, body: (await r.json()) as typeof withoutAgent.body };
    await stop();
  });
  after(async () => {
    await stop();
    await agent?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("serves tdx attestations bound to their nonce and the stand-in's compose hash", () => {
    for (const [doc, nonce] of [
      [first, "before-restart"],
      [second, "after-restart"],
    ] as const) {
      expect(doc.tee).to.equal("tdx");
      verifyAttestation(doc, { nonce, expectedIdentity: identityFor(agent.appId).address });
      const report = parseTdReport(Uint8Array.from(Buffer.from(doc.quote!.slice(2), "hex")));
      checkTdxBinding(doc, report, { expectedComposeHash: "0x" + agent.composeHash });
    }
  });

  it("answers 503 attestation_unavailable, never an unquoted document, while the TEE cannot quote", () => {
    expect(withoutAgent.status).to.equal(503);
    expect(withoutAgent.body.error.code).to.equal("attestation_unavailable");
  });

  it("has the same identity after a restart: the KMS's key for this app", () => {
    expect(second.identity).to.deep.equal(first.identity);
    expect(second.identity.address).to.equal(identityFor(agent.appId).address);
  });

  it("wrote no root.key and nothing key-shaped to the data folder or the logs", async () => {
    const key = standInKey(agent.appId, DSTACK_ROOT_KEY_PATH, DSTACK_ROOT_KEY_PURPOSE);
    expect(fs.existsSync(path.join(dir, "data", "root.key"))).to.equal(false);
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true }))
        if (e.isDirectory()) walk(path.join(d, e.name));
        else if (e.isFile()) files.push(path.join(d, e.name));
    };
    walk(dir);
    expect(files.some((f) => f.endsWith("sigil.log"))).to.equal(true);
    const needles = [
      key,
      Buffer.from(key.toString("hex")),
      Buffer.from(key.toString("hex").toUpperCase()),
      Buffer.from(key.toString("base64")),
    ];
    for (const f of files) {
      const bytes = fs.readFileSync(f);
      for (const n of needles)
        expect(bytes.includes(n), `${path.relative(dir, f)} holds the root key`).to.equal(false);
    }
    const said = output.join("\n");
    expect(said).to.not.include(key.toString("hex"));
    expect(said).to.not.include(key.toString("base64"));
  });
});
