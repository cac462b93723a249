/**
 * Options of the relayer and their defaults. Everything a deployment may want to tune lives here, so the
 * rest of the code reads one resolved `RelayerConfig` instead of sprinkling `?? default` around.
 */
import path from "node:path";
import type { Logger } from "pino";
import type { Enclave } from "../enclave";
import type { ExecutorLimits, FetchPolicy, ModuleOptions, UnhandledRejectionMode } from "../enclave";
import type { Billing } from "./billing";
import { DEFAULT_MAX_PRIORITY_FEE_WEI } from "./chain/fees";
import type { WebhookOptions } from "./webhooks";
import type { AuditOptions } from "./audit/log";
import { DEFAULT_HOT_VACUUM_MS } from "./db/hotTableVacuum";
import { resolveChains, type ChainEndpoint } from "./chains";

export interface RateLimitOptions {
  /** Requests per minute per usage key (docs/background.md: 60). */
  perKeyPerMinute?: number;
  /** Requests per minute per account, all of its keys together (docs/background.md: 120). */
  perAccountPerMinute?: number;
  /** Account creations per client IP per hour. */
  newAccountPerIpPerHour?: number;
  /** Executions running at once per account (docs/background.md: 10). */
  concurrentExecutionsPerAccount?: number;
  /**
   * Requests per minute per client IP to /core/v1, counted before authentication (so an unknown key,
   * which the chain must be asked about, is limited too). Default 600: five times one account's limit.
   */
  perIpPerMinute?: number;
}

/**
 * Whose address is the client's (docs/configuration.md, "Client addresses behind a proxy"). `false`
 * (default): the TCP peer's; X-Forwarded-For is ignored, so it cannot be forged to dodge per-IP limits.
 * A number n: the address n hops back in X-Forwarded-For (n proxies of yours in front). A string: a
 * comma-separated list of your proxies' addresses or subnets ("loopback", "10.0.0.0/8"); the client is the
 * first address in X-Forwarded-For, from the right, that is not one of them. Trusting every hop (`true`)
 * is refused: any client could then name its own address.
 */
export type TrustProxy = false | number | string;

