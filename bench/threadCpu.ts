/**
 * CPU time by thread and by process, for the benchmarks that must say where a cost goes when several
 * threads and processes share it (bench/auditPath.ts): Linux's per-thread scheduler statistics
 * (/proc/thread-self/schedstat: nanoseconds on a CPU, of the calling thread alone) and the whole
 * process. (The PostgreSQL server's CPU: bench/embeddedPostgres.ts, `cpuMs`.) Elsewhere than Linux the
 * thread's answers null and the benchmark prints what it can.
 */
import * as fs from "node:fs";

/** Nanoseconds the calling thread has run on a CPU, or null (no /proc). */
export function threadCpuNs(): number | null {
  try {
    return Number(fs.readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);
  } catch {
    return null;
  }
}

/**
 * Microseconds of CPU of the main thread, called from it (a benchmark's main thread runs the relayer,
 * its bottleneck; process.cpuUsage() counts every thread: workers, key threads, the audit writer), or
 * null (no /proc).
 */
export function mainThreadCpuUs(): number | null {
  const ns = threadCpuNs();
  return ns === null ? null : ns / 1000;
}

/** Microseconds of CPU of this whole process (every thread), user and system. */
export function processCpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}
