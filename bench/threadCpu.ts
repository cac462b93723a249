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

/**
 * Thread ids (Linux tids) of the worker threads started from now on, by the `name` their Worker was
 * given ("sigil-action-worker", "sigil-signer", "sigil-crypto", …). Node (20) does not name the OS
 * threads, so a benchmark that wants the CPU of each kind of thread calls labelWorkerThreads() before
 * the code under test starts its workers: the Worker class is wrapped so that the one thread each
 * constructor starts (synchronously, in the constructor) is recorded under its name. Benchmarks only.
 */
const threadLabels = new Map<string, string>();

function taskIds(): Set<string> {
  try {
    return new Set(fs.readdirSync("/proc/self/task"));
  } catch {
    return new Set();
  }
}

export function labelWorkerThreads(): void {
  const wt = require("node:worker_threads") as typeof import("node:worker_threads");
  const Original = wt.Worker;
  if ((Original as unknown as { labelled?: boolean }).labelled) return;
  class Labelled extends Original {
    static labelled = true;
    constructor(script: string | URL, options?: import("node:worker_threads").WorkerOptions) {
      const before = taskIds();
      super(script, options);
      const started = [...taskIds()].filter((t) => !before.has(t));
      // Exactly one new thread: this worker's (anything else is left unlabelled: "other").
      if (started.length === 1) threadLabels.set(started[0], options?.name ?? "worker");
    }
  }
  wt.Worker = Labelled;
}

/**
 * Nanoseconds on a CPU so far of each kind of thread of this process: "main", each labelled worker
 * name (labelWorkerThreads), and "other" (libuv's thread pool, V8's compiler and GC helpers, unlabelled
 * workers). Threads that have exited are no longer counted: take differences over periods in which
 * none exits. Empty where there is no /proc.
 */
export function cpuByThreadKind(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of taskIds()) {
    let ns: number;
    try {
      ns = Number(fs.readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      continue; // exited meanwhile
    }
    const kind = tid === String(process.pid) ? "main" : (threadLabels.get(tid) ?? "other");
    out.set(kind, (out.get(kind) ?? 0) + ns);
  }
  return out;
}

/** `after` - `before`, per kind (a kind absent before counts from zero). */
export function cpuDelta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) out.set(k, v - (before.get(k) ?? 0));
  return out;
}
