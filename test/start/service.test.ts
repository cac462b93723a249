/**
 * startSigil in-process, for the paths the newcomer test does not take: an external chain (dev mode off),
 * a failed start that must leave nothing running, and npm start refusing a configuration.
 */
import { expect } from "chai";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { ethers } from "ethers";
import { startAnvil, type RunningAnvil } from "../../scripts/start/anvil";
import { loadConfig } from "../../scripts/start/config";
import { DeploymentError } from "../../scripts/start/deployment";
import { DEV_ACCOUNT_KEY } from "../../scripts/start/funding";
import { startSigil, type RunningSigil } from "../../scripts/start/service";
import { StripeStub } from "../helpers/stripeStub";

const ROOT = path.resolve(__dirname, "..", "..");

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("start: the service (startSigil)", function () {
  this.timeout(120_000);
  let dir: string;
  let external: RunningAnvil | undefined;
  let running: RunningSigil | undefined;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-service-"));
  });
  afterEach(async () => {
    await running?.close();
    running = undefined;
    await external?.stop();
    external = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("on an external chain: deploys with SIGIL_DEPLOYER_KEY, never funds gas wallets, and reports them as low", async () => {
    external = await startAnvil({
      statePath: path.join(dir, "ext-state.json"),
      pidPath: path.join(dir, "ext.pid"),
      port: 0,
      chainId: 31337,
    });
    const config = loadConfig(
      {
        SIGIL_DATA_DIR: path.join(dir, "data"),
        SIGIL_RPC_URL: external.rpcUrl,
        SIGIL_ROOT_KEY: "11".repeat(32),
        SIGIL_DEPLOYER_KEY: DEV_ACCOUNT_KEY,
        SIGIL_GAS_WALLETS: "2",
        PORT: "0",
        SIGIL_LOG_FILE: path.join(dir, "sigil.log"),
      },
      dir,
    );
    expect(config.devMode).to.equal(false);
    const warnings: string[] = [];
    running = await startSigil(config, { warn: (m) => warnings.push(m) });
    expect(running.embeddedChain).to.equal(false);
    expect(running.freshDeployment).to.equal(true);
    expect(running.funding.funded).to.deep.equal([]);
    expect(running.funding.low).to.have.length(2);
    expect(
      warnings.filter((w) => /^gas wallet 0x[0-9a-fA-F]{40} holds only 0\.0 ETH: fund it/.test(w)),
    ).to.have.length(2);
    expect(fs.existsSync(path.join(dir, "data", "root.key"))).to.equal(false); // the injected key is never written down
    const health = await fetch(`${running.url}/health`);
    expect(health.status).to.equal(200);
    const saved = JSON.parse(fs.readFileSync(path.join(dir, "data", "deployment.json"), "utf8")) as {
      chain: string;
    };
    expect(saved.chain).to.equal(`http://${new URL(external.rpcUrl).host}`);
  });

  it("a start refused because the chain was reset stops the chain it had started and leaves no process behind", async () => {
    const env = {
      SIGIL_DATA_DIR: path.join(dir, "data"),
      PORT: "0",
      SIGIL_ANVIL_PORT: "0",
      SIGIL_LOG_FILE: path.join(dir, "sigil.log"),
    };
    running = await startSigil(loadConfig(env, dir), { warn: () => {} });
    const registry = running.deployment.registry;
    await running.close();
    running = undefined;
    fs.rmSync(path.join(dir, "data", "chain-state.json"));

    let pidSeen: number | undefined;
    const watcher = setInterval(() => {
      const f = path.join(dir, "data", "anvil.pid");
      if (fs.existsSync(f)) pidSeen = Number(fs.readFileSync(f, "utf8").split(" ")[0]) || pidSeen;
    }, 20);
    try {
      await startSigil(loadConfig(env, dir), { warn: () => {} });
      expect.fail("should have refused");
    } catch (e) {
      expect(e).to.be.instanceOf(DeploymentError);
      expect((e as DeploymentError).code).to.equal("chain_reset");
      expect((e as Error).message).to.contain(`registry ${registry}`);
    } finally {
      clearInterval(watcher);
    }
    expect(pidSeen, "the second start did launch a chain").to.be.a("number");
    expect(alive(pidSeen!)).to.equal(false);
    expect(fs.existsSync(path.join(dir, "data", "anvil.pid"))).to.equal(false);
  });

  it("a busy API port is refused before anything is deployed, naming PORT, and leaves no chain behind", async () => {
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r));
    const port = (busy.address() as net.AddressInfo).port;
    let pidSeen: number | undefined;
    const watcher = setInterval(() => {
      const f = path.join(dir, "data", "anvil.pid");
      if (fs.existsSync(f)) pidSeen = Number(fs.readFileSync(f, "utf8").split(" ")[0]) || pidSeen;
    }, 20);
    const steps: string[] = [];
    try {
      const config = loadConfig(
        {
          SIGIL_DATA_DIR: path.join(dir, "data"),
          PORT: String(port),
          SIGIL_ANVIL_PORT: "0",
          SIGIL_LOG_FILE: path.join(dir, "sigil.log"),
        },
        dir,
      );
      await startSigil(config, { warn: () => {}, step: (m) => steps.push(m) });
      expect.fail("should have refused");
    } catch (e) {
      expect((e as { code?: string }).code).to.equal("api_port_in_use");
      expect((e as Error).message).to.equal(
        `Port ${port} on 127.0.0.1 is already in use (is another Sigil running?), so the API cannot start. ` +
          `Stop whatever uses it, or set PORT to another port.`,
      );
    } finally {
      clearInterval(watcher);
      await new Promise((r) => busy.close(r));
    }
    expect(steps).to.not.include("deploying the registry and forwarder (first start)");
    expect(fs.existsSync(path.join(dir, "data", "deployment.json"))).to.equal(false);
    expect(pidSeen, "the chain was started before the check").to.be.a("number");
    expect(alive(pidSeen!)).to.equal(false);
  });

  it("the gas wallets of the embedded chain are funded by dev mode", async () => {
    running = await startSigil(
      loadConfig(
        {
          SIGIL_DATA_DIR: path.join(dir, "data"),
          PORT: "0",
          SIGIL_ANVIL_PORT: "0",
          SIGIL_GAS_WALLETS: "3",
          SIGIL_LOG_FILE: "-",
          SIGIL_LOG_LEVEL: "silent",
        },
        dir,
      ),
      { warn: () => {} },
    );
    expect(running.funding.funded).to.have.length(3);
    const provider = new ethers.JsonRpcProvider(running.rpcUrl, undefined, { cacheTimeout: -1 });
    for (const a of running.funding.funded)
      expect(await provider.getBalance(a)).to.equal(ethers.parseEther("1000"));
    provider.destroy();
  });

  it("with Stripe configured, the CLI top-up prints what the browser must do, and confirm credits once Stripe says succeeded", async () => {
    const stub = await new StripeStub().start();
    try {
      running = await startSigil(
        loadConfig(
          {
            SIGIL_DATA_DIR: path.join(dir, "data"),
            PORT: "0",
            SIGIL_ANVIL_PORT: "0",
            SIGIL_LOG_FILE: path.join(dir, "sigil.log"),
            STRIPE_SECRET_KEY: stub.secretKey,
            STRIPE_PUBLISHABLE_KEY: "pk_test_newcomer",
            STRIPE_WEBHOOK_SECRET: stub.webhookSecret,
            STRIPE_API_HOST: `127.0.0.1:${stub.port}`,
          },
          dir,
        ),
        { warn: () => {} },
      );
      expect(running.paymentProcessor).to.equal("stripe");
      const created = await fetch(`${running.url}/core/v1/new_account`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      const accountKey = ((await created.json()) as { api_key: string }).api_key;
      // Asynchronous: the service runs in this very process, so a spawnSync would block it.
      const sigil = (...args: string[]) =>
        new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
          const child = spawn(process.execPath, [path.join(ROOT, "bin", "sigil.js"), ...args], {
            cwd: ROOT,
            env: { ...process.env, SIGIL_URL: running!.url, SIGIL_API_KEY: accountKey },
          });
          let stdout = "";
          let stderr = "";
          child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
          child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
          child.on("close", (status) => resolve({ status, stdout, stderr }));
        });
      const topUp = await sigil("billing", "top-up", "--amount", "500");
      expect(topUp.status, topUp.stderr).to.equal(0);
      const id = /payment intent +(\S+)/.exec(topUp.stdout)![1];
      expect(topUp.stdout).to.contain("publishable key  pk_test_newcomer");
      expect(topUp.stdout).to.contain(`npx sigil billing confirm ${id}`);
      expect(stub.intents.get(id)!.status).to.equal("requires_payment_method"); // the CLI paid nothing itself
      stub.succeed(id);
      const confirm = await sigil("--json", "billing", "confirm", id);
      expect(confirm.status, confirm.stderr).to.equal(0);
      expect(JSON.parse(confirm.stdout)).to.include({ status: "succeeded", credited_cents: 500 });
    } finally {
      await running?.close();
      running = undefined;
      await stub.stop();
    }
  });

  it("npm start refuses to start outside dev mode without a root key, says how to provide one, and exits 1", () => {
    const r = spawnSync(
      process.execPath,
      [require.resolve("ts-node/dist/bin"), "--transpile-only", "scripts/start.ts"],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          SIGIL_DATA_DIR: path.join(dir, "data"),
          SIGIL_RPC_URL: "http://127.0.0.1:9",
          SIGIL_ROOT_KEY: "",
        },
        encoding: "utf8",
        timeout: 60_000,
      },
    );
    expect(r.status).to.equal(1);
    expect(r.stderr).to.contain("Sigil cannot start: the configuration is invalid.");
    expect(r.stderr).to.contain(
      "No root key: outside dev mode Sigil never generates one. Provide it in SIGIL_ROOT_KEY",
    );
    expect(r.stderr).to.contain("See docs/configuration.md");
    expect(fs.existsSync(path.join(dir, "data"))).to.equal(false); // nothing was created
  });
});