export interface RelayerOptions {
  rpcUrl: string;
  /** Triggers (docs/triggers.md): every field optional. */
  triggers?: TriggerOptions;
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
  /**
   * The URL(s) users reach this service at: its origins (scheme, host and port), e.g.
   * ["https://sigil.example"]; behind a load balancer, the balancer's URL, the same on every instance.
   * Wallet sign-in (SIWE) messages must be made for one of them (SIGIL_PUBLIC_URLS). Default: the URL
   * the relayer listens on (with `localhost` too when it listens on a loopback or every address).
   */
  publicUrls?: string[];
  /** Default 4. */
  gasWallets?: number;
  /**
   * This instance's name among several sharing one database and chain; absent = the single-instance
   * default. It selects the instance's own gas wallets (enclave gasSigner), so instances never share one.
   */
  instanceId?: string;
  /** Gas wallet balance below which a warning is logged (wei); default: ~1000 writes at the current fee. */
  gasLowBalanceWei?: bigint;
  /** Time between two readings of the gas wallets' balances (default 30 s). */
  gasBalancePollMs?: number;
  /** Blocks a registry log must be buried under before it counts as final (reorg safety); default 0. */
  confirmations?: number;
  /**
   * The operator's chains besides the registry's (SIGIL_CHAINS, relayer/chains.ts); an entry with the
   * registry's chain id replaces the default one. Default: none.
   */
  chains?: ChainEndpoint[];
  /** The registry's chain is the embedded anvil (named "embedded" in the chain list, else "registry"). */
  embeddedChain?: boolean;
  /** Registry event polling interval, default 250 ms. */
  pollIntervalMs?: number;
  executor?: {
    poolSize?: number;
    /** Workers beyond poolSize kept free for a newly arriving account (docs/actions.md); default 1. */
    reserveWorkers?: number;
    /** Replace a worker before it runs another account's code (docs/actions.md); default false. */
    isolateAccounts?: boolean;
    limits?: Partial<ExecutorLimits>;
    fetchAllowHosts?: string[];
    /** Actions' fetch policy (docs/actions.md, "fetch"); default: any host, public addresses only. */
    fetch?: FetchPolicy | false;
    /** Default "strict" (docs/actions.md, "The result"). */
    unhandledRejections?: UnhandledRejectionMode;
    /**
     * ES module imports (docs/actions.md, "ES module imports"): default jsDelivr's npm, modules kept
     * under `<dataDir>/modules` unless `storeDir` says otherwise; false disables imports.
     */
    modules?: ModuleOptions | false;
  };
  ipfsGateways?: string[];
  rateLimits?: RateLimitOptions;
  /**
   * postgres://…: idempotency records, rate-limit buckets and execution leases live in this shared
   * PostgreSQL database, so every instance pointed at it sees the same (SIGIL_DATABASE_URL). Absent:
   * the relayer's SQLite file and in-memory limits, as for a single instance.
   */
  databaseUrl?: string;
  /**
   * PostgreSQL: how often this instance vacuums the tables every request churns (relayer/db/
   * hotTableVacuum.ts; default 2 s; 0: leave them to autovacuum).
   */
  hotVacuumMs?: number;
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
  /**
   * Highest tip per gas (wei) of path-A transactions on EIP-1559 chains: the node's
   * eth_maxPriorityFeePerGas is clamped to it (default 2 gwei; relayer/chain/fees.ts).
   */
  maxPriorityFeePerGas?: bigint;
  /** Largest JSON body accepted (default 1 MiB). */
  maxBodyBytes?: number;
  /** Outgoing webhooks (docs/webhooks.md): allowed private addresses, retry schedule, timeouts. */
  webhooks?: WebhookOptions;
  /** The verifiable audit log (docs/audit-log.md): on by default; checkpoints, retention, refusal limit. */
  audit?: AuditOptions;
  /**
   * Bytes of pinned code per account (POST /actions and code fetched from IPFS for it), default
   * 10 MiB; 0 refuses every pin (docs/actions.md, "Pinning: quota and price").
   */
  pinQuotaBytes?: number;
  /**
   * Secret that unlocks the detailed GET /health view (header X-Operator-Token). Unset: /health shows
   * only its status to everyone.
   */
  operatorToken?: string;
  /** Default false: see TrustProxy. */
  trustProxy?: TrustProxy;
  /**
   * How long an API key, master key or PKP id the chain does not know is remembered as unknown (default
   * 5 s). The event that registers it ends the memory at once, whatever the TTL.
   */
  unknownTtlMs?: number;
  /** Most unknown values remembered of each kind (default 10,000). */
  unknownMaxEntries?: number;
}

/** RelayerOptions.triggers. */
export interface TriggerOptions {
  /** Triggers per account (default 50). */
  maxPerAccount?: number;
  /** Largest inbound hook body (default 64 KB), read raw before anything is parsed. */
  hookBodyBytes?: number;
  /** Inbound hook calls per trigger and per source IP per minute (defaults 600 and 300). */
  hookPerTriggerPerMinute?: number;
  hookPerIpPerMinute?: number;
  /**
   * How long an instance trusts what it remembers of the intake (docs/triggers.md, "Security bounds"): a
   * hook's trigger, and a trigger's full queue (default 1 s). Changes on this instance forget both at
   * once; a change or a claimed run on another instance is seen within this time.
   */
  intakeHintMs?: number;
  /** Runs in flight per instance, lease length, poll interval (relayer/triggers/runner.ts). */
  workers?: number;
  leaseMs?: number;
  pollMs?: number;
  /** How often the scheduler looks for due minutes (default 5 s). */
  scheduleTickMs?: number;
  /** How often paused accounts are checked for a balance (default 5 s). */
  resumeCheckMs?: number;
  /** The clock of the scheduler and the runner (tests drive it); default Date.now. */
  clock?: () => number;
  /** Off: no runner and no scheduler on this instance (the API still stores triggers and firings). */
  run?: boolean;
  /**
   * The hooks' own listener (docs/triggers.md, "The hooks' own listener"): `POST /hooks/v1/<id>` also
   * served on this port by a thread of its own, which refuses a flood without the main event loop
   * (0: any free port). Default null: none, the hooks are served on the main port only.
   */
  hooksPort?: number | null;
  /** Its address (default: the relayer's `host`). */
  hooksHost?: string | null;
  /** The URL base the triggers' answers announce for it (a proxy in front); default the address. */
  hooksPublicUrl?: string | null;
}

