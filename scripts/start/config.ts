/**
 * Configuration of `npm start`: environment variables, optionally a JSON file with the same names as
 * keys (environment wins), validated in one pass so that a newcomer sees every problem at once, each
 * with what was wrong and how to fix it. Nothing here touches the network or the disk beyond reading
 * the optional config file.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { publicUrlProblem } from "../../relayer/config";
import { ChainsConfigError, parseChainsEnv, type ChainEndpoint } from "../../relayer/chains";

/** Every variable `npm start` reads. The README and docs/configuration.md document the same list. */
export const CONFIG_VARIABLES = [
  "SIGIL_DATA_DIR",
  "SIGIL_HOST",
  "PORT",
  "SIGIL_PUBLIC_URLS",
  "SIGIL_HOOKS_PORT",
  "SIGIL_HOOKS_PUBLIC_URL",
  "SIGIL_RPC_URL",
  "SIGIL_ANVIL_PORT",
  "SIGIL_CHAIN_STATE_INTERVAL_SECONDS",
  "SIGIL_CHAIN_ID",
  "SIGIL_CHAINS",
  "SIGIL_DEV_MODE",
  "SIGIL_ROOT_KEY",
  "SIGIL_ROOT_KEY_PROVIDER",
  "SIGIL_DSTACK_ENDPOINT",
  "SIGIL_DEPLOYER_KEY",
  "SIGIL_REGISTRY_ADDRESS",
  "SIGIL_FORWARDER_ADDRESS",
  "SIGIL_DEPLOY_BLOCK",
  "SIGIL_GAS_WALLETS",
  "SIGIL_INSTANCE_ID",
  "SIGIL_GAS_LOW_BALANCE_WEI",
  "SIGIL_CONFIRMATIONS",
  "SIGIL_MAX_PRIORITY_FEE_GWEI",
  "SIGIL_SIGNUP_CREDIT_CENTS",
  "SIGIL_PRICE_WRITE_CENTS",
  "SIGIL_PRICE_EXECUTION_CENTS_PER_SECOND",
  "SIGIL_PRICE_PIN_CENTS_PER_100KB",
  "SIGIL_PIN_QUOTA_BYTES",
  "SIGIL_CHARGE_FLUSH_MS",
  "SIGIL_BILLING_CATCH_UP_MS",
  "SIGIL_EXECUTOR_POOL_SIZE",
  "SIGIL_EXECUTOR_RESERVE_WORKERS",
  "SIGIL_ISOLATE_ACCOUNTS",
  "SIGIL_AUDIT_LOG",
  "SIGIL_AUDIT_RETENTION_DAYS",
  "SIGIL_AUDIT_ANCHOR",
  "SIGIL_AUDIT_ANCHOR_CONTRACT",
  "SIGIL_AUDIT_ANCHOR_EVERY",
  "SIGIL_IPFS_GATEWAYS",
  "SIGIL_FETCH_ALLOW_HOSTS",
  "SIGIL_FETCH",
  "SIGIL_FETCH_ALLOW_ADDRESSES",
  "SIGIL_WEBHOOK_ALLOW_ADDRESSES",
  "SIGIL_UNHANDLED_REJECTIONS",
  "SIGIL_MODULES",
  "SIGIL_MODULE_ORIGIN",
  "SIGIL_RATE_LIMIT_PER_KEY_PER_MINUTE",
  "SIGIL_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE",
  "SIGIL_RATE_LIMIT_NEW_ACCOUNTS_PER_IP_PER_HOUR",
  "SIGIL_MAX_CONCURRENT_EXECUTIONS_PER_ACCOUNT",
  "SIGIL_RATE_LIMIT_PER_IP_PER_MINUTE",
  "SIGIL_TRUST_PROXY",
  "SIGIL_UNKNOWN_KEY_TTL_MS",
  "STRIPE_SECRET_KEY",
  "STRIPE_PUBLISHABLE_KEY",
  "STRIPE_WEBHOOK_SECRET",
  "STRIPE_API_HOST",
  "SIGIL_LOG_LEVEL",
  "SIGIL_LOG_FILE",
  "SIGIL_OPERATOR_TOKEN",
] as const;
export type ConfigVariable = (typeof CONFIG_VARIABLES)[number];

/** Variables whose value is a secret: never printed, never accepted from the config file. */
export const SECRET_VARIABLES: ReadonlySet<ConfigVariable> = new Set([
  "SIGIL_ROOT_KEY",
  "SIGIL_DEPLOYER_KEY",
  "STRIPE_SECRET_KEY",
  "STRIPE_WEBHOOK_SECRET",
  "SIGIL_OPERATOR_TOKEN",
]);

