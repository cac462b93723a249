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
  // No code-size limit: `hardhat coverage` run by a teammate in the same tree leaves instrumented (larger)
  // TypeChain bytecode behind until the next compile; these tests are about behaviour, not contract size.
  const child: ChildProcess = spawn(
    bin,
    ["--port", String(port), "--silent", "--disable-code-size-limit", ...extraArgs],
    {
      stdio: "ignore",
    },
  );
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

// ------------------------------------------------------------------------------------------------
// The real relayer on the same chain
// ------------------------------------------------------------------------------------------------

import { Enclave } from "../../enclave";
import pino from "pino";
import { startRelayer, type RunningRelayer } from "../../relayer";

export interface SigilWorld extends SafeWorld {
  enclave: Enclave;
  relayer: RunningRelayer;
  api: Api;
  stopAll(): Promise<void>;
}

/** anvil + Sigil + the Safe suite + the real relayer (gas wallets funded with anvil_setBalance). */
export async function sigilWorld(opts: { pollIntervalMs?: number } = {}): Promise<SigilWorld> {
  const world = await safeWorld();
  const enclave = Enclave.fromRootKey(ethers.hexlify(ethers.randomBytes(32)));
  const gasWallets = 2;
  for (let i = 0; i < gasWallets; i++) {
    await world.chain.provider.send("anvil_setBalance", [enclave.gasAddress(i), "0x56BC75E2D63100000"]);
  }
  const relayer = await startRelayer({
    rpcUrl: world.chain.rpcUrl,
    chainId: Number(world.ctx.chainId),
    registryAddress: world.registry,
    forwarderAddress: world.forwarder,
    deployBlock: world.deployBlock,
    enclave,
    dataDir: path.join(world.dir, "relayer"),
    port: 0,
    gasWallets,
    pollIntervalMs: opts.pollIntervalMs ?? 50,
    executor: { poolSize: 2 },
    rateLimits: {
      perKeyPerMinute: 100_000,
      perAccountPerMinute: 100_000,
      newAccountPerIpPerHour: 100_000,
      concurrentExecutionsPerAccount: 50,
    },
    logger: silentLogger(),
  });
  return {
    ...world,
    enclave,
    relayer,
    api: new Api(relayer.url),
    stopAll: async () => {
      await relayer.close();
      await world.chain.stop();
    },
  };
}

function silentLogger() {
  return pino({ level: "silent" });
}

export interface ApiResponse {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** A minimal HTTP client for /core/v1 (the key in X-Api-Key). */
export class Api {
  constructor(readonly base: string) {}
  async call(method: string, route: string, key?: string, body?: unknown): Promise<ApiResponse> {
    const headers: Record<string, string> = {};
    if (key) headers["X-Api-Key"] = key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(`${this.base}/core/v1${route}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }
  get(route: string, key?: string) {
    return this.call("GET", route, key);
  }
  post(route: string, key: string | undefined, body: unknown = {}) {
    return this.call("POST", route, key, body);
  }
  /** The last block the relayer's permission cache has applied. */
  async processedBlock(): Promise<number> {
    const r = await fetch(`${this.base}/health`);
    return ((await r.json()) as { cache: { last_processed_block: number } }).cache.last_processed_block;
  }
  /** Wait until the relayer has applied `block` (path-B writes reach it through its event poll). */
  async waitForBlock(block: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await this.processedBlock()) < block) {
      if (Date.now() > deadline)
        throw new Error(`the relayer did not process block ${block} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}
