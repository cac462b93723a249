/**
 * `safe group`: a path-B owner with only an RPC endpoint lists a group's name, PKPs and action CIDs. The
 * registry stores none of these (only liveness and counts), so the CLI rebuilds them from the logs.
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
const CID_A = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
const CID_B = "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH";

describe("safe CLI: group (from the logs)", function () {
  this.timeout(180_000);
  let chain: TestChain;
  let dataDir: string;
  let pkps: string[];

  async function safe(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
    const env = { ...process.env, SIGIL_DATA_DIR: dataDir, SIGIL_RPC_URL: chain.rpcUrl };
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
    const owner = new ethers.NonceManager(new ethers.Wallet(devKey(0), chain.provider));
    const d = await deploySigil(owner);
    fs.writeFileSync(
      path.join(dataDir, "deployment.json"),
      JSON.stringify({ ...d, chain: "test", deployedAt: "" }),
    );
    const registry = AccountRegistry__factory.connect(d.registry, owner);
    await (await registry.createAccount("wallet account", ethers.ZeroAddress)).wait();
    pkps = [];
    for (const name of ["signer", "cold"]) {
      const receipt = await (await registry.createPkp(name, "")).wait();
      pkps.push(registry.interface.parseLog(receipt!.logs[0])!.args.pkpId as string);
    }
    await (await registry.createGroup("payments", "pays invoices", [pkps[1], pkps[0]], [CID_A])).wait();
    await (await registry.addAction(1, CID_B)).wait();
    await (await registry.removePkp(1, pkps[1])).wait();
  });
  after(async function () {
    await chain?.stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("prints the group's name, PKPs and CIDs as the events left them", async function () {
    const r = await safe(["group", "1", "1"]);
    expect(r.code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout)).to.deep.equal({
      accountId: 1,
      groupId: 1,
      name: "payments",
      description: "pays invoices",
      pkps: [{ id: pkps[0].toLowerCase(), name: "signer" }],
      actions: [
        { cid: CID_A, cidHash: ethers.keccak256(ethers.toUtf8Bytes(CID_A)) },
        { cid: CID_B, cidHash: ethers.keccak256(ethers.toUtf8Bytes(CID_B)) },
      ],
    });
  });

  it("refuses a group that is not live with unknown_group", async function () {
    const r = await safe(["group", "1", "7"]);
    expect([r.code, JSON.parse(r.stderr).error]).to.deep.equal([
      2,
      {
        code: "unknown_group",
        message: "account 1 has no live group 7",
        details: { accountId: 1, groupId: 7 },
      },
    ]);
  });

  it("refuses logs that do not add up to the registry's counts with incomplete_logs", async function () {
    // Scanning from after the group's creation misses its events: the on-chain counts expose it.
    const head = await chain.provider.getBlockNumber();
    const r = await safe(["group", "1", "1", "--from-block", String(head)]);
    expect([r.code, JSON.parse(r.stderr).error.code]).to.deep.equal([2, "incomplete_logs"]);
  });
});
