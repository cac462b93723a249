/**
 * SIGIL_ROOT_KEY_PROVIDER and SIGIL_DSTACK_ENDPOINT in npm start's configuration (scripts/start/config.ts)
 * and the banner: `file` stays the default and reads as before; `dstack` never takes a second key.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { banner } from "../../scripts/start/banner";
import { ConfigError, loadConfig } from "../../scripts/start/config";

const EXTERNAL = { SIGIL_RPC_URL: "http://127.0.0.1:9" }; // outside dev mode: a root key is required

function problemsOf(env: NodeJS.ProcessEnv, cwd: string): string[] {
  try {
    loadConfig(env, cwd);
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  throw new Error("expected a ConfigError");
}

const facts = {
  url: "http://127.0.0.1:8000",
  chainId: 31337,
  rpcUrl: "http://127.0.0.1:8545",
  embeddedChain: true,
  deployment: { registry: "0x" + "11".repeat(20), forwarder: "0x" + "22".repeat(20), deployBlock: 1 },
  freshDeployment: true,
  paymentProcessor: "simulated" as const,
};

describe("attestation: the root-key provider in the configuration", () => {
  let cwd: string;
  beforeEach(() => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-rootkey-config-"));
  });
  afterEach(() => fs.rmSync(cwd, { recursive: true, force: true }));

  it("defaults to the file provider with no dstack endpoint", () => {
    expect(loadConfig({}, cwd)).to.include({ rootKeyProvider: "file", dstackEndpoint: undefined });
  });

  it("takes dstack with its endpoint, and then needs no root key outside dev mode", () => {
    const c = loadConfig(
      { ...EXTERNAL, SIGIL_ROOT_KEY_PROVIDER: "dstack", SIGIL_DSTACK_ENDPOINT: "/var/run/dstack.sock" },
      cwd,
    );
    expect(c).to.include({
      rootKeyProvider: "dstack",
      dstackEndpoint: "/var/run/dstack.sock",
      devMode: false,
    });
  });

  it("still requires a root key for the file provider outside dev mode", () => {
    expect(problemsOf(EXTERNAL, cwd).join("\n")).to.include("No root key");
  });

  it("refuses an unknown provider, naming both choices", () => {
    expect(problemsOf({ SIGIL_ROOT_KEY_PROVIDER: "vault" }, cwd)).to.deep.equal([
      'SIGIL_ROOT_KEY_PROVIDER="vault" is not valid: use file (the default: SIGIL_ROOT_KEY or <data dir>/root.key) ' +
        "or dstack (dstack's KMS, inside a TDX CVM; docs/enclave.md).",
    ]);
  });

  it("refuses SIGIL_ROOT_KEY beside dstack: the KMS gives the key", () => {
    const problems = problemsOf({ SIGIL_ROOT_KEY_PROVIDER: "dstack", SIGIL_ROOT_KEY: "11".repeat(32) }, cwd);
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/^SIGIL_ROOT_KEY is set but SIGIL_ROOT_KEY_PROVIDER is dstack/);
    expect(problems[0]).to.not.include("11".repeat(32));
  });

  it("refuses SIGIL_DSTACK_ENDPOINT without the dstack provider", () => {
    expect(problemsOf({ SIGIL_DSTACK_ENDPOINT: "/var/run/dstack.sock" }, cwd)).to.deep.equal([
      "SIGIL_DSTACK_ENDPOINT is set but SIGIL_ROOT_KEY_PROVIDER is not dstack: set both, or neither.",
    ]);
  });

  it("refuses an endpoint that is neither a socket path nor an http(s) URL", () => {
    const problems = problemsOf(
      { SIGIL_ROOT_KEY_PROVIDER: "dstack", SIGIL_DSTACK_ENDPOINT: "dstack.sock" },
      cwd,
    );
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/^SIGIL_DSTACK_ENDPOINT="dstack.sock" is not valid/);
  });

  it("the banner names the dstack KMS as the root key's source", () => {
    const c = loadConfig({ SIGIL_ROOT_KEY_PROVIDER: "dstack" }, cwd);
    expect(banner(c, facts)).to.match(/^ {2}root key {5}dstack KMS/m);
  });

  it("the file provider's banner has no root-key line, as before", () => {
    expect(banner(loadConfig({}, cwd), facts)).to.not.match(/^ {2}root key/m);
  });
});
