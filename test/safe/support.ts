/**
 * Test support for the Safe tests: a throwaway anvil per suite (free port, killed in `after`), anvil's
 * funded dev keys, and the Sigil + Safe deployments on it.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ethers } from "ethers";
import { deploySigil } from "../../scripts/deploy";
import { startChain } from "../helpers/anvil";
import { OPERATOR_HEADERS, startStack } from "../helpers/stack";
import type { Enclave } from "../../enclave";
import type { RunningRelayer } from "../../relayer";
import { ensureSafeSuite, rpcProvider, type SafeContext } from "../../scripts/safe/lib";

import { devKey } from "../../testkit/anvil";

export { devKey };

export interface TestChain {
  rpcUrl: string;
  provider: ethers.JsonRpcProvider;
  stop(): Promise<void>;
}

/** anvil on a free port (the shared testkit/anvil.ts launcher) with a provider for scripts. */
export async function startAnvil(): Promise<TestChain> {
  const chain = await startChain();
  const provider = rpcProvider(chain.rpcUrl);
  return {
    rpcUrl: chain.rpcUrl,
    provider,
    stop: async () => {
      provider.destroy();
      await chain.stop();
    },
  };
}

/**
 * A random, funded deployer for the Safe suite, so that every test chain gets the suite at different
 * addresses. Why: protocol-kit 8 memoizes contract instances under a key that, from the second call on a
 * SafeProvider, leaves the provider out (its JSON replacer skips providers it has "seen"); two chains in one
 * process with the same chain id and the same suite addresses would then share contracts bound to the first
 * chain's RPC. One process talks to one chain in the CLI, so only multi-chain processes like mocha care.
 */
export async function freshDeployer(provider: ethers.JsonRpcProvider): Promise<ethers.Wallet> {
  const wallet = ethers.Wallet.createRandom(provider);
  await provider.send("anvil_setBalance", [wallet.address, "0x56BC75E2D63100000"]);
  return new ethers.Wallet(wallet.privateKey, provider);
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

/** anvil + Sigil contracts + the Safe suite (deployed with dev key 0); `chain.stop()` also removes the temp dir. */
export async function safeWorld(): Promise<SafeWorld> {
  const chain = await startAnvil();
  const dir = tempDir();
  const stop = async () => {
    await chain.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const deployer = new ethers.NonceManager(new ethers.Wallet(devKey(0), chain.provider));
    const sigil = await deploySigil(deployer);
    const deploymentsFile = path.join(dir, "safe-deployments.json");
    const { suite, chainId } = await ensureSafeSuite(await freshDeployer(chain.provider), deploymentsFile);
    return {
      chain: { ...chain, stop },
      ctx: { rpcUrl: chain.rpcUrl, chainId, suite },
      registry: sigil.registry,
      forwarder: sigil.forwarder,
      deployBlock: sigil.deployBlock,
      deploymentsFile,
      dir,
    };
  } catch (err) {
    await stop(); // no orphaned anvil when setup fails
    throw err;
  }
}

// ------------------------------------------------------------------------------------------------
// The real relayer on the same chain
// ------------------------------------------------------------------------------------------------

export interface SigilWorld extends SafeWorld {
  enclave: Enclave;
  /** The relayer's data folder (its SQLite database: the audit log's tables among them). */
  dataDir: string;
  relayer: RunningRelayer;
  api: Api;
  stopAll(): Promise<void>;
}

/**
 * The shared test stack (testkit/stack.ts: anvil + Sigil + funded gas wallets + the real relayer)
 * plus the Safe suite on the same chain.
 */
export async function sigilWorld(opts: { pollIntervalMs?: number } = {}): Promise<SigilWorld> {
  const stack = await startStack({
    pollIntervalMs: opts.pollIntervalMs ?? 50,
    executor: { poolSize: 2 },
    rateLimits: {
      perKeyPerMinute: 100_000,
      perAccountPerMinute: 100_000,
      newAccountPerIpPerHour: 100_000,
      concurrentExecutionsPerAccount: 50,
    },
  });
  const provider = rpcProvider(stack.chain.rpcUrl);
  const dir = tempDir();
  const deploymentsFile = path.join(dir, "safe-deployments.json");
  let deployed;
  try {
    deployed = await ensureSafeSuite(await freshDeployer(provider), deploymentsFile);
  } catch (err) {
    provider.destroy();
    await stack.close(); // no orphaned anvil or relayer when setup fails
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const { suite, chainId } = deployed;
  return {
    chain: { rpcUrl: stack.chain.rpcUrl, provider, stop: async () => provider.destroy() },
    ctx: { rpcUrl: stack.chain.rpcUrl, chainId, suite },
    registry: stack.deployment.registry,
    forwarder: stack.deployment.forwarder,
    deployBlock: stack.deployment.deployBlock,
    deploymentsFile,
    dir,
    enclave: stack.enclave,
    dataDir: stack.dataDir,
    relayer: stack.relayer,
    api: new Api(stack.url),
    stopAll: async () => {
      provider.destroy();
      await stack.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
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
      signal: AbortSignal.timeout(30_000),
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
    const r = await fetch(`${this.base}/health`, {
      headers: OPERATOR_HEADERS,
      signal: AbortSignal.timeout(30_000),
    });
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
