import { expect } from "chai";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ConfigError, DEV_SIGNUP_CREDIT_CENTS, loadConfig } from "../../scripts/start/config";

function problemsOf(env: NodeJS.ProcessEnv, cwd: string): string[] {
  try {
    loadConfig(env, cwd);
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  throw new Error("expected a ConfigError");
}

describe("start: configuration", () => {
  let cwd: string;
  beforeEach(() => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-config-"));
  });
  afterEach(() => fs.rmSync(cwd, { recursive: true, force: true }));

  it("defaults to the embedded dev chain, port 8000, ./.sigil and the dev sign-up credit", () => {
    const c = loadConfig({}, cwd);
    expect(c.dataDir).to.equal(path.join(cwd, ".sigil"));
    expect(c.port).to.equal(8000);
    expect(c.host).to.equal("127.0.0.1");
    expect(c.rpcUrl).to.equal(undefined);
    expect(c.chainId).to.equal(31337);
    expect(c.devMode).to.equal(true);
    expect(c.signupCreditCents).to.equal(DEV_SIGNUP_CREDIT_CENTS);
    expect(c.stripe).to.equal(undefined);
    expect(c.logFile).to.equal(path.join(cwd, ".sigil", "sigil.log"));
  });

  it("reads the hooks' own port and its public URL (none by default: the hooks on the API's port)", () => {
    const d = loadConfig({}, cwd);
    expect([d.hooksPort, d.hooksPublicUrl]).to.deep.equal([null, null]);
    const c = loadConfig({ SIGIL_HOOKS_PORT: "8001", SIGIL_HOOKS_PUBLIC_URL: "https://hooks.example" }, cwd);
    expect([c.hooksPort, c.hooksPublicUrl]).to.deep.equal([8001, "https://hooks.example"]);
    const problems = problemsOf({ SIGIL_HOOKS_PORT: "x", SIGIL_HOOKS_PUBLIC_URL: "hooks.example/path" }, cwd);
    expect(problems.join("\n")).to.contain("SIGIL_HOOKS_PORT").and.contain("SIGIL_HOOKS_PUBLIC_URL");
  });

  it("reads SIGIL_CHAINS (none by default) and names what is wrong in it", () => {
    expect(loadConfig({}, cwd).chains).to.deep.equal([]);
    const c = loadConfig(
      {
        SIGIL_CHAINS:
          '[{"chain_id": 8453, "name": "base", "rpc_url": "https://rpc.example", "confirmations": 3}]',
      },
      cwd,
    );
    expect(c.chains).to.deep.equal([
      { chainId: 8453, name: "base", rpcUrl: "https://rpc.example", confirmations: 3 },
    ]);
    expect(problemsOf({ SIGIL_CHAINS: '[{"chain_id": 0}]' }, cwd).join("\n")).to.contain(
      "SIGIL_CHAINS[0].chain_id",
    );
    expect(problemsOf({ SIGIL_CHAINS: "nope" }, cwd).join("\n")).to.contain("SIGIL_CHAINS is not JSON");
  });

  it("reads the actions' fetch policy and rejection mode (fetch on, public addresses only, strict by default)", () => {
    expect(loadConfig({}, cwd)).to.include({
      fetchEnabled: true,
      fetchAllowAddresses: undefined,
      unhandledRejections: undefined,
    });
    const c = loadConfig(
      {
        SIGIL_FETCH: "false",
        SIGIL_FETCH_ALLOW_ADDRESSES: "10.0.0.0/8,::1",
        SIGIL_UNHANDLED_REJECTIONS: "lenient",
      },
      cwd,
    );
    expect([c.fetchEnabled, c.fetchAllowAddresses, c.unhandledRejections]).to.deep.equal([
      false,
      ["10.0.0.0/8", "::1"],
      "lenient",
    ]);
  });

  it("refuses a fetch address that is not an IP or CIDR range, and an unknown rejection mode", () => {
    expect(
      problemsOf(
        { SIGIL_FETCH_ALLOW_ADDRESSES: "internal.example", SIGIL_UNHANDLED_REJECTIONS: "loose" },
        cwd,
      ),
    ).to.deep.equal([
      'SIGIL_FETCH_ALLOW_ADDRESSES: "internal.example" is not an IP address or CIDR range (e.g. 10.0.0.0/8, ::1).',
      'SIGIL_UNHANDLED_REJECTIONS must be "strict" or "lenient", not "loose".',
    ]);
  });

  it("reads the scheduling between accounts (a reserve worker, no per-account isolation, by default)", () => {
    expect(loadConfig({}, cwd)).to.include({ executorReserveWorkers: undefined, isolateAccounts: undefined });
    expect(
      loadConfig({ SIGIL_EXECUTOR_RESERVE_WORKERS: "0", SIGIL_ISOLATE_ACCOUNTS: "true" }, cwd),
    ).to.include({ executorReserveWorkers: 0, isolateAccounts: true });
  });

  it("reads the embedded chain's state-dump interval (2 s by default) and refuses one outside 1..86400", () => {
    expect(loadConfig({}, cwd).chainStateIntervalSeconds).to.equal(2);
    expect(loadConfig({ SIGIL_CHAIN_STATE_INTERVAL_SECONDS: "30" }, cwd).chainStateIntervalSeconds).to.equal(
      30,
    );
    expect(problemsOf({ SIGIL_CHAIN_STATE_INTERVAL_SECONDS: "0" }, cwd)).to.have.length(1);
  });

  it("refuses a reserve outside 0..64 and an isolation setting that is not a boolean", () => {
    expect(
      problemsOf({ SIGIL_EXECUTOR_RESERVE_WORKERS: "65", SIGIL_ISOLATE_ACCOUNTS: "maybe" }, cwd),
    ).to.have.length(2);
  });

  it("reads the module settings (imports on, the reference's CDN, by default)", () => {
    expect(loadConfig({}, cwd)).to.include({ modulesEnabled: true, moduleOrigin: undefined });
    const c = loadConfig({ SIGIL_MODULES: "false", SIGIL_MODULE_ORIGIN: "https://mirror.example/npm/" }, cwd);
    expect([c.modulesEnabled, c.moduleOrigin]).to.deep.equal([false, "https://mirror.example/npm/"]);
  });

  it("refuses a module origin that is not an http(s) URL", () => {
    expect(problemsOf({ SIGIL_MODULE_ORIGIN: "ftp://mirror.example/" }, cwd)).to.deep.equal([
      'SIGIL_MODULE_ORIGIN: "ftp://mirror.example/" is not an http(s) URL without credentials, query or fragment (e.g. https://cdn.jsdelivr.net/npm/).',
    ]);
  });

  it("turns dev mode off for an external chain, and then refuses to start without a root key, saying how to provide one", () => {
    const problems = problemsOf({ SIGIL_RPC_URL: "http://127.0.0.1:9999" }, cwd);
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(
      /^No root key: outside dev mode Sigil never generates one\. Provide it in SIGIL_ROOT_KEY/,
    );
    expect(problems[0]).to.contain("root.key");
    expect(problems[0]).to.contain("SIGIL_DEV_MODE=true");
  });

  it("accepts an external chain with a root key, with no sign-up credit by default", () => {
    const c = loadConfig({ SIGIL_RPC_URL: "http://127.0.0.1:9999", SIGIL_ROOT_KEY: "ab".repeat(32) }, cwd);
    expect(c.devMode).to.equal(false);
    expect(c.rootKeyHex).to.equal("0x" + "ab".repeat(32));
    expect(c.signupCreditCents).to.equal(0);
    expect(c.chainId).to.equal(undefined);
  });

  it("reports every invalid value at once without echoing secrets", () => {
    const secret = "zz" + "12".repeat(31);
    const problems = problemsOf(
      {
        PORT: "80x",
        SIGIL_ANVIL_PORT: "70000",
        SIGIL_DEV_MODE: "maybe",
        SIGIL_ROOT_KEY: secret,
        SIGIL_LOG_LEVEL: "loud",
      },
      cwd,
    );
    expect(problems.map((p) => p.split(" ")[0])).to.deep.equal([
      'PORT="80x"',
      'SIGIL_ANVIL_PORT="70000"',
      'SIGIL_DEV_MODE="maybe"',
      "SIGIL_ROOT_KEY",
      "SIGIL_LOG_LEVEL",
    ]);
    expect(problems.join("\n")).not.to.contain(secret);
  });

  it("reads SIGIL_CHAINS (none by default) into the chain list", () => {
    expect(loadConfig({}, cwd).chains).to.deep.equal([]);
    const c = loadConfig(
      {
        SIGIL_CHAINS: JSON.stringify([
          { chain_id: 84532, name: "base-sepolia", rpc_url: "https://sepolia.base.org", confirmations: 3 },
          { chain_id: 31337, name: "embedded", rpc_url: "http://127.0.0.1:8545" },
        ]),
      },
      cwd,
    );
    expect(c.chains).to.deep.equal([
      { chainId: 84532, name: "base-sepolia", rpcUrl: "https://sepolia.base.org", confirmations: 3 },
      { chainId: 31337, name: "embedded", rpcUrl: "http://127.0.0.1:8545", confirmations: 0 },
    ]);
    expect(c.sources.SIGIL_CHAINS).to.equal("env");
  });

  it("refuses a SIGIL_CHAINS that is not JSON, has a bad entry, or names a chain twice, saying how to fix it", () => {
    const one = (v: string) => problemsOf({ SIGIL_CHAINS: v }, cwd);
    const notJson = one("base-sepolia");
    expect(notJson).to.have.length(1);
    expect(notJson[0]).to.match(/^SIGIL_CHAINS is not JSON.*e\.g\. \[\{"chain_id":84532/);
    expect(one(`{"chain_id":1}`)[0]).to.match(/^SIGIL_CHAINS must be a JSON array\./);
    expect(one(`[{"chain_id":0,"name":"x","rpc_url":"https://a.example"}]`)[0]).to.match(
      /^SIGIL_CHAINS\[0\]\.chain_id must be a positive integer\./,
    );
    expect(one(`[{"chain_id":1,"name":"Main Net","rpc_url":"https://a.example"}]`)[0]).to.match(
      /^SIGIL_CHAINS\[0\]\.name must be/,
    );
    expect(one(`[{"chain_id":1,"name":"main","rpc_url":"ftp://a.example"}]`)[0]).to.match(
      /^SIGIL_CHAINS\[0\]\.rpc_url must be an http\(s\) or ws\(s\) URL\./,
    );
    expect(
      one(`[{"chain_id":1,"name":"main","rpc_url":"https://a.example","confirmations":-1}]`)[0],
    ).to.match(/^SIGIL_CHAINS\[0\]\.confirmations must be a non-negative integer\./);
    const twice = one(
      `[{"chain_id":5,"name":"a","rpc_url":"https://a.example"},{"chain_id":5,"name":"b","rpc_url":"https://b.example"}]`,
    );
    expect(twice).to.deep.equal([
      "SIGIL_CHAINS names chain 5 twice: a chain has one RPC URL and one confirmation depth; keep one entry.",
    ]);
  });

  it("rejects a non-http RPC URL", () => {
    expect(
      problemsOf({ SIGIL_RPC_URL: "localhost:8545", SIGIL_ROOT_KEY: "ab".repeat(32) }, cwd),
    ).to.deep.equal(['SIGIL_RPC_URL="localhost:8545" is not an http(s) or ws(s) URL.']);
  });

  it("requires the three deployment variables together", () => {
    const problems = problemsOf({ SIGIL_REGISTRY_ADDRESS: "0x" + "11".repeat(20) }, cwd);
    expect(problems).to.deep.equal([
      "SIGIL_FORWARDER_ADDRESS must be a 0x-prefixed 20-byte address when SIGIL_REGISTRY_ADDRESS is set.",
      "SIGIL_DEPLOY_BLOCK is required with SIGIL_REGISTRY_ADDRESS (the block the registry was deployed in).",
    ]);
  });

  it("refuses half a Stripe configuration and picks Stripe when complete", () => {
    expect(problemsOf({ STRIPE_SECRET_KEY: "sk_test_x" }, cwd)[0]).to.match(/^Stripe is half configured/);
    const c = loadConfig(
      {
        STRIPE_SECRET_KEY: "sk_test_x",
        STRIPE_PUBLISHABLE_KEY: "pk_test_y",
        STRIPE_WEBHOOK_SECRET: "whsec_z",
      },
      cwd,
    );
    expect(c.stripe).to.deep.equal({
      secretKey: "sk_test_x",
      publishableKey: "pk_test_y",
      webhookSecret: "whsec_z",
      apiHost: undefined,
    });
  });

  it("reads sigil.config.json, with the environment taking precedence", () => {
    fs.writeFileSync(
      path.join(cwd, "sigil.config.json"),
      JSON.stringify({
        PORT: 9100,
        SIGIL_GAS_WALLETS: 2,
        SIGIL_IPFS_GATEWAYS: ["https://a.example", "https://b.example"],
      }),
    );
    const c = loadConfig({ PORT: "9200" }, cwd);
    expect(c.port).to.equal(9200);
    expect(c.gasWallets).to.equal(2);
    expect(c.ipfsGateways).to.deep.equal(["https://a.example", "https://b.example"]);
    expect(c.sources).to.include({ PORT: "env", SIGIL_GAS_WALLETS: "file" });
  });

  it("refuses secrets and unknown keys in the config file", () => {
    fs.writeFileSync(
      path.join(cwd, "sigil.config.json"),
      JSON.stringify({ SIGIL_ROOT_KEY: "ab".repeat(32), PROT: 1 }),
    );
    const problems = problemsOf({}, cwd);
    expect(problems).to.have.length(2);
    expect(problems[0]).to.contain('"SIGIL_ROOT_KEY" is a secret and is only read from the environment');
    expect(problems[1]).to.contain('unknown key "PROT"');
  });

  it("reports a config file that is not JSON", () => {
    fs.writeFileSync(path.join(cwd, "sigil.config.json"), "{ PORT: 1 ");
    expect(problemsOf({}, cwd)[0]).to.match(/sigil\.config\.json is not valid JSON/);
  });

  it("reports an explicit SIGIL_CONFIG that does not exist", () => {
    expect(problemsOf({ SIGIL_CONFIG: "nope.json" }, cwd)[0]).to.equal(
      `SIGIL_CONFIG points to ${path.join(cwd, "nope.json")}, which does not exist. Create it or unset SIGIL_CONFIG.`,
    );
  });

  it("reads SIGIL_OPERATOR_TOKEN from the environment (unset by default) and refuses it in the config file", () => {
    expect(loadConfig({}, cwd).operatorToken).to.equal(undefined);
    expect(loadConfig({ SIGIL_OPERATOR_TOKEN: "op-secret" }, cwd).operatorToken).to.equal("op-secret");
    fs.writeFileSync(
      path.join(cwd, "sigil.config.json"),
      JSON.stringify({ SIGIL_OPERATOR_TOKEN: "op-secret" }),
    );
    expect(problemsOf({}, cwd).join("\n")).to.contain('"SIGIL_OPERATOR_TOKEN" is a secret');
  });

  it("reads SIGIL_MAX_PRIORITY_FEE_GWEI as decimal gwei into wei (relayer default when unset)", () => {
    expect(loadConfig({}, cwd).maxPriorityFeePerGas).to.equal(undefined);
    expect(loadConfig({ SIGIL_MAX_PRIORITY_FEE_GWEI: "2" }, cwd).maxPriorityFeePerGas).to.equal(
      2_000_000_000n,
    );
    expect(loadConfig({ SIGIL_MAX_PRIORITY_FEE_GWEI: "0.05" }, cwd).maxPriorityFeePerGas).to.equal(
      50_000_000n,
    );
    expect(loadConfig({ SIGIL_MAX_PRIORITY_FEE_GWEI: "0" }, cwd).maxPriorityFeePerGas).to.equal(0n);
    expect(loadConfig({ SIGIL_MAX_PRIORITY_FEE_GWEI: "0.000000001" }, cwd).maxPriorityFeePerGas).to.equal(1n);
  });

  it("refuses a SIGIL_MAX_PRIORITY_FEE_GWEI that is not a plain gwei amount up to 100000", () => {
    for (const bad of ["-1", "abc", "1e9", "0.0000000001", "100001", "2 gwei"]) {
      const problems = problemsOf({ SIGIL_MAX_PRIORITY_FEE_GWEI: bad }, cwd);
      expect(problems, bad).to.have.length(1);
      expect(problems[0]).to.match(/^SIGIL_MAX_PRIORITY_FEE_GWEI=.* is not valid: the highest tip per gas/);
    }
  });
});