/** Chain id of the embedded anvil chain unless SIGIL_CHAIN_ID says otherwise (anvil's own default). */
export const DEFAULT_DEV_CHAIN_ID = 31337;
/** Sign-up credit granted by the embedded default: enough for the README walk-through (about 10 cents). */
export const DEV_SIGNUP_CREDIT_CENTS = 100;

export interface StripeConfig {
  secretKey: string;
  publishableKey: string;
  /** Without it the webhook endpoint refuses every event (confirm_payment still credits). */
  webhookSecret?: string;
  /** "host:port" of a Stripe-compatible API over plain HTTP (tests and stubs only). */
  apiHost?: string;
}

export interface SigilConfig {
  dataDir: string;
  host: string;
  port: number;
  /**
   * SIGIL_PUBLIC_URLS: the origins users reach the service at (wallet sign-in is bound to them);
   * absent = the URL `npm start` listens on.
   */
  publicUrls?: string[];
  /**
   * SIGIL_HOOKS_PORT: the inbound hooks also on a port of their own, served by a thread of their own
   * (docs/triggers.md, "The hooks' own listener"); absent = the hooks on the main port only.
   */
  hooksPort: number | null;
  /** SIGIL_HOOKS_PUBLIC_URL: the URL base the triggers announce for that port (a proxy in front). */
  hooksPublicUrl: string | null;
  /** The external chain; absent = the embedded anvil chain in the data folder. */
  rpcUrl?: string;
  anvilPort: number;
  /**
   * Embedded chain: the shortest time in seconds between two saves of its state file, made after new
   * blocks only (about what a kill -9 can lose; longer once a save is costly: chainStateSaver.ts).
   */
  chainStateIntervalSeconds: number;
  /** Embedded chain: the id anvil is started with. External chain: the id it must report (optional). */
  chainId?: number;
  devMode: boolean;
  rootKeyHex?: string;
  /** Where the root key comes from: "file" (SIGIL_ROOT_KEY or <data dir>/root.key) or "dstack" (its KMS, in a TDX CVM). */
  rootKeyProvider: "file" | "dstack";
  /** dstack's guest agent (a socket path or http(s) URL); absent = the SDK's own discovery. */
  dstackEndpoint?: string;
  deployerKey?: string;
  /** A deployment chosen by configuration instead of the one remembered in the data folder. */
  deployment?: { registry: string; forwarder: string; deployBlock: number };
  gasWallets: number;
  /** This instance's name among several sharing one database and chain (absent = the single-instance default). */
  instanceId?: string;
  /** Gas wallet balance below which a warning is logged, in wei (relayer default when absent). */
  gasLowBalanceWei?: bigint;
  /** Blocks a registry log must be buried under before it counts as final (reorg safety). */
  confirmations: number;
  /**
   * SIGIL_CHAINS: the chains besides the registry's that actions send to and triggers follow
   * (relayer/chains.ts); the registry's own chain is added by the relayer.
   */
  chains: ChainEndpoint[];
  /** Cap on the tip of path-A transactions on EIP-1559 chains, in wei (relayer default when absent). */
  maxPriorityFeePerGas?: bigint;
  signupCreditCents: number;
  prices: { write_cents?: number; execution_cents_per_second?: number; pin_cents_per_100kb?: number };
  /** Pinned bytes per account (relayer default when absent). */
  pinQuotaBytes?: number;
  /** Write-behind window of usage charges (createBilling's chargeFlushMs); 0 = commit before answering. */
  chargeFlushMs?: number;
  /** Pause between passes of the billing write catch-up (createBilling's writeCatchUpEveryMs); 0 = at start only. */
  writeCatchUpEveryMs?: number;
  executorPoolSize?: number;
  /** Workers kept free for an account arriving while another fills the pool (docs/actions.md); default 1. */
  executorReserveWorkers?: number;
  /** A worker never runs two accounts' code without being replaced (docs/actions.md); default off. */
  isolateAccounts?: boolean;
  /** The verifiable audit log (docs/audit-log.md): on unless false; entries kept this many days (absent: forever). */
  auditLog: boolean;
  auditRetentionDays?: number;
  /** Anchor every Nth audit checkpoint in the AuditAnchor contract (docs/audit-log.md, "Anchoring"). */
  auditAnchor?: { contract: string; every: number };
  ipfsGateways?: string[];
  fetchAllowHosts?: string[];
  /** Actions' fetch: false = off; allowAddresses = non-public addresses the operator allows. */
  fetchEnabled: boolean;
  fetchAllowAddresses?: string[];
  /** Non-public addresses webhook endpoints may resolve to (any entry also allows http://). */
  webhookAllowAddresses?: string[];
  unhandledRejections?: "strict" | "lenient";
  /** ES module imports in actions (docs/actions.md); default on. */
  modulesEnabled: boolean;
  /** Where `pkg@x.y.z` imports resolve; default the reference's CDN (jsDelivr's npm). */
  moduleOrigin?: string;
  rateLimits: {
    perKeyPerMinute?: number;
    perAccountPerMinute?: number;
    newAccountPerIpPerHour?: number;
    concurrentExecutionsPerAccount?: number;
    perIpPerMinute?: number;
  };
  /** RelayerOptions.trustProxy: false, a number of proxy hops, or a list of proxy addresses/subnets. */
  trustProxy: false | number | string;
  unknownTtlMs?: number;
  stripe?: StripeConfig;
  /** Unlocks GET /health's detailed view (header X-Operator-Token); unset = status only. */
  operatorToken?: string;
  logLevel: string;
  /** Where the structured (pino) log goes: a file path, or "-" for stdout. */
  logFile: string;
  /** Where each value came from, for the start-up banner ("env", "file", "default"). */
  sources: Partial<Record<ConfigVariable, "env" | "file">>;
  configFile?: string;
}

