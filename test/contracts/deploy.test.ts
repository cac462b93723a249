/**
 * scripts/deploy.ts against a real anvil over JSON-RPC (not only Hardhat's in-process chain), both as the
 * `deploySigil` function other modules import and as the `hardhat run` script.
 */
import { expect } from "chai";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { JsonRpcProvider, Wallet } from "ethers";
import hre from "hardhat";
import { deploySigil } from "../../scripts/deploy";
import { AccountRegistry__factory, SigilForwarder__factory } from "../../typechain-types";

const ROOT = path.join(__dirname, "..", "..");
/** anvil's first well-known development account (public test key, holds test ether only). */
const ANVIL_KEY_0 = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/**
 * Under `hardhat coverage` the artifacts are instrumented and exceed the 24 KiB code-size limit, which a real
 * chain enforces; only then is anvil told to lift the limit. Normal runs prove the contracts fit.
 */
const UNDER_COVERAGE =
  (hre as unknown as { __SOLIDITY_COVERAGE_RUNNING?: boolean }).__SOLIDITY_COVERAGE_RUNNING === true;

/** Starts anvil on a free port; resolves with its URL once it listens. */
function startAnvil(): Promise<{ process: ChildProcess; url: string }> {
  const args = ["--port", "0", ...(UNDER_COVERAGE ? ["--disable-code-size-limit"] : [])];
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(ROOT, "node_modules", ".bin", "anvil"), args, {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const timer = setTimeout(() => reject(new Error(`anvil did not start: ${output}`)), 20_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Listening on ([\d.]+:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ process: child, url: `http://${match[1]}` });
      }
    });
    child.on("error", reject);
  });
}

describe("scripts/deploy.ts on anvil", function () {
  this.timeout(120_000);
  let anvil: { process: ChildProcess; url: string };
  let provider: JsonRpcProvider;

  before(async function () {
    anvil = await startAnvil();
    provider = new JsonRpcProvider(anvil.url, undefined, { cacheTimeout: -1 });
  });

  after(function () {
    provider?.destroy();
    anvil?.process.kill();
  });

  it("deploySigil deploys a registry that trusts exactly the deployed forwarder", async function () {
    const deployer = new Wallet(ANVIL_KEY_0, provider);
    const deployment = await deploySigil(deployer);
    const registry = AccountRegistry__factory.connect(deployment.registry, provider);
    expect(await registry.forwarder()).to.equal(deployment.forwarder);
    const domain = await SigilForwarder__factory.connect(deployment.forwarder, provider).eip712Domain();
    expect(domain.name).to.equal("SigilForwarder");
    expect(deployment.chainId).to.equal(Number((await provider.getNetwork()).chainId));
    expect(deployment.deployBlock).to.be.at.most(await provider.getBlockNumber());
  });

  it("the deployed registry accepts writes over JSON-RPC", async function () {
    const deployer = new Wallet(ANVIL_KEY_0, provider);
    const { registry: address } = await deploySigil(deployer);
    const registry = AccountRegistry__factory.connect(address, deployer);
    await (await registry.createAccount("on anvil", Wallet.createRandom().address)).wait();
    expect(await registry.accountOfOwner(deployer.address)).to.equal(1n);
  });

  it("as a script, writes {chainId, registry, forwarder, deployBlock} for the network", async function () {
    // The script's own Hardhat process signs the deployment locally, which enforces EIP-3860's 48 KiB
    // initcode limit whatever anvil allows; the instrumented registry's initcode exceeds it.
    if (UNDER_COVERAGE) this.skip();
    const outDir = mkdtempSync(path.join(tmpdir(), "sigil-deploy-"));
    try {
      await promisify(execFile)(
        "npx",
        ["hardhat", "run", "--no-compile", "scripts/deploy.ts", "--network", "custom"],
        {
          cwd: ROOT,
          env: {
            ...process.env,
            SIGIL_RPC_URL: anvil.url,
            SIGIL_DEPLOYER_KEY: ANVIL_KEY_0,
            SIGIL_DEPLOYMENTS_DIR: outDir,
          },
        },
      );
      const written = JSON.parse(readFileSync(path.join(outDir, "custom.json"), "utf8"));
      expect(Object.keys(written)).to.deep.equal(["chainId", "registry", "forwarder", "deployBlock"]);
      const registry = AccountRegistry__factory.connect(written.registry, provider);
      expect(await registry.forwarder()).to.equal(written.forwarder);
    } finally {
      rmSync(outDir, { recursive: true, force: true });
    }
  });
});
