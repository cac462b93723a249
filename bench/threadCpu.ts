/**
 * CPU time by thread and by process, for the benchmarks that must say where a cost goes when several
 * threads and processes share it (bench/auditPath.ts): Linux's per-thread scheduler statistics
 * (/proc/thread-self/schedstat: nanoseconds on a CPU, of the calling thread alone) and the PostgreSQL
 * server's processes (the postmaster and its children: each backend is one process). Elsewhere than
 * Linux these answer null and the benchmark prints what it can.
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** Nanoseconds the calling thread has run on a CPU, or null (no /proc). */
export function threadCpuNs(): number | null {
  try {
    return Number(fs.readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);
  } catch {
    return null;
  }
}

/** Microseconds of CPU of this whole process (every thread), user and system. */
export function processCpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/**
 * Nanoseconds of CPU of a PostgreSQL server (its postmaster, found from the data folder's
 * postmaster.pid, and every process it started), or null. Backends that exited took theirs with them:
 * read it while the connections are open.
 */
export function postgresServerCpuNs(dataDir: string): number | null {
  try {
    const postmaster = Number(fs.readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    let total = 0;
    for (const pid of fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
        if (Number(pid) !== postmaster && ppid !== postmaster) continue;
        total += Number(fs.readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]);
      } catch {
        // The process ended while being read.
      }
    }
    return total;
  } catch {
    return null;
  }
}
