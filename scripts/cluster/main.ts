/**
 * `npm run start:cluster`: several Sigil instances behind one URL on this machine (scripts/cluster/
 * cluster.ts; docs/deployment.md, "A local cluster"). Ctrl-C (SIGINT) or SIGTERM stops everything, the
 * state is kept for the next start.
 *
 *   --instances <n>   instance processes (default 3; SIGIL_CLUSTER_INSTANCES)
 *   --base-port <p>   the front listens on p, instance i on p + i (default 8000; SIGIL_CLUSTER_BASE_PORT)
 *   --data-dir <dir>  the cluster's data folder (default ./.sigil-cluster; SIGIL_CLUSTER_DATA_DIR)
 *
 * The chain's port is SIGIL_ANVIL_PORT (default 8545) as for `npm start`; every other SIGIL_ variable
 * (prices, limits, SIGIL_ROOT_KEY, SIGIL_CHARGE_FLUSH_MS …) is passed on to every instance.
 *
 * Exit codes: 0 clean shutdown, 1 invalid flags or failed start, 2 the chain or the database died.
 */
import * as path from "node:path";
import { ensureDashboardBuilt } from "../start/dashboardBuild";
import { devRootKeyWarning } from "../start/banner";
import { clusterBanner } from "./banner";
import { ensureCompiled } from "../start/contractsBuild";

export class UsageError extends Error {}

export interface ClusterFlags {
  instances: number;
  basePort: number;
  dataDir: string;
  anvilPort: number;
}

export function parseClusterFlags(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
): ClusterFlags {
  const raw: Record<string, string | undefined> = {
    instances: env.SIGIL_CLUSTER_INSTANCES,
    "base-port": env.SIGIL_CLUSTER_BASE_PORT,
    "data-dir": env.SIGIL_CLUSTER_DATA_DIR,
  };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--(instances|base-port|data-dir)(?:=(.*))?$/.exec(argv[i]);
    if (!m)
      throw new UsageError(
        `unknown argument ${JSON.stringify(argv[i])} (--instances, --base-port, --data-dir)`,
      );
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new UsageError(`--${m[1]} needs a value`);
    raw[m[1]] = value;
  }
  const int = (name: string, value: string | undefined, def: number, min: number, max: number) => {
    if (value === undefined || value === "") return def;
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max)
      throw new UsageError(
        `--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`,
      );
    return Number(value);
  };
  const instances = int("--instances", raw.instances, 3, 1, 16);
  const basePort = int("--base-port", raw["base-port"], 8000, 1, 65535 - instances);
  const anvilPort = int("SIGIL_ANVIL_PORT", env.SIGIL_ANVIL_PORT, 8545, 0, 65535);
  return { instances, basePort, anvilPort, dataDir: path.resolve(cwd, raw["data-dir"] || ".sigil-cluster") };
}

async function main(): Promise<void> {
  let flags: ClusterFlags;
  try {
    flags = parseClusterFlags(process.argv.slice(2), process.env, process.cwd());
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  }
  const step = (m: string) => process.stderr.write(`• ${m}…\n`);
  ensureCompiled();
  // Once here, so that the instances find it built instead of all building it at once.
  ensureDashboardBuilt(step);
  // Loaded only now: it imports the TypeChain factories that ensureCompiled may just have generated.
  const { startCluster } = require("./cluster") as typeof import("./cluster");
  const warn = (m: string) =>
    process.stderr.write(/DEV MODE generated/.test(m) ? devRootKeyWarning(m) : `! ${m}\n`);
  let cluster: Awaited<ReturnType<typeof startCluster>>;
  try {
    cluster = await startCluster({
      dataDir: flags.dataDir,
      instances: flags.instances,
      basePort: flags.basePort,
      anvilPort: flags.anvilPort,
      host: process.env.SIGIL_HOST || "127.0.0.1",
      step,
      warn,
    });
  } catch (e) {
    process.stderr.write(`\nThe cluster could not start: ${(e as Error).message}\n`);
    process.exit(1);
  }
  process.stdout.write(clusterBanner(cluster));

  let shuttingDown = false;
  const shutdown = async (reason: string, code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    process.stderr.write(
      `\n• ${reason}: stopping the front, the instances, PostgreSQL and the chain (state is kept)…\n`,
    );
    const force = setTimeout(() => {
      process.stderr.write("! shutdown took longer than 60 s; exiting anyway\n");
      process.exit(code || 1);
    }, 60_000);
    force.unref();
    await cluster.close();
    process.stderr.write("• stopped. Run npm run start:cluster again to resume.\n");
    process.exit(code);
  };
  process.on("SIGINT", () => void shutdown("SIGINT", 0));
  process.on("SIGTERM", () => void shutdown("SIGTERM", 0));
  void cluster.dependencyExited.then((what) => {
    if (!shuttingDown) {
      process.stderr.write(`! ${what} exited unexpectedly\n`);
      void shutdown(`${what} exited`, 2);
    }
  });
  // An instance that dies is reported (the front routes around it); it is not restarted behind the
  // operator's back: a crash loop should be seen, not hidden.
  for (const x of cluster.instances)
    void x.exited.then(({ code, signal }) => {
      if (!shuttingDown)
        process.stderr.write(
          `! ${x.id} exited (${signal ?? code}); the front routes around it. Its log: ${path.join(cluster.dataDir, "instances", x.id, "sigil.log")}\n`,
        );
    });
}

if (require.main === module)
  main().catch((e: unknown) => {
    process.stderr.write(`The cluster crashed while starting: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
