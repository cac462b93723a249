/**
 * Several Sigil instances on one machine, in the production shape (docs/deployment.md): one PostgreSQL,
 * one chain, one deployment, N instance processes with their own ids, ports and data folders, and a
 * round-robin front. Brought up in dependency order and down in reverse: the front first (no new
 * requests), then the instances (each commits its charges), then the database and the chain.
 *
 * Layout of the cluster's data folder:
 *   root.key          the one dev root key every instance derives from (each instance's
 *                     <id>/root.key links to it; outside dev mode give SIGIL_ROOT_KEY instead)
 *   chain-state.json  the embedded chain (anvil), as `npm start` keeps it
 *   deployment.json   the registry and forwarder, deployed once
 *   postgres/         the database server's files
 *   instances/<id>/   each instance's own data folder (log, relayer files, content store)
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { ethers } from "ethers";
import { Enclave } from "../../enclave";
import { openDataLayer } from "../../relayer/db";
import { deploySigil } from "../deploy";
import { startAnvil, type RunningAnvil } from "../start/anvil";
import { describeRpc, ensureDeployment, type Deployment } from "../start/deployment";
import { DEV_ACCOUNT_KEY } from "../start/funding";
import { DATA_FILES } from "../start/service";
import { startBalancer, type RunningBalancer } from "./balancer";
import { startInstance, type RunningInstance } from "./instance";
import { startClusterPostgres, type ClusterPostgres } from "./postgres";

export interface ClusterOptions {
  dataDir: string;
  /** How many instance processes; default 3. */
  instances?: number;
  /** The front listens here and instance i on basePort + i (0 = free ports everywhere). */
  basePort: number;
  host?: string;
  /** The embedded chain's port (0 = a free one). */
  anvilPort: number;
  chainId?: number;
  /** The database server's port (0 = a free one). */
  postgresPort?: number;
  /** Extra environment for every instance (prices, limits, SIGIL_CHARGE_FLUSH_MS …). */
  env?: NodeJS.ProcessEnv;
  step?: (message: string) => void;
  warn?: (message: string) => void;
}

export interface Cluster {
  url: string;
  rpcUrl: string;
  chainId: number;
  deployment: Deployment;
  freshDeployment: boolean;
  databaseUrl: string;
  dataDir: string;
  instances: RunningInstance[];
  balancer: RunningBalancer;
  /** Starts instance `id` again (after a crash or a stop): same id, port, data folder and wallets. */
  restart(id: string): Promise<RunningInstance>;
  /** Resolves when the chain or the database exits on its own. */
  dependencyExited: Promise<string>;
  close(): Promise<void>;
}

export const instanceIdOf = (i: number) => `instance-${i + 1}`;

