/**
 * A real local chain for tests: the anvil binary from @foundry-rs/anvil on a free port, optionally with a
 * --state file so it can be stopped and started again with the same chain (the outage test).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as net from "node:net";
import * as path from "node:path";
import { HDNodeWallet } from "ethers";

export const ANVIL_BIN = path.join(__dirname, "..", "node_modules", ".bin", "anvil");
/** anvil's first dev account (public, well known). */
export const DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
/** Further dev accounts for path-B owners. */
export const DEV_KEYS = [
  DEV_KEY,
  "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
  "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
  "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
];

/** anvil's deterministic funded account `i` (mnemonic "test test … junk"; 0 is DEV_KEY). */
export function devKey(i: number): string {
  return HDNodeWallet.fromPhrase(
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
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface TestChain {
  port: number;
  rpcUrl: string;
  stop(): Promise<void>;
  /** Start again on the same port (and state file); only after stop(). */
  restart(): Promise<void>;
}

async function waitReady(rpcUrl: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`anvil exited with code ${child.exitCode}`);
    try {
      const r = await fetch(rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      });
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("anvil did not start within 15 s");
}

/** `args`: extra anvil flags (e.g. `--hardfork berlin` for a chain without EIP-1559). */
export async function startChain(opts: { stateFile?: string; args?: string[] } = {}): Promise<TestChain> {
  const port = await freePort();
  const rpcUrl = `http://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  const launch = async () => {
    // No contract-size limit: while someone runs `hardhat coverage`, the shared artifacts hold instrumented
    // (oversized) bytecode; the tests must not depend on that timing.
    const args = ["--port", String(port), "--silent", "--chain-id", "31337", "--disable-code-size-limit"];
    if (opts.stateFile) args.push("--state", opts.stateFile);
    if (opts.args) args.push(...opts.args);
    child = spawn(ANVIL_BIN, args, { stdio: "ignore" });
    await waitReady(rpcUrl, child);
  };
  const stop = async () => {
    const c = child;
    child = null;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => c.kill("SIGKILL"), 5_000);
      c.once("exit", () => {
        clearTimeout(t);
        resolve();
      });
      c.kill("SIGTERM");
    });
  };
  await launch();
  return { port, rpcUrl, stop, restart: launch };
}
