/**
 * The `safe` CLI as a user runs it (a child process per command) against anvil: deploy the suite, create a
 * 2-of-3 Safe, let it create an account, then propose → sign → sign → status → execute an addKey.
 */
import { expect } from "chai";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { ethers } from "ethers";
import { AccountRegistry__factory } from "../../typechain-types";
import { deploySigil } from "../../scripts/deploy";
import { devKey, startAnvil, tempDir, type TestChain } from "./support";

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, "../..");
const CLI = path.join(ROOT, "scripts/safe/cli.ts");
const TS_NODE = path.join(ROOT, "node_modules/.bin/ts-node");

describe("safe CLI", function () {
  this.timeout(180_000);
  let chain: TestChain;
  let dataDir: string;
  let registry: string;

  async function safe(
    args: string[],
    key?: string,
  ): Promise<{ stdout: string; stderr: string; code: number }> {
    const env = {
      ...process.env,
      SIGIL_SAFE_KEY: key ?? "",
      SIGIL_DATA_DIR: dataDir,
      SIGIL_RPC_URL: chain.rpcUrl,
    };
    if (!key) delete (env as Record<string, string>).SIGIL_SAFE_KEY;
    try {
      const r = await run(TS_NODE, ["--transpile-only", CLI, "--json", ...args], { cwd: ROOT, env });
      return { ...r, code: 0 };
    } catch (e) {
      const err = e as { stdout: string; stderr: string; code: number };
      return { stdout: err.stdout, stderr: err.stderr, code: err.code };
    }
  }

  before(async function () {
    chain = await startAnvil();
    dataDir = tempDir();
    const d = await deploySigil(new ethers.NonceManager(new ethers.Wallet(devKey(0), chain.provider)));
    registry = d.registry;
    // The start command's deployment file, read by the CLI when --registry is absent.
    fs.writeFileSync(
      path.join(dataDir, "deployment.json"),
      JSON.stringify({ ...d, chain: "test", deployedAt: "" }),
    );
  });
  after(async function () {
    await chain?.stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("runs the whole multisig round trip and reports typed errors", async function () {
    const owners = [1, 2, 3].map((i) => new ethers.Wallet(devKey(i)).address);
    const deployed = await safe(["deploy-suite"], devKey(0));
    expect(deployed.code, deployed.stderr).to.equal(0);
    expect(JSON.parse(deployed.stdout).deployed).to.equal(true);

    const created = await safe(["create-safe", "--owners", owners.join(","), "--threshold", "2"], devKey(0));
    const safeAddress = JSON.parse(created.stdout).safe as string;

    const file = path.join(dataDir, "create-account.json");
    const args = [
      "propose",
      "call",
      "--safe",
      safeAddress,
      "--out",
      file,
      "--method",
      "createAccount",
      "--args",
      JSON.stringify(["cli", ethers.ZeroAddress]),
    ];
    expect((await safe([...args, "--sign-key", devKey(1)])).code).to.equal(0);

    // Two refusals that leave the proposal as it was, so they run side by side (a CLI start is seconds).
    const [early, outsider] = await Promise.all([
      safe(["execute", file], devKey(5)),
      safe(["sign", file], devKey(4)),
    ]);
    expect(early.code).to.equal(2);
    expect(JSON.parse(early.stderr).error.code).to.equal("insufficient_signatures");
    expect(JSON.parse(outsider.stderr).error.code).to.equal("not_owner");

    expect((await safe(["sign", file], devKey(2))).code).to.equal(0);
    const status = JSON.parse((await safe(["status", file])).stdout);
    expect([status.collected, status.threshold, status.state]).to.deep.equal([2, 2, "ready"]);

    const executed = await safe(["execute", file], devKey(5));
    expect(executed.code, executed.stderr).to.equal(0);
    const reg = AccountRegistry__factory.connect(registry, chain.provider);
    expect(await reg.accountOfOwner(safeAddress)).to.be.greaterThan(0n);

    const after = JSON.parse((await safe(["status", file])).stdout);
    expect(after.state).to.equal("executed");
  });

  it("propose set-group-policy refuses neither --cid nor --clear, before touching the network", async function () {
    const out = path.join(dataDir, "policy.json");
    const r = await safe([
      "propose",
      "set-group-policy",
      "--group",
      "1",
      "--safe",
      ethers.ZeroAddress,
      "--out",
      out,
    ]);
    expect([r.code, JSON.parse(r.stderr).error.code, fs.existsSync(out)]).to.deep.equal([
      2,
      "invalid_argument",
      false,
    ]);
  });
});
