/**
 * A whole service for tests: anvil + the deployed contracts + funded gas wallets + a relayer with a fresh
 * root key and a temporary data folder, plus a tiny HTTP client. Everything is real; `close()` stops all.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { FetchRequest, JsonRpcProvider, Network, NonceManager, Wallet, parseEther, toQuantity } from "ethers";
import pino, { type Logger } from "pino";
import { Enclave } from "../enclave";
import { startRelayer, type RelayerOptions, type RunningRelayer } from "../relayer";
import { deploySigil, type SigilDeployment } from "../scripts/deploy";
import { DEV_KEY, startChain, type TestChain } from "./anvil";
import { sharedContract } from "./openapiContract";

// Response bodies are whatever JSON the API returned; tests assert on their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

export interface ApiResponse<T = Json> {
  status: number;
  body: T;
  headers: Headers;
}

export interface Stack {
  chain: TestChain;
  provider: JsonRpcProvider;
  deployment: SigilDeployment;
  enclave: Enclave;
  relayer: RunningRelayer;
  url: string;
  dataDir: string;
  relayerOptions: RelayerOptions;
  api<T = Json>(
    method: string,
    route: string,
    opts?: { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> },
  ): Promise<ApiResponse<T>>;
  /** Restart the relayer process part (same data dir, same enclave). */
  restartRelayer(): Promise<void>;
  close(): Promise<void>;
}

/** The operator token every test stack is configured with: it unlocks GET /health's detailed view. */
export const TEST_OPERATOR_TOKEN = "test-operator-token";
export const OPERATOR_HEADERS = { "x-operator-token": TEST_OPERATOR_TOKEN };

export function quietLogger(): Logger {
  return pino({ level: "silent" });
}

export function testProvider(rpcUrl: string): JsonRpcProvider {
  const req = new FetchRequest(rpcUrl);
  req.timeout = 5_000;
  const network = Network.from(31337);
  return new JsonRpcProvider(req, network, { staticNetwork: network, cacheTimeout: -1, batchMaxCount: 1 });
}

export async function startStack(
  over: Partial<RelayerOptions> & { stateFile?: string } = {},
): Promise<Stack> {
  const { stateFile, ...relayerOver } = over;
  const chain = await startChain({ stateFile });
  try {
    return await startOn(chain, relayerOver);
  } catch (err) {
    // A failed setup must not leave a chain running behind the test.
    await chain.stop();
    throw err;
  }
}

async function startOn(chain: TestChain, relayerOver: Partial<RelayerOptions>): Promise<Stack> {
  const provider = testProvider(chain.rpcUrl);
  const deployer = new NonceManager(new Wallet(DEV_KEY, provider));
  const deployment = await deploySigil(deployer);
  const enclave = Enclave.fromRootKey(crypto.randomBytes(32).toString("hex"));
  const gasWallets = relayerOver.gasWallets ?? 4;
  for (let i = 0; i < gasWallets; i++) {
    // The relayer's own wallets: an instance id selects other wallets than the unnamed instance's.
    const to = enclave.gasAddress(i, relayerOver.instanceId);
    const tx = await deployer.sendTransaction({ to, value: parseEther("100") });
    await tx.wait();
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-relayer-"));
  const relayerOptions: RelayerOptions = {
    rpcUrl: chain.rpcUrl,
    // chainId left out on purpose: the relayer asks the RPC endpoint (fetchChainId).
    registryAddress: deployment.registry,
    forwarderAddress: deployment.forwarder,
    deployBlock: deployment.deployBlock,
    enclave,
    dataDir,
    port: 0,
    gasWallets,
    pollIntervalMs: 100,
    executor: { poolSize: 2 },
    logger: quietLogger(),
    rpcTimeoutMs: 2_000,
    operatorToken: TEST_OPERATOR_TOKEN,
    ...relayerOver,
    // Merged, not replaced: a test that sets one limit keeps the others out of its way (every test
    // client is 127.0.0.1, so the per-IP limit would otherwise count the whole test's traffic).
    rateLimits: {
      perKeyPerMinute: 100_000,
      perAccountPerMinute: 100_000,
      newAccountPerIpPerHour: 100_000,
      perIpPerMinute: 1_000_000,
      ...relayerOver.rateLimits,
    },
  };
  let relayer = await startRelayer(relayerOptions);
  const stack: Stack = {
    chain,
    provider,
    deployment,
    enclave,
    relayer,
    url: relayer.url,
    dataDir,
    relayerOptions,
    async api(method, route, opts = {}) {
      const headers: Record<string, string> = { ...(opts.headers ?? {}) };
      if (opts.key !== undefined) headers["x-api-key"] = opts.key;
      let body: string | undefined;
      if (opts.rawBody !== undefined) body = opts.rawBody;
      else if (opts.body !== undefined) {
        body = JSON.stringify(opts.body);
        headers["content-type"] ??= "application/json";
      }
      const r = await fetch(stack.url + route, { method, headers, body });
      const text = await r.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON (e.g. /metrics)
      }
      // The document is the contract: an answer it does not describe fails the test that received it.
      if ((r.headers.get("content-type") ?? "").includes("application/json")) {
        const problem = sharedContract().violation(
          method,
          new URL(stack.url + route).pathname,
          r.status,
          parsed,
        );
        if (problem !== null) throw new Error(`The answer does not match the OpenAPI document: ${problem}`);
      }
      return { status: r.status, body: parsed as Json, headers: r.headers };
    },
    async restartRelayer() {
      await stack.relayer.close();
      relayer = await startRelayer({ ...relayerOptions, port: stack.relayer.port });
      stack.relayer = relayer;
      stack.url = relayer.url;
    },
    async close() {
      await stack.relayer.close().catch(() => undefined);
      provider.destroy();
      await chain.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return stack;
}

/** The lifecycle's common first steps: an account, a PKP, a group listing an action and the PKP. */
export async function setupAccount(
  s: Stack,
  code = 'async function main(p) { return { hello: p && p.who ? p.who : "world" }; }',
) {
  const acct = await s.api("POST", "/core/v1/new_account", { body: { account_name: "test" } });
  if (acct.status !== 201) throw new Error(`new_account: ${acct.status} ${JSON.stringify(acct.body)}`);
  const key: string = acct.body.api_key;
  const pkp = await s.api("POST", "/core/v1/pkps/create", { key, body: { name: "p1" } });
  if (pkp.status !== 201) throw new Error(`pkps/create: ${pkp.status} ${JSON.stringify(pkp.body)}`);
  const pinned = await s.api("POST", "/core/v1/actions", { key, body: { code } });
  if (pinned.status !== 201) throw new Error(`actions: ${pinned.status} ${JSON.stringify(pinned.body)}`);
  const group = await s.api("POST", "/core/v1/groups", {
    key,
    body: { name: "g1", pkps: [pkp.body.pkp_id], actions: [pinned.body.cid] },
  });
  if (group.status !== 201) throw new Error(`groups: ${group.status} ${JSON.stringify(group.body)}`);
  return {
    accountKey: key,
    accountId: acct.body.account_id as number,
    pkpId: pkp.body.pkp_id as string,
    cid: pinned.body.cid as string,
    groupId: group.body.group_id as number,
    code,
  };
}

/** Gives the gas wallets of another relayer instance (its own, selected by its id) 100 ETH each. */
export async function fundInstanceGasWallets(s: Stack, instanceId: string, count = 4): Promise<void> {
  for (let w = 0; w < count; w++)
    await s.provider.send("anvil_setBalance", [
      s.enclave.gasAddress(w, instanceId),
      toQuantity(parseEther("100")),
    ]);
}