/** Every problem found, each a sentence that says what is wrong and how to fix it. */
export class ConfigError extends Error {
  readonly code = "invalid_configuration";
  constructor(readonly problems: string[]) {
    super(`Sigil cannot start: the configuration is invalid.\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

const CHAINS_EXAMPLE = `[{"chain_id":84532,"name":"base-sepolia","rpc_url":"https://sepolia.base.org","confirmations":3}]`;

/** SIGIL_CHAINS (relayer/chains.ts), each problem a sentence with the fix; absent: no extra chain. */
function parseChains(raw: string | undefined, problems: string[]): ChainEndpoint[] {
  let chains: ChainEndpoint[];
  try {
    chains = parseChainsEnv(raw);
  } catch (e) {
    if (!(e instanceof ChainsConfigError)) throw e;
    problems.push(`${e.message} Give a JSON array of chains, e.g. ${CHAINS_EXAMPLE}.`);
    return [];
  }
  const seen = new Set<number>();
  for (const c of chains) {
    if (seen.has(c.chainId))
      problems.push(
        `SIGIL_CHAINS names chain ${c.chainId} twice: a chain has one RPC URL and one confirmation depth; keep one entry.`,
      );
    seen.add(c.chainId);
  }
  return chains;
}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
const HEX32 = /^(0x)?[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

type Raw = Partial<Record<ConfigVariable, string>>;

/**
 * Reads the optional config file: `SIGIL_CONFIG` if set (it must exist), else `sigil.config.json` in
 * `cwd` if present. Keys are the variable names above; values are strings, numbers or booleans.
 */
export function readConfigFile(
  env: NodeJS.ProcessEnv,
  cwd: string,
  problems: string[],
): { file?: string; values: Raw } {
  const explicit = env.SIGIL_CONFIG;
  const file = explicit ? path.resolve(cwd, explicit) : path.join(cwd, "sigil.config.json");
  if (!fs.existsSync(file)) {
    if (explicit)
      problems.push(`SIGIL_CONFIG points to ${file}, which does not exist. Create it or unset SIGIL_CONFIG.`);
    return { values: {} };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    problems.push(`${file} is not valid JSON (${(e as Error).message}). Fix it or remove it.`);
    return { file, values: {} };
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    problems.push(`${file} must hold a JSON object whose keys are variable names such as "PORT".`);
    return { file, values: {} };
  }
  const values: Raw = {};
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (!(CONFIG_VARIABLES as readonly string[]).includes(key)) {
      problems.push(`${file}: unknown key "${key}". Known keys: ${CONFIG_VARIABLES.join(", ")}.`);
      continue;
    }
    if (SECRET_VARIABLES.has(key as ConfigVariable)) {
      problems.push(
        `${file}: "${key}" is a secret and is only read from the environment. Remove it from the file.`,
      );
      continue;
    }
    if (Array.isArray(value) && value.every((v) => typeof v === "string"))
      values[key as ConfigVariable] = value.join(",");
    else if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
      values[key as ConfigVariable] = String(value);
    else problems.push(`${file}: "${key}" must be a string, number or boolean.`);
  }
  return { file, values };
}

/** Validates the environment (and config file) into a SigilConfig, or throws ConfigError listing every problem. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): SigilConfig {
  const problems: string[] = [];
  const { file, values: fileValues } = readConfigFile(env, cwd, problems);
  const sources: SigilConfig["sources"] = {};
  const get = (name: ConfigVariable): string | undefined => {
    const fromEnv = env[name];
    if (fromEnv !== undefined && fromEnv.trim() !== "") {
      sources[name] = "env";
      return fromEnv.trim();
    }
    if (fileValues[name] !== undefined && fileValues[name]!.trim() !== "") {
      sources[name] = "file";
      return fileValues[name]!.trim();
    }
    return undefined;
  };
  const int = (name: ConfigVariable, min: number, max: number, hint: string): number | undefined => {
    const raw = get(name);
    if (raw === undefined) return undefined;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(
        `${name}=${JSON.stringify(raw)} is not valid: ${hint} (an integer from ${min} to ${max}).`,
      );
      return undefined;
    }
    return Number(raw);
  };
  const bool = (name: ConfigVariable): boolean | undefined => {
    const raw = get(name);
    if (raw === undefined) return undefined;
    if (/^(1|true|yes|on)$/i.test(raw)) return true;
    if (/^(0|false|no|off)$/i.test(raw)) return false;
    problems.push(`${name}=${JSON.stringify(raw)} is not valid: use true or false.`);
    return undefined;
  };
  const list = (name: ConfigVariable): string[] | undefined => {
    const raw = get(name);
    if (raw === undefined) return undefined;
    return raw
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  };
  const hexKey = (name: ConfigVariable, what: string): string | undefined => {
    const raw = get(name);
    if (raw === undefined) return undefined;
    if (!HEX32.test(raw)) {
      // Never echo the value: it is a secret, and a near-miss is still most of a key.
      problems.push(
        `${name} is not valid: it must be ${what} written as 64 hex digits (optionally 0x-prefixed).`,
      );
      return undefined;
    }
    return raw.startsWith("0x") ? raw : `0x${raw}`;
  };

  const dataDir = path.resolve(cwd, get("SIGIL_DATA_DIR") ?? ".sigil");
  const host = get("SIGIL_HOST") ?? "127.0.0.1";
  const port = int("PORT", 0, 65535, "the HTTP port of the API; 0 picks a free one") ?? 8000;
  const publicUrls = list("SIGIL_PUBLIC_URLS");
  const hooksPort =
    int("SIGIL_HOOKS_PORT", 0, 65535, "the inbound hooks' own port; 0 picks a free one; unset: none") ?? null;
  const hooksPublicUrl = get("SIGIL_HOOKS_PUBLIC_URL")?.trim() || null;
  if (hooksPublicUrl !== null && !/^https?:\/\/[^/\s]+\/?$/.test(hooksPublicUrl))
    problems.push(
      `SIGIL_HOOKS_PUBLIC_URL: "${hooksPublicUrl}" is not an origin. Give the URL senders reach the hooks' port at, e.g. https://hooks.sigil.example.`,
    );
  for (const u of publicUrls ?? []) {
    const problem = publicUrlProblem(u);
    if (problem)
      problems.push(
        `SIGIL_PUBLIC_URLS: ${problem}. Give the URL(s) users open the service at, comma-separated (e.g. https://sigil.example; behind a load balancer, the balancer's URL).`,
      );
  }
  const anvilPort =
    int("SIGIL_ANVIL_PORT", 0, 65535, "the port of the embedded chain; 0 picks a free one") ?? 8545;
  const chainStateIntervalSeconds =
    int(
      "SIGIL_CHAIN_STATE_INTERVAL_SECONDS",
      1,
      86_400,
      "the shortest time in seconds between saves of the embedded chain's state (about the most a kill -9 loses)",
    ) ?? 2;
  const chainId = int("SIGIL_CHAIN_ID", 1, 2 ** 32 - 1, "the chain id");

  const rpcUrl = get("SIGIL_RPC_URL");
  if (rpcUrl !== undefined) {
    let ok = false;
    try {
      ok = ["http:", "https:", "ws:", "wss:"].includes(new URL(rpcUrl).protocol);
    } catch {
      ok = false;
    }
    if (!ok) problems.push(`SIGIL_RPC_URL=${JSON.stringify(rpcUrl)} is not an http(s) or ws(s) URL.`);
  }
  // Dev mode (generated root key, funded gas wallets, sign-up credit) is the embedded default's mode;
  // pointing at an external chain turns it off unless asked for explicitly.
  const devMode = bool("SIGIL_DEV_MODE") ?? rpcUrl === undefined;

  const rootKeyProviderRaw = get("SIGIL_ROOT_KEY_PROVIDER") ?? "file";
  const rootKeyProvider = rootKeyProviderRaw === "dstack" ? "dstack" : "file";
  if (rootKeyProviderRaw !== "file" && rootKeyProviderRaw !== "dstack")
    problems.push(
      `SIGIL_ROOT_KEY_PROVIDER=${JSON.stringify(rootKeyProviderRaw)} is not valid: use file (the default: SIGIL_ROOT_KEY or ` +
        `<data dir>/root.key) or dstack (dstack's KMS, inside a TDX CVM; docs/enclave.md).`,
    );
  const dstackEndpoint = get("SIGIL_DSTACK_ENDPOINT");
  if (dstackEndpoint !== undefined && rootKeyProviderRaw !== "dstack")
    problems.push(
      `SIGIL_DSTACK_ENDPOINT is set but SIGIL_ROOT_KEY_PROVIDER is not dstack: set both, or neither.`,
    );
  if (dstackEndpoint !== undefined && !/^(\/|https?:\/\/)/.test(dstackEndpoint))
    problems.push(
      `SIGIL_DSTACK_ENDPOINT=${JSON.stringify(dstackEndpoint)} is not valid: the guest agent's Unix socket (an absolute path such as /var/run/dstack.sock) or an http(s) URL.`,
    );
  // With dstack the KMS gives the key: a second source would be a second, unattested key.
  if (rootKeyProviderRaw === "dstack" && get("SIGIL_ROOT_KEY") !== undefined)
    problems.push(
      `SIGIL_ROOT_KEY is set but SIGIL_ROOT_KEY_PROVIDER is dstack, whose KMS gives the root key: unset SIGIL_ROOT_KEY.`,
    );

  const rootKeyHex = hexKey("SIGIL_ROOT_KEY", "the 32-byte root key");
  // (An invalid SIGIL_ROOT_KEY was reported just above; this is about none at all.)
  if (
    rootKeyProvider === "file" &&
    !devMode &&
    get("SIGIL_ROOT_KEY") === undefined &&
    !fs.existsSync(path.join(dataDir, "root.key"))
  )
    problems.push(
      `No root key: outside dev mode Sigil never generates one. Provide it in SIGIL_ROOT_KEY (64 hex digits, e.g. from ` +
        `\`node -e "console.log(require('crypto').randomBytes(32).toString('hex'))"\` kept in your secret manager), ` +
        `or place it in ${path.join(dataDir, "root.key")} (file mode 0600), or set SIGIL_DEV_MODE=true for a throwaway dev instance.`,
    );
  const deployerKey = hexKey(
    "SIGIL_DEPLOYER_KEY",
    "the private key of the account that deploys the contracts",
  );

  const registry = get("SIGIL_REGISTRY_ADDRESS");
  const forwarder = get("SIGIL_FORWARDER_ADDRESS");
  const deployBlock = int(
    "SIGIL_DEPLOY_BLOCK",
    0,
    Number.MAX_SAFE_INTEGER,
    "the block the registry was deployed in",
  );
  let deployment: SigilConfig["deployment"];
  if (registry !== undefined || forwarder !== undefined) {
    if (registry === undefined || !ADDRESS.test(registry))
      problems.push(
        `SIGIL_REGISTRY_ADDRESS must be a 0x-prefixed 20-byte address when SIGIL_FORWARDER_ADDRESS is set.`,
      );
    if (forwarder === undefined || !ADDRESS.test(forwarder))
      problems.push(
        `SIGIL_FORWARDER_ADDRESS must be a 0x-prefixed 20-byte address when SIGIL_REGISTRY_ADDRESS is set.`,
      );
    if (deployBlock === undefined && get("SIGIL_DEPLOY_BLOCK") === undefined)
      problems.push(
        `SIGIL_DEPLOY_BLOCK is required with SIGIL_REGISTRY_ADDRESS (the block the registry was deployed in).`,
      );
    if (
      registry &&
      forwarder &&
      ADDRESS.test(registry) &&
      ADDRESS.test(forwarder) &&
      deployBlock !== undefined
    )
      deployment = { registry, forwarder, deployBlock };
  }

  const gasWallets = int("SIGIL_GAS_WALLETS", 1, 64, "how many gas wallets send transactions") ?? 4;
  const instanceId = get("SIGIL_INSTANCE_ID");
  if (instanceId !== undefined && !/^[a-z0-9][a-z0-9-]{0,31}$/.test(instanceId))
    problems.push(
      `SIGIL_INSTANCE_ID must be 1 to 32 lowercase letters, digits or dashes (got ${JSON.stringify(instanceId)}): it names this instance among several sharing one database`,
    );
  const rawLowBalance = get("SIGIL_GAS_LOW_BALANCE_WEI");
  let gasLowBalanceWei: bigint | undefined;
  if (rawLowBalance !== undefined) {
    if (/^\d{1,40}$/.test(rawLowBalance)) gasLowBalanceWei = BigInt(rawLowBalance);
    else
      problems.push(
        `SIGIL_GAS_LOW_BALANCE_WEI=${JSON.stringify(rawLowBalance)} is not valid: the gas wallet balance below which a warning is logged, in wei (a whole number, e.g. 500000000000000000 for 0.5 ETH).`,
      );
  }
  const confirmations =
    int(
      "SIGIL_CONFIRMATIONS",
      0,
      1_000,
      "how many blocks a registry log must be buried under before it counts as final",
    ) ?? 0;
  const chains = parseChains(get("SIGIL_CHAINS"), problems);
  const maxPriorityFeePerGas = gweiToWei(get("SIGIL_MAX_PRIORITY_FEE_GWEI"), problems);
  const signupCreditCents =
    int("SIGIL_SIGNUP_CREDIT_CENTS", 0, 1_000_000, "credit granted to each new account") ??
    (devMode ? DEV_SIGNUP_CREDIT_CENTS : 0);
  const prices = {
    write_cents: int("SIGIL_PRICE_WRITE_CENTS", 0, 1_000_000, "the price of a management write in cents"),
    execution_cents_per_second: int(
      "SIGIL_PRICE_EXECUTION_CENTS_PER_SECOND",
      0,
      1_000_000,
      "the price of an execution per started second in cents",
    ),
    pin_cents_per_100kb: int(
      "SIGIL_PRICE_PIN_CENTS_PER_100KB",
      0,
      1_000_000,
      "the price of a pin per started 100 KB in cents",
    ),
  };
  const pinQuotaBytes = int("SIGIL_PIN_QUOTA_BYTES", 0, 2 ** 40, "the pinned bytes allowed per account");
  const chargeFlushMs = int(
    "SIGIL_CHARGE_FLUSH_MS",
    0,
    60_000,
    "how long usage charges may wait in memory before they are committed; 0 commits each before answering",
  );
  const writeCatchUpEveryMs = int(
    "SIGIL_BILLING_CATCH_UP_MS",
    0,
    86_400_000,
    "the pause between two passes of the billing catch-up of writes whose charge was lost; 0 runs it at start only",
  );
  const executorPoolSize = int("SIGIL_EXECUTOR_POOL_SIZE", 1, 256, "the number of SES workers");
  const executorReserveWorkers = int(
    "SIGIL_EXECUTOR_RESERVE_WORKERS",
    0,
    64,
    "the number of workers kept free for an account arriving while another fills the pool",
  );
  const isolateAccounts = bool("SIGIL_ISOLATE_ACCOUNTS");
  const auditLog = bool("SIGIL_AUDIT_LOG") ?? true;
  const auditRetentionDays = int(
    "SIGIL_AUDIT_RETENTION_DAYS",
    1,
    36_500,
    "the number of days audit-log entries are kept (unset: forever)",
  );
  let auditAnchor: { contract: string; every: number } | undefined;
  if (bool("SIGIL_AUDIT_ANCHOR") === true) {
    const contract = get("SIGIL_AUDIT_ANCHOR_CONTRACT");
    if (contract === undefined || !ADDRESS.test(contract))
      problems.push(
        "SIGIL_AUDIT_ANCHOR_CONTRACT: set it to the AuditAnchor contract's address (0x and 40 hex digits) when SIGIL_AUDIT_ANCHOR is true.",
      );
    else
      auditAnchor = {
        contract,
        every:
          int("SIGIL_AUDIT_ANCHOR_EVERY", 1, 1_000_000, "anchor every this many checkpoints of an account") ??
          1,
      };
  }
  const ipfsGateways = list("SIGIL_IPFS_GATEWAYS");
  for (const g of ipfsGateways ?? []) {
    try {
      new URL(g);
    } catch {
      problems.push(
        `SIGIL_IPFS_GATEWAYS: ${JSON.stringify(g)} is not a URL (use a comma-separated list of gateway base URLs).`,
      );
    }
  }
  const fetchAllowHosts = list("SIGIL_FETCH_ALLOW_HOSTS");
  const fetchEnabled = bool("SIGIL_FETCH") ?? true;
  const fetchAllowAddresses = list("SIGIL_FETCH_ALLOW_ADDRESSES");
  const webhookAllowAddresses = list("SIGIL_WEBHOOK_ALLOW_ADDRESSES");
  for (const [name, entries] of [
    ["SIGIL_FETCH_ALLOW_ADDRESSES", fetchAllowAddresses],
    ["SIGIL_WEBHOOK_ALLOW_ADDRESSES", webhookAllowAddresses],
  ] as const)
    for (const a of entries ?? []) {
      const [address, prefix, extra] = a.split("/");
      const family = net.isIP(address);
      const max = family === 4 ? 32 : 128;
      const p = prefix === undefined ? max : Number(prefix);
      if (family === 0 || extra !== undefined || !Number.isInteger(p) || p < 0 || p > max)
        problems.push(
          `${name}: ${JSON.stringify(a)} is not an IP address or CIDR range (e.g. 10.0.0.0/8, ::1).`,
        );
    }
  const modulesEnabled = bool("SIGIL_MODULES") ?? true;
  const moduleOrigin = get("SIGIL_MODULE_ORIGIN");
  if (moduleOrigin !== undefined) {
    let u: URL | undefined;
    try {
      u = new URL(moduleOrigin);
    } catch {
      u = undefined;
    }
    if (
      u === undefined ||
      (u.protocol !== "https:" && u.protocol !== "http:") ||
      u.search ||
      u.hash ||
      u.username
    )
      problems.push(
        `SIGIL_MODULE_ORIGIN: ${JSON.stringify(moduleOrigin)} is not an http(s) URL without credentials, query or fragment (e.g. https://cdn.jsdelivr.net/npm/).`,
      );
  }
  const unhandledRejections = get("SIGIL_UNHANDLED_REJECTIONS");
  if (
    unhandledRejections !== undefined &&
    unhandledRejections !== "strict" &&
    unhandledRejections !== "lenient"
  )
    problems.push(
      `SIGIL_UNHANDLED_REJECTIONS must be "strict" or "lenient", not ${JSON.stringify(unhandledRejections)}.`,
    );
  const rateLimits = {
    perKeyPerMinute: int(
      "SIGIL_RATE_LIMIT_PER_KEY_PER_MINUTE",
      1,
      1_000_000,
      "requests per usage key per minute",
    ),
    perAccountPerMinute: int(
      "SIGIL_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE",
      1,
      1_000_000,
      "requests per account per minute",
    ),
    newAccountPerIpPerHour: int(
      "SIGIL_RATE_LIMIT_NEW_ACCOUNTS_PER_IP_PER_HOUR",
      1,
      1_000_000,
      "accounts created per IP per hour",
    ),
    perIpPerMinute: int(
      "SIGIL_RATE_LIMIT_PER_IP_PER_MINUTE",
      1,
      10_000_000,
      "requests per client IP per minute, counted before authentication",
    ),
    concurrentExecutionsPerAccount: int(
      "SIGIL_MAX_CONCURRENT_EXECUTIONS_PER_ACCOUNT",
      1,
      10_000,
      "executions running at once per account",
    ),
  };

  const trustProxyRaw = get("SIGIL_TRUST_PROXY")?.trim();
  let trustProxy: false | number | string = false;
  if (trustProxyRaw === "true") {
    problems.push(
      "SIGIL_TRUST_PROXY=true would let any client choose its own address (X-Forwarded-For) and dodge the per-IP limits: give the number of proxies in front of Sigil, or their addresses/subnets (e.g. loopback, 10.0.0.0/8).",
    );
  } else if (trustProxyRaw !== undefined && trustProxyRaw !== "" && trustProxyRaw !== "false") {
    trustProxy = /^\d+$/.test(trustProxyRaw) ? Number(trustProxyRaw) : trustProxyRaw;
  }
  const unknownTtlMs = int(
    "SIGIL_UNKNOWN_KEY_TTL_MS",
    0,
    3_600_000,
    "how long an unknown API key or PKP id is remembered, in ms",
  );

  const stripeSecret = get("STRIPE_SECRET_KEY");
  const stripePublishable = get("STRIPE_PUBLISHABLE_KEY");
  const stripeWebhook = get("STRIPE_WEBHOOK_SECRET");
  const stripeHost = get("STRIPE_API_HOST");
  let stripe: StripeConfig | undefined;
  if (stripeSecret !== undefined || stripePublishable !== undefined || stripeWebhook !== undefined) {
    const before = problems.length;
    if (stripeSecret === undefined || stripePublishable === undefined)
      problems.push(
        `Stripe is half configured: set both STRIPE_SECRET_KEY and STRIPE_PUBLISHABLE_KEY (or unset every STRIPE_ variable to use the simulated processor).`,
      );
    if (stripeSecret !== undefined && !/^(sk|rk)_/.test(stripeSecret))
      problems.push(`STRIPE_SECRET_KEY must start with sk_ or rk_ (a Stripe secret or restricted key).`);
    if (stripePublishable !== undefined && !/^pk_/.test(stripePublishable))
      problems.push(`STRIPE_PUBLISHABLE_KEY must start with pk_.`);
    if (stripeWebhook !== undefined && !/^whsec_/.test(stripeWebhook))
      problems.push(
        `STRIPE_WEBHOOK_SECRET must start with whsec_ (the signing secret of your webhook endpoint).`,
      );
    if (problems.length === before)
      stripe = {
        secretKey: stripeSecret!,
        publishableKey: stripePublishable!,
        webhookSecret: stripeWebhook,
        apiHost: stripeHost,
      };
  }
  if (stripeHost !== undefined && !/^[\w.-]+:\d+$/.test(stripeHost))
    problems.push(
      `STRIPE_API_HOST=${JSON.stringify(stripeHost)} must be host:port (a local Stripe-compatible stub).`,
    );

  const logLevel = get("SIGIL_LOG_LEVEL") ?? "info";
  if (!LOG_LEVELS.includes(logLevel))
    problems.push(`SIGIL_LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}.`);

  const logFileRaw = get("SIGIL_LOG_FILE");
  const logFile = logFileRaw === "-" ? "-" : path.resolve(cwd, logFileRaw ?? path.join(dataDir, "sigil.log"));

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    dataDir,
    host,
    port,
    publicUrls,
    hooksPort,
    hooksPublicUrl,
    rpcUrl,
    anvilPort,
    chainStateIntervalSeconds,
    chainId: chainId ?? (rpcUrl === undefined ? DEFAULT_DEV_CHAIN_ID : undefined),
    devMode,
    rootKeyHex,
    rootKeyProvider,
    dstackEndpoint,
    deployerKey,
    deployment,
    gasWallets,
    instanceId,
    gasLowBalanceWei,
    confirmations,
    chains,
    maxPriorityFeePerGas,
    signupCreditCents,
    prices,
    pinQuotaBytes,
    chargeFlushMs,
    writeCatchUpEveryMs,
    executorPoolSize,
    executorReserveWorkers,
    isolateAccounts,
    auditLog,
    auditRetentionDays,
    auditAnchor,
    ipfsGateways,
    fetchAllowHosts,
    fetchEnabled,
    fetchAllowAddresses,
    webhookAllowAddresses,
    unhandledRejections: unhandledRejections as SigilConfig["unhandledRejections"],
    modulesEnabled,
    moduleOrigin,
    rateLimits,
    trustProxy,
    unknownTtlMs,
    stripe,
    operatorToken: get("SIGIL_OPERATOR_TOKEN") || undefined,
    logLevel,
    logFile,
    sources,
    configFile: file && fs.existsSync(file) ? file : undefined,
  };
}

