/**
 * Options of the relayer and their defaults. Everything a deployment may want to tune lives here, so the
 * rest of the code reads one resolved `RelayerConfig` instead of sprinkling `?? default` around.
 */
import type { Logger } from "pino";
import type { Enclave } from "../enclave";
import type { ExecutorLimits } from "../enclave";
import type { Billing } from "./billing";

export interface RateLimitOptions {
  /** Requests per minute per usage key (REFERENCE.md: 60). */
  perKeyPerMinute?: number;
  /** Requests per minute per account, all of its keys together (REFERENCE.md: 120). */
  perAccountPerMinute?: number;
  /** Account creations per client IP per hour. */
  newAccountPerIpPerHour?: number;
  /** Executions running at once per account (REFERENCE.md: 10). */
  concurrentExecutionsPerAccount?: number;
}

export interface RelayerOptions {
  rpcUrl: string;
  chainId?: number;
  registryAddress: string;
  forwarderAddress: string;
  deployBlock: number;
  /** Opened by the caller (scripts/start.ts or a test). */
  enclave: Enclave;
  /** Content store, idempotency records and the event-cursor checkpoint live under it. */
  dataDir: string;
  /** Default 127.0.0.1 / 8000; port 0 = any free port. */
  host?: string;
  port?: number;
  /** Default 4. */
  gasWallets?: number;
  /** Registry event polling interval, default 250 ms. */
  pollIntervalMs?: number;
  executor?: { poolSize?: number; limits?: Partial<ExecutorLimits>; fetchAllowHosts?: string[] };
  ipfsGateways?: string[];
  rateLimits?: RateLimitOptions;
  /**
   * postgres://…: idempotency records, rate-limit buckets and execution leases live in this shared
   * PostgreSQL database, so every instance pointed at it sees the same (SIGIL_DATABASE_URL). Absent:
   * the relayer's SQLite file and in-memory limits, as for a single instance.
   */
  databaseUrl?: string;
  /** From relayer/billing; when absent, nothing is metered. */
  billing?: Billing;
  logger?: Logger;
  /** Timeout of one JSON-RPC request (default 5 s): a dead chain is answered with 503, never a hang. */
  rpcTimeoutMs?: number;
  /** How long a path-A write may wait for its receipt before answering 503 (default 60 s). */
  receiptTimeoutMs?: number;
  /**
   * Path-A sends with eth_sendRawTransactionSync (EIP-7966) when the node supports it and mines on
   * arrival ("auto", default; falls back to send + receipt polling by itself), or never ("off").
   */
  syncSend?: "auto" | "off";
  /**
   * Path-A batching (relayer/chain/batch.ts): most forward requests in one transaction (default 16;
   * 1 = one transaction per write).
   */
  maxBatchSize?: number;
  /**
   * Most path-A transactions in flight at once (default: 1 while sync sends are used, i.e. on a chain
   * that mines on arrival; otherwise one per gas wallet). Capped at the number of gas wallets.
   */
  sendConcurrency?: number;
  /** Largest JSON body accepted (default 1 MiB). */
  maxBodyBytes?: number;
}

export interface RelayerConfig {
  rpcUrl: string;
  chainId?: number;
  registryAddress: string;
  forwarderAddress: string;
  deployBlock: number;
  dataDir: string;
  databaseUrl?: string;
  host: string;
  port: number;
  gasWallets: number;
  pollIntervalMs: number;
  executorPoolSize?: number;
  executorLimits?: Partial<ExecutorLimits>;
  fetchAllowHosts: string[];
  ipfsGateways: string[];
  rateLimits: Required<RateLimitOptions>;
  rpcTimeoutMs: number;
  receiptTimeoutMs: number;
  syncSend: "auto" | "off";
  maxBatchSize?: number;
  sendConcurrency?: number;
  maxBodyBytes: number;
  limits: {
    /** Largest inline `code` (DESIGN.md 6.4). */
    inlineCodeBytes: number;
    /** Largest code fetched from IPFS. */
    ipfsCodeBytes: number;
    /** Largest `js_params`, serialized. */
    jsParamsBytes: number;
    maxPageSize: number;
    /** Longest name and description accepted (the registry refuses longer ones too). */
    maxNameLength: number;
    maxDescriptionLength: number;
    /** Entries in one scope array, and members added or removed in one call. */
    maxArrayEntries: number;
  };
}

export const DEFAULT_RATE_LIMITS: Required<RateLimitOptions> = {
  perKeyPerMinute: 60,
  perAccountPerMinute: 120,
  newAccountPerIpPerHour: 10,
  concurrentExecutionsPerAccount: 10,
};

export function resolveConfig(opts: RelayerOptions): RelayerConfig {
  if (!opts.rpcUrl) throw new Error("RelayerOptions.rpcUrl is required");
  if (!opts.dataDir) throw new Error("RelayerOptions.dataDir is required");
  return {
    rpcUrl: opts.rpcUrl,
    chainId: opts.chainId,
    registryAddress: opts.registryAddress,
    forwarderAddress: opts.forwarderAddress,
    deployBlock: opts.deployBlock,
    dataDir: opts.dataDir,
    databaseUrl: opts.databaseUrl || undefined,
    host: opts.host ?? "127.0.0.1",
    port: opts.port ?? 8000,
    gasWallets: Math.max(1, opts.gasWallets ?? 4),
    pollIntervalMs: Math.max(20, opts.pollIntervalMs ?? 250),
    executorPoolSize: opts.executor?.poolSize,
    executorLimits: opts.executor?.limits,
    fetchAllowHosts: opts.executor?.fetchAllowHosts ?? [],
    ipfsGateways: opts.ipfsGateways ?? [],
    rateLimits: { ...DEFAULT_RATE_LIMITS, ...stripUndefined(opts.rateLimits ?? {}) },
    rpcTimeoutMs: opts.rpcTimeoutMs ?? 5_000,
    receiptTimeoutMs: opts.receiptTimeoutMs ?? 60_000,
    syncSend: opts.syncSend ?? "auto",
    maxBatchSize: opts.maxBatchSize,
    sendConcurrency: opts.sendConcurrency,
    maxBodyBytes: opts.maxBodyBytes ?? 1024 * 1024,
    limits: {
      inlineCodeBytes: 256 * 1024,
      ipfsCodeBytes: 512 * 1024,
      jsParamsBytes: 64 * 1024,
      maxPageSize: 100,
      maxNameLength: 256,
      maxDescriptionLength: 1024,
      maxArrayEntries: 64,
    },
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
