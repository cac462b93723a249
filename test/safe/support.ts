/**
 * Test support for the Safe tests: a throwaway anvil per suite (free port, killed in `after`), anvil's
 * funded dev keys, and the Sigil + Safe deployments on it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { ethers } from "ethers";
import { deploySigil } from "../../scripts/deploy";
import { ensureSafeSuite, rpcProvider, type SafeContext } from "../../scripts/safe/lib";

/** anvil's deterministic funded accounts (mnemonic "test test … junk"), index 0..9. */
export function devKey(i: number): string {
  return ethers.HDNodeWallet.fromPhrase(
    "test test test test test test test test test test test junk",
    undefined,
    `m/44'/60'/0'/0/${i}`,
  ).privateKey;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

export interface TestChain {
  rpcUrl: string;
  provider: ethers.JsonRpcProvider;
  stop(): Promise<void>;
}

/** Start anvil on a free port and wait until it answers. */
export async function startAnvil(extraArgs: string[] = []): Promise<TestChain> {
  const port = await freePort();
  const bin = path.resolve(__dirname, "../../node_modules/.bin/anvil");
  const child: ChildProcess = spawn(bin, ["--port", String(port), "--silent", ...extraArgs], {
    stdio: "ignore",
  });
  const rpcUrl = `http://127.0.0.1:${port}`;
  // Poll with plain fetch: an ethers provider created before the node answers logs retry noise.
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      const res = await fetch(rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      });
      if (res.ok) break;
    } catch (e) {
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        throw e;
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const provider = rpcProvider(rpcUrl);
  return {
    rpcUrl,
    provider,
    stop: () =>
      new Promise<void>((resolve) => {
        provider.destroy();
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

export function tempDir(prefix = "sigil-safe-"): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export interface SafeWorld {
  chain: TestChain;
  ctx: SafeContext;
  registry: string;
  forwarder: string;
  deployBlock: number;
  deploymentsFile: string;
  dir: string;
}

/** anvil + Sigil contracts + the Safe suite (deployed with dev key 0). */
export async function safeWorld(): Promise<SafeWorld> {
  const chain = await startAnvil();
  const dir = tempDir();
  const deployer = new ethers.NonceManager(new ethers.Wallet(devKey(0), chain.provider));
  const sigil = await deploySigil(deployer);
  const deploymentsFile = path.join(dir, "safe-deployments.json");
  const { suite, chainId } = await ensureSafeSuite(
    new ethers.Wallet(devKey(0), chain.provider),
    deploymentsFile,
  );
  return {
    chain,
    ctx: { rpcUrl: chain.rpcUrl, chainId, suite },
    registry: sigil.registry,
    forwarder: sigil.forwarder,
    deployBlock: sigil.deployBlock,
    deploymentsFile,
    dir,
  };
}
