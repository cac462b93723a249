/**
 * `npm run audit:billing`: checks the ledger's write charges against the chain (relayer/billing/audit.ts;
 * docs/billing.md, "Auditing write charges"). Same configuration as `npm start` (environment variables or
 * sigil.config.json: the data folder, the chain, the deployment), plus flags:
 *
 *   --ledger <file>          the ledger (default <data dir>/ledger.sqlite)
 *   --database-url <url>     the shared PostgreSQL ledger of several instances (default SIGIL_DATABASE_URL;
 *                            when set, --ledger is not read)
 *   --rpc-url <url>          the chain (default SIGIL_RPC_URL, else the embedded chain of a running npm start)
 *   --from-block <n>         first block (default the deployment block)
 *   --to-block <n>           last block (default the chain's head)
 *   --gas-wallets <a,b,...>  the relayer's gas wallet addresses (default: derived from the root key, as npm
 *                            start does, for SIGIL_GAS_WALLETS wallets of SIGIL_INSTANCE_ID; with several
 *                            instances on one ledger, list every instance's wallets here)
 *   --all-senders            count forward requests whoever sent them (no gas wallet filter)
 *   --settle-ms <n>          grace for charges of just-mined writes (default 2000; 0 for a stopped service)
 *
 * Exit codes: 0 every write charged exactly once and nothing else; 1 differences (printed as a table);
 * 2 the audit could not run (configuration, chain or ledger unreadable).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { JsonRpcProvider } from "ethers";
import { instanceGasAddresses } from "./start/funding";
import { Enclave } from "../enclave";
import { isPostgresUrl } from "../relayer/db";
import { auditWriteCharges, formatDifferences, type AuditReport } from "../relayer/billing/audit";
import { ConfigError, loadConfig } from "./start/config";
import { readDeployment } from "./start/deployment";
import { DATA_FILES } from "./start/service";

export class UsageError extends Error {}

export interface AuditFlags {
  ledger?: string;
  databaseUrl?: string;
  rpcUrl?: string;
  fromBlock?: number;
  toBlock?: number;
  gasWallets?: string[];
  allSenders: boolean;
  settleMs?: number;
}

export function parseFlags(argv: readonly string[]): AuditFlags {
  const flags: AuditFlags = { allSenders: false };
  const value = (i: number, name: string) => {
    const v = argv[i + 1];
    if (v === undefined || v.startsWith("--")) throw new UsageError(`${name} needs a value`);
    return v;
  };
  const block = (v: string, name: string) => {
    if (!/^[0-9]+$/.test(v)) throw new UsageError(`${name} must be a block number, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--all-senders") flags.allSenders = true;
    else if (a === "--ledger") flags.ledger = value(i++, a);
    else if (a === "--database-url") {
      flags.databaseUrl = value(i++, a);
      if (!isPostgresUrl(flags.databaseUrl))
        throw new UsageError("--database-url must start with postgres:// or postgresql://");
    } else if (a === "--rpc-url") flags.rpcUrl = value(i++, a);
    else if (a === "--from-block") flags.fromBlock = block(value(i++, a), a);
    else if (a === "--to-block") flags.toBlock = block(value(i++, a), a);
    else if (a === "--settle-ms") flags.settleMs = block(value(i++, a), a);
    else if (a === "--gas-wallets") {
      flags.gasWallets = value(i++, a)
        .split(",")
        .map((s) => s.trim());
      const bad = flags.gasWallets.find((w) => !/^0x[0-9a-fA-F]{40}$/.test(w));
      if (bad !== undefined) throw new UsageError(`--gas-wallets: ${JSON.stringify(bad)} is not an address`);
    } else throw new UsageError(`unknown argument ${JSON.stringify(a)} (see docs/billing.md)`);
  }
  return flags;
}

/** Resolves the configuration and flags, runs the audit, prints it; returns the exit code. */
export async function main(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
  out: (s: string) => void,
): Promise<number> {
  let report: AuditReport;
  try {
    const flags = parseFlags(argv);
    const config = loadConfig(env, cwd);
    const remembered = config.deployment ?? readDeployment(path.join(config.dataDir, DATA_FILES.deployment));
    if (!remembered)
      throw new UsageError(
        `no deployment: ${path.join(config.dataDir, DATA_FILES.deployment)} does not exist and SIGIL_REGISTRY_ADDRESS is not set`,
      );
    const databaseUrl = flags.databaseUrl ?? (env.SIGIL_DATABASE_URL?.trim() || undefined);
    if (databaseUrl !== undefined && !isPostgresUrl(databaseUrl))
      throw new UsageError("SIGIL_DATABASE_URL must start with postgres:// or postgresql://");
    const ledgerPath = flags.ledger ?? path.join(config.dataDir, DATA_FILES.ledger);
    if (databaseUrl === undefined && !fs.existsSync(ledgerPath))
      throw new UsageError(`no ledger at ${ledgerPath} (see --ledger, --database-url)`);
    const rpcUrl = flags.rpcUrl ?? config.rpcUrl ?? `http://127.0.0.1:${config.anvilPort}`;
    let gasWallets: string[] | null = null;
    if (flags.gasWallets) gasWallets = flags.gasWallets;
    else if (!flags.allSenders) {
      // The addresses npm start derives; only they are read from the root key, which never leaves the enclave.
      const rootKeyFile = path.join(config.dataDir, DATA_FILES.rootKey);
      if (config.rootKeyProvider === "file" && config.rootKeyHex === undefined && !fs.existsSync(rootKeyFile))
        throw new UsageError("cannot tell the relayer's gas wallets: give --gas-wallets, or --all-senders");
      const enclave = await Enclave.open({
        provider: config.rootKeyProvider,
        dstack: { endpoint: config.dstackEndpoint },
        rootKeyHex: config.rootKeyHex,
        rootKeyFile,
        devMode: false,
      });
      gasWallets = instanceGasAddresses(enclave, config.gasWallets, config.instanceId);
    }
    const provider = new JsonRpcProvider(rpcUrl, undefined, { staticNetwork: true, batchMaxCount: 1 });
    try {
      report = await auditWriteCharges({
        rpc: provider,
        ledgerPath,
        databaseUrl,
        registry: remembered.registry,
        forwarder: remembered.forwarder,
        chainId: config.chainId,
        fromBlock: flags.fromBlock ?? remembered.deployBlock,
        toBlock: flags.toBlock,
        gasWallets,
        settleMs: flags.settleMs,
      });
    } finally {
      provider.destroy();
    }
  } catch (e) {
    const msg = e instanceof ConfigError || e instanceof UsageError ? e.message : `${(e as Error).message}`;
    out(`audit:billing could not run: ${msg}`);
    return 2;
  }
  out(
    `chain ${report.chainId}, forwarder ${report.forwarder}, blocks ${report.fromBlock}..${report.toBlock}: ` +
      `${report.forwardRequests} forward requests, ${report.billableWrites} billable writes, ` +
      `${report.writeCharges} write charges in the ledger`,
  );
  if (report.differences.length === 0) {
    out("clean: every write was charged exactly once, and nothing else was charged as a write");
    return 0;
  }
  out(`${report.differences.length} difference(s):`);
  out(formatDifferences(report.differences));
  return 1;
}

if (require.main === module) {
  main(process.argv.slice(2), process.env, process.cwd(), (s) => process.stdout.write(s + "\n")).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`audit:billing failed: ${(e as Error).stack}\n`);
      process.exit(2);
    },
  );
}