export interface RelayerConfig {
  rpcUrl: string;
  triggers: Required<Omit<TriggerOptions, "clock">> & { clock: () => number };
  chainId?: number;
  registryAddress: string;
  forwarderAddress: string;
  deployBlock: number;
  dataDir: string;
  databaseUrl?: string;
  hotVacuumMs: number;
  host: string;
  port: number;
  /** Origins (https://host[:port]) from RelayerOptions.publicUrls; null = the URL the relayer listens on. */
  publicOrigins: string[] | null;
  gasWallets: number;
  instanceId: string | undefined;
  gasLowBalanceWei: bigint | undefined;
  gasBalancePollMs: number;
  confirmations: number;
  /**
   * Every chain actions send to and triggers follow: the registry's first, then the operator's
   * (relayerChains). Filled by startRelayer once the registry's chain id is known.
   */
  chains: ChainEndpoint[];
  pollIntervalMs: number;
  executorPoolSize?: number;
  executorReserveWorkers?: number;
  executorIsolateAccounts?: boolean;
  executorLimits?: Partial<ExecutorLimits>;
  executorFetch?: FetchPolicy | false;
  executorUnhandledRejections?: UnhandledRejectionMode;
  executorModules: ModuleOptions | false;
  fetchAllowHosts: string[];
  ipfsGateways: string[];
  rateLimits: Required<RateLimitOptions>;
  rpcTimeoutMs: number;
  receiptTimeoutMs: number;
  syncSend: "auto" | "off";
  maxBatchSize?: number;
  sendConcurrency?: number;
  maxPriorityFeePerGas: bigint;
  maxBodyBytes: number;
  webhooks: WebhookOptions;
  audit: AuditOptions;
  operatorToken: string | null;
  trustProxy: TrustProxy;
  unknownTtlMs: number;
  unknownMaxEntries: number;
  limits: {
    /** Largest code fetched from IPFS (request bodies' limits are in their declarations: routes/schemas.ts). */
    ipfsCodeBytes: number;
    maxPageSize: number;
    /** Pinned bytes per account. */
    pinQuotaBytes: number;
  };
}

export const DEFAULT_PIN_QUOTA_BYTES = 10 * 1024 * 1024;

export const DEFAULT_RATE_LIMITS: Required<RateLimitOptions> = {
  perKeyPerMinute: 60,
  perAccountPerMinute: 120,
  newAccountPerIpPerHour: 10,
  concurrentExecutionsPerAccount: 10,
  perIpPerMinute: 600,
};

/**
 * The chain list (relayer/chains.ts): the registry's chain, at the registry's confirmation depth, then
 * the operator's. Throws ChainsConfigError when the operator's list names a chain twice.
 */