export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const step = opts.step ?? (() => {});
  const warn = opts.warn ?? (() => {});
  const host = opts.host ?? "127.0.0.1";
  const count = opts.instances ?? 3;
  const chainId = opts.chainId ?? 31337;
  const cleanups: Array<() => Promise<void>> = [];
  const closeAll = async () => {
    while (cleanups.length) {
      try {
        await cleanups.pop()!();
      } catch (e) {
        warn(`shutdown: ${(e as Error).message}`);
      }
    }
  };
  try {
    fs.mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
    const file = (name: string) => path.join(opts.dataDir, name);
    const rootKeyGiven = (opts.env?.SIGIL_ROOT_KEY ?? process.env.SIGIL_ROOT_KEY ?? "") !== "";
    if (!rootKeyGiven) {
      // The enclave generates (dev mode) or checks the one root key; the orchestrator never reads it.
      step("opening the cluster's root key");
      await Enclave.open({ rootKeyFile: file(DATA_FILES.rootKey), devMode: true, warn });
    }

    step("starting PostgreSQL");
    const pg: ClusterPostgres = await startClusterPostgres({
      dir: file("postgres"),
      port: opts.postgresPort ?? 0,
    });
    cleanups.push(() => pg.stop());

    step("starting the embedded chain (anvil)");
    const anvil: RunningAnvil = await startAnvil({
      statePath: file(DATA_FILES.chainState),
      pidPath: file(DATA_FILES.anvilPid),
      port: opts.anvilPort,
      chainId,
    });
    cleanups.push(() => anvil.stop());

    step("checking the contracts");
    const provider = new ethers.JsonRpcProvider(anvil.rpcUrl, undefined, { cacheTimeout: -1 });
    let deployment: Deployment;
    let fresh: boolean;
    try {
      ({ deployment, fresh } = await ensureDeployment({
        provider,
        file: file(DATA_FILES.deployment),
        chainLabel: describeRpc(undefined),
        deploy: async () => {
          step("deploying the registry and forwarder (first start)");
          return deploySigil(new ethers.NonceManager(new ethers.Wallet(DEV_ACCOUNT_KEY, provider)));
        },
      }));
    } finally {
      provider.destroy();
    }

    const shared: NodeJS.ProcessEnv = {
      ...process.env,
      ...opts.env,
      SIGIL_RPC_URL: anvil.rpcUrl,
      SIGIL_CHAIN_ID: String(chainId),
      // The embedded chain is a dev chain: free gas (anvil_setBalance), sign-up credit.
      SIGIL_DEV_MODE: "true",
      SIGIL_REGISTRY_ADDRESS: deployment.registry,
      SIGIL_FORWARDER_ADDRESS: deployment.forwarder,
      SIGIL_DEPLOY_BLOCK: String(deployment.deployBlock),
      SIGIL_DATABASE_URL: pg.url,
    };
    // Users reach the instances through the front: wallet sign-in is bound to its URL, not theirs.
    // (Port 0, tests only, leaves each instance on its own URL: the front's is not known yet.)
    if (!shared.SIGIL_PUBLIC_URLS && opts.basePort !== 0) {
      const p = opts.basePort;
      shared.SIGIL_PUBLIC_URLS = ["127.0.0.1", "0.0.0.0", "localhost"].includes(host)
        ? `http://127.0.0.1:${p},http://localhost:${p}`
        : `http://${host.includes(":") ? `[${host}]` : host}:${p}`;
    }
    const specOf = (i: number) => {
      const id = instanceIdOf(i);
      const dataDir = file(path.join("instances", id));
      fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      const link = path.join(dataDir, DATA_FILES.rootKey);
      if (!rootKeyGiven && !fs.existsSync(link)) fs.symlinkSync(file(DATA_FILES.rootKey), link);
      return { id, host, port: opts.basePort === 0 ? 0 : opts.basePort + 1 + i, dataDir, env: shared };
    };

    step(`starting ${count} instance${count === 1 ? "" : "s"}`);
    const instances: RunningInstance[] = [];
    cleanups.push(async () => {
      await Promise.all(instances.map((x) => x.stop()));
    });
    // The schema first, once (instances would serialise on the migration lock anyway), then every
    // instance at once: each finds the database ready.
    step("migrating the database");
    await (await openDataLayer({ databaseUrl: pg.url, sqlitePath: "" })).close();
    const started = await Promise.allSettled(
      Array.from({ length: count }, (_, i) => startInstance(specOf(i))),
    );
    for (const r of started) if (r.status === "fulfilled") instances.push(r.value);
    const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;

    step("starting the round-robin front");
    const balancer = await startBalancer({
      host,
      port: opts.basePort,
      backends: instances.map((x) => ({ id: x.id, url: x.url })),
    });
    cleanups.push(() => balancer.close());

    let closing: Promise<void> | undefined;
    return {
      url: balancer.url,
      rpcUrl: anvil.rpcUrl,
      chainId,
      deployment,
      freshDeployment: fresh,
      databaseUrl: pg.url,
      dataDir: opts.dataDir,
      instances,
      balancer,
      async restart(id: string) {
        const i = instances.findIndex((x) => x.id === id);
        if (i < 0) throw new Error(`no instance ${id}`);
        await instances[i].stop();
        // The same port as before, so the front's address for it stays right.
        const spec = { ...specOf(i), port: instances[i].port };
        instances[i] = await startInstance(spec);
        return instances[i];
      },
      dependencyExited: Promise.race([
        anvil.exited.then(() => "the embedded chain (anvil)"),
        pg.exited.then(() => "PostgreSQL"),
      ]),
      close: () => (closing ??= closeAll()),
    };
  } catch (e) {
    await closeAll();
    throw e;
  }
}