/** Most gwei accepted for SIGIL_MAX_PRIORITY_FEE_GWEI: far above any tip a sane operator pays. */
const MAX_PRIORITY_FEE_GWEI_LIMIT = 100_000n;

/**
 * SIGIL_MAX_PRIORITY_FEE_GWEI: a decimal number of gwei with at most 9 decimals (1 wei = 0.000000001
 * gwei), e.g. "2" or "0.05"; returned in wei.
 */
function gweiToWei(raw: string | undefined, problems: string[]): bigint | undefined {
  if (raw === undefined) return undefined;
  const m = /^(\d{1,12})(?:\.(\d{1,9}))?$/.exec(raw);
  const wei = m ? BigInt(m[1]) * 10n ** 9n + BigInt((m[2] ?? "").padEnd(9, "0")) : null;
  if (wei === null || wei > MAX_PRIORITY_FEE_GWEI_LIMIT * 10n ** 9n) {
    problems.push(
      `SIGIL_MAX_PRIORITY_FEE_GWEI=${JSON.stringify(raw)} is not valid: the highest tip per gas paid by path-A ` +
        `transactions, in gwei (a number from 0 to ${MAX_PRIORITY_FEE_GWEI_LIMIT} with at most 9 decimals, e.g. 2 or 0.05).`,
    );
    return undefined;
  }
  return wei;
}