export function relayerChains(opts: RelayerOptions, registryChainId: number): ChainEndpoint[] {
  const registry: ChainEndpoint = {
    chainId: registryChainId,
    name: opts.embeddedChain ? "embedded" : "registry",
    rpcUrl: opts.rpcUrl,
    confirmations: Math.max(0, Math.floor(opts.confirmations ?? 0)),
  };
  return resolveChains(registry, opts.chains ?? []);
}

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
    hotVacuumMs: opts.hotVacuumMs ?? DEFAULT_HOT_VACUUM_MS,
    host: opts.host ?? "127.0.0.1",
    port: opts.port ?? 8000,
    publicOrigins: opts.publicUrls === undefined ? null : publicOrigins(opts.publicUrls),
    gasWallets: Math.max(1, opts.gasWallets ?? 4),
    instanceId: opts.instanceId || undefined,
    gasLowBalanceWei: opts.gasLowBalanceWei,
    gasBalancePollMs: Math.max(100, opts.gasBalancePollMs ?? 30_000),
    confirmations: Math.max(0, Math.floor(opts.confirmations ?? 0)),
    chains: opts.chainId === undefined ? [] : relayerChains(opts, opts.chainId),
    pollIntervalMs: Math.max(20, opts.pollIntervalMs ?? 250),
    executorPoolSize: opts.executor?.poolSize,
    executorReserveWorkers: opts.executor?.reserveWorkers,
    executorIsolateAccounts: opts.executor?.isolateAccounts,
    executorLimits: opts.executor?.limits,
    executorFetch: opts.executor?.fetch,
    executorUnhandledRejections: opts.executor?.unhandledRejections,
    executorModules:
      opts.executor?.modules === false
        ? false
        : { storeDir: path.join(opts.dataDir, "modules"), ...stripUndefined(opts.executor?.modules ?? {}) },
    fetchAllowHosts: opts.executor?.fetchAllowHosts ?? [],
    ipfsGateways: opts.ipfsGateways ?? [],
    rateLimits: { ...DEFAULT_RATE_LIMITS, ...stripUndefined(opts.rateLimits ?? {}) },
    rpcTimeoutMs: opts.rpcTimeoutMs ?? 5_000,
    receiptTimeoutMs: opts.receiptTimeoutMs ?? 60_000,
    syncSend: opts.syncSend ?? "auto",
    maxBatchSize: opts.maxBatchSize,
    sendConcurrency: opts.sendConcurrency,
    maxPriorityFeePerGas: opts.maxPriorityFeePerGas ?? DEFAULT_MAX_PRIORITY_FEE_WEI,
    maxBodyBytes: opts.maxBodyBytes ?? 1024 * 1024,
    webhooks: opts.webhooks ?? {},
    triggers: {
      maxPerAccount: 50,
      hookBodyBytes: 64 * 1024,
      hookPerTriggerPerMinute: 600,
      hookPerIpPerMinute: 300,
      intakeHintMs: 1_000,
      workers: 4,
      leaseMs: 60_000,
      pollMs: 1_000,
      scheduleTickMs: 5_000,
      resumeCheckMs: 5_000,
      run: true,
      hooksPort: null,
      hooksHost: null,
      hooksPublicUrl: null,
      ...stripUndefined(opts.triggers ?? {}),
      clock: opts.triggers?.clock ?? Date.now,
    },
    audit: opts.audit ?? {},
    operatorToken: opts.operatorToken || null,
    trustProxy: checkTrustProxy(opts.trustProxy ?? false),
    unknownTtlMs: Math.max(0, opts.unknownTtlMs ?? 5_000),
    unknownMaxEntries: Math.max(1, opts.unknownMaxEntries ?? 10_000),
    limits: {
      ipfsCodeBytes: 512 * 1024,
      maxPageSize: 100,
      pinQuotaBytes: opts.pinQuotaBytes ?? DEFAULT_PIN_QUOTA_BYTES,
    },
  };
}

/**
 * The origins of the service's public URLs. Each must be an http(s) URL with nothing but a scheme, a
 * host and a port (a trailing "/" is fine): wallet sign-in messages name an origin, not a page.
 */
export function publicOrigins(urls: readonly string[]): string[] {
  if (urls.length === 0)
    throw new Error("RelayerOptions.publicUrls must name at least one URL (or be left out)");
  return urls.map((raw) => {
    const problem = publicUrlProblem(raw);
    if (problem) throw new Error(`RelayerOptions.publicUrls: ${problem}`);
    return new URL(raw).origin;
  });
}

/** Why `raw` is not a public URL of the service, or null when it is one. */
export function publicUrlProblem(raw: string): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return `${JSON.stringify(raw)} is not a URL`;
  }
  if (u.protocol !== "https:" && u.protocol !== "http:")
    return `${JSON.stringify(raw)} is not an http(s) URL`;
  if (u.username || u.password || u.search || u.hash || u.pathname !== "/")
    return `${JSON.stringify(raw)} must be an origin only (scheme, host, port), e.g. https://sigil.example`;
  return null;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function checkTrustProxy(v: TrustProxy): TrustProxy {
  if (v === false) return v;
  if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return v;
  if (typeof v === "string" && v.trim() !== "") return v;
  throw new Error(
    "RelayerOptions.trustProxy must be false, a number of proxy hops, or a list of proxy addresses/subnets (trusting every hop would let any client choose its own address)",
  );
}
