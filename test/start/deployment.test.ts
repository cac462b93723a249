import { expect } from "chai";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ethers } from "ethers";
import { deploySigil } from "../../scripts/deploy";
import { startAnvil, type RunningAnvil } from "../../scripts/start/anvil";
import {
  DeploymentError,
  describeRpc,
  ensureDeployment,
  readDeployment,
  registryVersionAt,
  REGISTRY_VERSION,
} from "../../scripts/start/deployment";
import { DEV_ACCOUNT_KEY } from "../../scripts/start/funding";

describe("start: deployment memory", function () {
  this.timeout(60_000);
  let dir: string;
  let anvil: RunningAnvil | undefined;
  let provider: ethers.JsonRpcProvider | undefined;

  const boot = async (chainId = 31337) => {
    anvil = await startAnvil({
      statePath: path.join(dir, "chain-state.json"),
      pidPath: path.join(dir, "anvil.pid"),
      port: 0,
      chainId,
    });
    provider = new ethers.JsonRpcProvider(anvil.rpcUrl, undefined, { cacheTimeout: -1 });
    return provider;
  };
  const halt = async () => {
    provider?.destroy();
    provider = undefined;
    await anvil?.stop();
    anvil = undefined;
  };
  let deploys = 0;
  const deploy = (p: ethers.JsonRpcProvider) => async () => {
    deploys++;
    return deploySigil(new ethers.NonceManager(new ethers.Wallet(DEV_ACCOUNT_KEY, p)));
  };
  const file = () => path.join(dir, "deployment.json");

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-deploy-"));
    deploys = 0;
  });
  afterEach(async () => {
    await halt();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("deploys on first start and writes the addresses down", async () => {
    const p = await boot();
    const { deployment, fresh } = await ensureDeployment({
      provider: p,
      file: file(),
      chainLabel: "embedded",
      deploy: deploy(p),
    });
    expect(fresh).to.equal(true);
    expect(deploys).to.equal(1);
    expect(await p.getCode(deployment.registry)).not.to.equal("0x");
    const saved = readDeployment(file())!;
    expect(saved).to.include({
      registry: deployment.registry,
      forwarder: deployment.forwarder,
      chainId: 31337,
      chain: "embedded",
    });
    expect(saved.deployBlock).to.equal(deployment.deployBlock);
  });

  it("reuses the remembered deployment after a restart of the chain, without deploying again", async () => {
    const p = await boot();
    const first = await ensureDeployment({
      provider: p,
      file: file(),
      chainLabel: "embedded",
      deploy: deploy(p),
    });
    await halt();
    const q = await boot();
    const second = await ensureDeployment({
      provider: q,
      file: file(),
      chainLabel: "embedded",
      deploy: deploy(q),
    });
    expect(second.fresh).to.equal(false);
    expect(second.deployment).to.deep.equal(first.deployment);
    expect(deploys).to.equal(1);
  });

  it("says clearly that the chain was reset when the remembered contracts are gone, and does not redeploy", async () => {
    const p = await boot();
    const { deployment } = await ensureDeployment({
      provider: p,
      file: file(),
      chainLabel: "embedded",
      deploy: deploy(p),
    });
    await halt();
    fs.rmSync(path.join(dir, "chain-state.json")); // the chain's state is lost
    const q = await boot();
    try {
      await ensureDeployment({ provider: q, file: file(), chainLabel: "embedded", deploy: deploy(q) });
      expect.fail("should have refused");
    } catch (e) {
      expect(e).to.be.instanceOf(DeploymentError);
      expect((e as DeploymentError).code).to.equal("chain_reset");
      expect((e as Error).message).to.match(
        /^The chain was reset: there is no contract code at the remembered registry 0x[0-9a-fA-F]{40} and forwarder/,
      );
      expect((e as Error).message).to.contain(deployment.registry);
      expect((e as Error).message).to.contain("move the data folder away");
    }
    expect(deploys).to.equal(1);
  });

  it("refuses a data folder made with the first registry (layout 1), naming what to do, and does not redeploy", async () => {
    const p = await boot();
    // A real layout-1 registry (its compiled bytecode), with an account in it, remembered by the data folder.
    const v1 = JSON.parse(
      fs.readFileSync(path.join(__dirname, "..", "fixtures", "accountRegistryV1.json"), "utf8"),
    ) as { abi: string[]; bytecode: string };
    const wallet = new ethers.NonceManager(new ethers.Wallet(DEV_ACCOUNT_KEY, p));
    const { forwarder, deployBlock, chainId } = await deploySigil(wallet);
    const old = await new ethers.ContractFactory(v1.abi, v1.bytecode, wallet).deploy(forwarder);
    await old.waitForDeployment();
    await (await (old as ethers.Contract).createAccount("kept", ethers.ZeroAddress)).wait();
    const registry = await old.getAddress();
    fs.writeFileSync(
      file(),
      JSON.stringify({ registry, forwarder, deployBlock, chainId, chain: "embedded", deployedAt: "earlier" }),
    );
    try {
      await ensureDeployment({ provider: p, file: file(), chainLabel: "embedded", deploy: deploy(p) });
      expect.fail("should have refused");
    } catch (e) {
      expect(e).to.be.instanceOf(DeploymentError);
      expect((e as DeploymentError).code).to.equal("registry_outdated");
      expect((e as Error).message).to.match(
        new RegExp(`^The data folder \\(${dir}\\) was made with registry layout 1 at ${registry}; `),
      );
      expect((e as Error).message).to.contain("move the data folder away");
    }
    expect(deploys).to.equal(0);
    expect(readDeployment(file())!.registry).to.equal(registry);
  });

  it("accepts the remembered registry of the current layout", async () => {
    const p = await boot();
    const { deployment } = await ensureDeployment({
      provider: p,
      file: file(),
      chainLabel: "embedded",
      deploy: deploy(p),
    });
    expect(await registryVersionAt(p, deployment.registry)).to.equal(REGISTRY_VERSION);
  });

  it("refuses a remembered deployment from another chain id", async () => {
    const p = await boot(31337);
    await ensureDeployment({ provider: p, file: file(), chainLabel: "embedded", deploy: deploy(p) });
    await halt();
    fs.rmSync(path.join(dir, "chain-state.json"));
    const q = await boot(777);
    try {
      await ensureDeployment({ provider: q, file: file(), chainLabel: "embedded", deploy: deploy(q) });
      expect.fail("should have refused");
    } catch (e) {
      expect((e as DeploymentError).code).to.equal("chain_mismatch");
      expect((e as Error).message).to.contain(
        "deployed on chain 31337 (embedded), but the chain Sigil is connected to now reports chain id 777",
      );
    }
  });

  it("explains what to configure when there is nothing deployed and no deployer", async () => {
    const p = await boot();
    try {
      await ensureDeployment({
        provider: p,
        file: file(),
        chainLabel: "x",
        deployHint: "set SIGIL_DEPLOYER_KEY",
      });
      expect.fail("should have refused");
    } catch (e) {
      expect((e as DeploymentError).code).to.equal("deployer_missing");
      expect((e as Error).message).to.equal("set SIGIL_DEPLOYER_KEY");
    }
  });

  it("verifies a configured deployment has code instead of trusting it", async () => {
    const p = await boot();
    const nowhere = "0x" + "42".repeat(20);
    try {
      await ensureDeployment({
        provider: p,
        file: file(),
        chainLabel: "x",
        configured: { registry: nowhere, forwarder: nowhere, deployBlock: 0 },
      });
      expect.fail("should have refused");
    } catch (e) {
      expect((e as DeploymentError).code).to.equal("chain_mismatch");
      expect((e as Error).message).to.equal(
        `SIGIL_REGISTRY_ADDRESS=${nowhere} has no contract code on chain 31337. Check the address and SIGIL_RPC_URL.`,
      );
    }
  });

  it("never writes RPC credentials into the data folder", () => {
    expect(describeRpc("https://user:secret@rpc.example.com/v2/KEY123?x=1")).to.equal(
      "https://rpc.example.com/…",
    );
    expect(describeRpc(undefined)).to.equal("embedded");
  });
});
