import { expect } from "chai";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { ethers } from "ethers";
import {
  AnvilError,
  anvilBinary,
  freePort,
  reapOrphan,
  startAnvil,
  type RunningAnvil,
} from "../../scripts/start/anvil";
import { fundGasWallets, LOW_GAS_WEI } from "../../scripts/start/funding";

const WHO = "0x1111111111111111111111111111111111111111";

describe("start: embedded chain (anvil)", function () {
  this.timeout(60_000);
  let dir: string;
  const running: RunningAnvil[] = [];
  const strayPids: number[] = [];

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-anvil-"));
  });
  afterEach(async () => {
    for (const a of running.splice(0)) await a.stop();
    for (const pid of strayPids.splice(0))
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const start = async (extra: Partial<Parameters<typeof startAnvil>[0]> = {}) => {
    const a = await startAnvil({
      statePath: path.join(dir, "chain-state.json"),
      pidPath: path.join(dir, "anvil.pid"),
      port: 0,
      chainId: 31337,
      stateIntervalSeconds: 1,
      ...extra,
    });
    running.push(a);
    return a;
  };
  const provider = (a: RunningAnvil) => new ethers.JsonRpcProvider(a.rpcUrl, undefined, { cacheTimeout: -1 });

  it("starts on the requested chain id and writes its pid file", async () => {
    const a = await start({ chainId: 424242 });
    const p = provider(a);
    expect(Number((await p.getNetwork()).chainId)).to.equal(424242);
    expect(fs.readFileSync(path.join(dir, "anvil.pid"), "utf8")).to.equal(`${a.pid} ${process.pid}`);
    p.destroy();
  });

  it("keeps balances and blocks across a clean stop (SIGTERM writes the state file)", async () => {
    const a = await start();
    const p = provider(a);
    await p.send("anvil_setBalance", [WHO, "0x1234"]);
    await p.send("evm_mine", []);
    p.destroy();
    await a.stop();
    expect(fs.existsSync(path.join(dir, "anvil.pid"))).to.equal(false);
    const b = await start();
    const q = provider(b);
    expect(await q.getBalance(WHO)).to.equal(0x1234n);
    expect(await q.getBlockNumber()).to.equal(1);
    q.destroy();
  });

  it("loses at most the state interval on a hard kill (SIGKILL)", async () => {
    const a = await start();
    const p = provider(a);
    await p.send("anvil_setBalance", [WHO, "0x99"]);
    p.destroy();
    await new Promise((r) => setTimeout(r, 2500)); // > one 1 s interval
    process.kill(a.pid, "SIGKILL");
    await a.exited;
    const b = await start();
    const q = provider(b);
    expect(await q.getBalance(WHO)).to.equal(0x99n);
    q.destroy();
  });

  it("saves the state file only after new blocks: an idle chain's file is not rewritten", async () => {
    const a = await start();
    const statePath = path.join(dir, "chain-state.json");
    const p = provider(a);
    await p.send("evm_mine", []);
    for (let i = 0; i < 40 && a.saver.saves === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(a.saver.saves).to.equal(1);
    const written = fs.statSync(statePath).mtimeMs;
    await new Promise((r) => setTimeout(r, 2500)); // two more 1 s looks, no block
    expect(a.saver.saves).to.equal(1);
    expect(fs.statSync(statePath).mtimeMs).to.equal(written);
    await p.send("evm_mine", []);
    for (let i = 0; i < 40 && a.saver.saves === 1; i++) await new Promise((r) => setTimeout(r, 100));
    expect(a.saver.saves).to.equal(2);
    // What a save wrote is what anvil loads: a hard kill now keeps both blocks.
    p.destroy();
    process.kill(a.pid, "SIGKILL");
    await a.exited;
    const b = await start();
    const q = provider(b);
    expect(await q.getBlockNumber()).to.equal(2);
    q.destroy();
  });

  it("saveState saves a change made without a block (the dev funding) at once", async () => {
    const a = await start({ stateIntervalSeconds: 3600 });
    const p = provider(a);
    await p.send("anvil_setBalance", [WHO, "0x4242"]);
    await a.saveState();
    p.destroy();
    process.kill(a.pid, "SIGKILL");
    await a.exited;
    const b = await start();
    const q = provider(b);
    expect(await q.getBalance(WHO)).to.equal(0x4242n);
    q.destroy();
  });

  it("says the port is in use instead of failing obscurely", async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as net.AddressInfo).port;
    try {
      await start({ port });
      expect.fail("should have refused");
    } catch (e) {
      expect(e).to.be.instanceOf(AnvilError);
      expect((e as AnvilError).code).to.equal("anvil_port_in_use");
      expect((e as AnvilError).message).to.contain(`Port ${port}`);
      expect((e as AnvilError).message).to.contain("SIGIL_ANVIL_PORT");
    } finally {
      srv.close();
    }
  });

  it("refuses a corrupted state file with a clear message", async () => {
    fs.writeFileSync(path.join(dir, "chain-state.json"), '{"block":');
    try {
      await start();
      expect.fail("should have refused");
    } catch (e) {
      expect((e as AnvilError).code).to.equal("anvil_state_unreadable");
      expect((e as AnvilError).message).to.contain("chain-state.json is unreadable");
    }
  });

  it("reaps an anvil orphaned by a hard-killed start (same state file), keeping its state", async () => {
    const statePath = path.join(dir, "chain-state.json");
    const port = await freePort();
    const orphan = spawn(anvilBinary(), ["--state", statePath, "--port", String(port), "--silent"], {
      stdio: "ignore",
      detached: true,
    });
    strayPids.push(orphan.pid!);
    fs.writeFileSync(path.join(dir, "anvil.pid"), String(orphan.pid));
    const rpc = () =>
      fetch(`http://127.0.0.1:${port}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
      });
    for (let i = 0; i < 100; i++) {
      if (
        await rpc().then(
          () => true,
          () => false,
        )
      )
        break; // up, with its signal handlers installed
      await new Promise((r) => setTimeout(r, 100));
    }
    const exited = new Promise((r) => orphan.once("exit", r));
    expect(await reapOrphan(path.join(dir, "anvil.pid"), statePath)).to.equal(true);
    await exited;
    expect(fs.existsSync(statePath)).to.equal(true); // it was stopped with SIGTERM and wrote its state
  });

  it("refuses to start while another live Sigil owns the data folder, and leaves its chain running", async () => {
    const statePath = path.join(dir, "chain-state.json");
    const other = spawn(anvilBinary(), ["--state", statePath, "--port", "0", "--silent"], {
      stdio: "ignore",
      detached: true,
    });
    const owner = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"], { stdio: "ignore" });
    strayPids.push(other.pid!, owner.pid!);
    fs.writeFileSync(path.join(dir, "anvil.pid"), `${other.pid} ${owner.pid}`);
    try {
      await start();
      expect.fail("should have refused");
    } catch (e) {
      expect((e as AnvilError).code).to.equal("anvil_in_use");
      expect((e as Error).message).to.contain(
        `Another Sigil (pid ${owner.pid}) is already running with this data folder`,
      );
    }
    expect(() => process.kill(other.pid!, 0)).not.to.throw();
  });

  it("leaves alone a process in the pid file that is not our anvil", async () => {
    const other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"], { stdio: "ignore" });
    strayPids.push(other.pid!);
    fs.writeFileSync(path.join(dir, "anvil.pid"), String(other.pid));
    expect(await reapOrphan(path.join(dir, "anvil.pid"), path.join(dir, "chain-state.json"))).to.equal(false);
    expect(() => process.kill(other.pid!, 0)).not.to.throw();
  });

  it("funds dev gas wallets to well above the low-water mark, and only reports them outside dev mode", async () => {
    const a = await start();
    const p = provider(a);
    const wallets = [ethers.Wallet.createRandom().address, ethers.Wallet.createRandom().address];
    const report = await fundGasWallets({ provider: p, addresses: wallets, devMode: false });
    expect(report.funded).to.deep.equal([]);
    expect(report.low.map((l) => l.address)).to.deep.equal(wallets);
    const dev = await fundGasWallets({ provider: p, addresses: wallets, devMode: true });
    expect(dev.funded).to.deep.equal(wallets);
    for (const w of wallets) expect((await p.getBalance(w)) > LOW_GAS_WEI).to.equal(true);
    const again = await fundGasWallets({ provider: p, addresses: wallets, devMode: true });
    expect(again.funded).to.deep.equal([]);
    p.destroy();
  });
});
