/**
 * Where the rate that the audit log costs goes, beyond its entries' CPU (docs/audit-log.md, "What it
 * costs"): the same two stacks and alternated pairs as `npm run bench:audit` (the one-signature action at
 * 50 clients, log off and on), and for every run what the rate alone cannot say:
 *
 *  - CPU per request: the relayer's main thread, the audit log's writer thread (SQLite), the whole
 *    relayer process, this process's children (anvil, the load generator), the PostgreSQL server, and the
 *    machine (every process, /proc/stat: what other work the machine ran is in it too);
 *  - the main event loop: its utilization (the share of the run it was busy), its delay (p50, p99, max:
 *    how late a timer fired, so how long the loop was held at once), and the garbage collector's pauses;
 *  - the main thread's time inside SQLite calls (better-sqlite3 blocks the thread that calls it; its busy
 *    handler sleeps on that thread when another connection holds the write lock).
 *
 * `npm run bench:audit-gap`; BENCH_AUDIT_ENGINES=sqlite (default) or postgres; BENCH_PAIRS (default 4);
 * BENCH_N requests per run (default 3,000). It explains `bench:audit`; the ratio to quote is that one's.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import { constants, monitorEventLoopDelay, performance, PerformanceObserver } from "node:perf_hooks";
import BetterSqlite3 from "better-sqlite3";
import { ActionExecutor } from "../enclave";
import { AuditLog } from "../relayer/audit/log";
import { SqliteWriterThread } from "../relayer/audit/sqliteWriter";
import { startStack, type Stack } from "../testkit/stack";
import { startBenchPostgres, type BenchPostgres } from "./embeddedPostgres";
import { setup } from "./auditLog";
import { UNLIMITED_RATES, closeBenchConnections } from "./benchStack";
import type { HttpRequestSpec } from "./loadgen";
import { LoadGenerator } from "./loadgenClient";
import { processCpuUs, threadCpuNs } from "./threadCpu";

/** The main thread's time in better-sqlite3's calls (statements and exec), since the last reset. */
const sqliteTime = { calls: 0, ns: 0n };
function timeSqliteCalls(): void {
  const probe = new BetterSqlite3(":memory:");
  const statementProto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<string, unknown>;
  probe.close();
  const wrap = (proto: Record<string, unknown>, method: string) => {
    const original = proto[method] as (...a: unknown[]) => unknown;
    proto[method] = function (this: unknown, ...args: unknown[]) {
      const t0 = process.hrtime.bigint();
      try {
        return original.apply(this, args);
      } finally {
        sqliteTime.calls++;
        sqliteTime.ns += process.hrtime.bigint() - t0;
      }
    };
  };
  for (const m of ["run", "all", "get", "iterate"]) wrap(statementProto, m);
  wrap(BetterSqlite3.prototype as unknown as Record<string, unknown>, "exec");
}

/** ns each thread of this process has run on a CPU, by thread id (/proc/self/task/<tid>/schedstat). */
function threadsCpuNs(): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of fs.readdirSync("/proc/self/task")) {
    try {
      out.set(t, Number(fs.readFileSync(`/proc/self/task/${t}/schedstat`, "utf8").split(" ")[0]));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/**
 * Where a request's time goes, in wall time summed over the requests of a run: inside the executor's
 * `run` (waiting for a worker, then the run), of which the run itself as the worker measured it
 * (`execution_ms`), and waiting for the audit entry's commit (`AuditLog.record`).
 */
const spans = { runs: 0, runMs: 0, execMs: 0, records: 0, recordMs: 0, batches: 0 };
/** The audit logs that recorded, by the data layer they write (the writer thread's CPU is asked of them). */
const auditLogs = new Set<AuditLog>();
function timeSpans(): void {
  const run = ActionExecutor.prototype.run;
  ActionExecutor.prototype.run = async function (this: ActionExecutor, ...args: Parameters<typeof run>) {
    const t0 = performance.now();
    const r = await run.apply(this, args);
    spans.runs++;
    spans.runMs += performance.now() - t0;
    spans.execMs += r.execution_ms;
    return r;
  };
  // Each call is one transaction of the writer thread (SQLite): its entries shared it.
  const writerRecord = SqliteWriterThread.prototype.record;
  SqliteWriterThread.prototype.record = function (this: SqliteWriterThread, ...args) {
    spans.batches++;
    return writerRecord.apply(this, args);
  };
  const record = AuditLog.prototype.record;
  AuditLog.prototype.record = async function (this: AuditLog, ...args: Parameters<typeof record>) {
    auditLogs.add(this);
    const t0 = performance.now();
    await record.apply(this, args);
    spans.records++;
    spans.recordMs += performance.now() - t0;
  };
}

/** USER_HZ: the unit of /proc's per-process and per-machine times on every current Linux. */
const TICK_US = 10_000;

/** µs of CPU of this process's child processes (anvil, the load generator), from /proc. */
function childrenCpuUs(): number {
  let total = 0;
  for (const d of fs.readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(d)) continue;
    try {
      // The fields after the command (which may hold spaces), from its closing parenthesis.
      const f = fs.readFileSync(`/proc/${d}/stat`, "utf8").split(") ")[1].split(" ");
      if (Number(f[1]) !== process.pid) continue;
      total += (Number(f[11]) + Number(f[12])) * TICK_US;
    } catch {
      // The process ended meanwhile.
    }
  }
  return total;
}

/** µs of CPU the whole machine spent busy (every CPU, every process), from /proc/stat. */
function machineBusyUs(): number {
  const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
  return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * TICK_US;
}

interface Run {
  on: boolean;
  n: number;
  rps: number;
  p50: number;
  p99: number;
  /** µs per request */
  main: number;
  /** every other thread of the process together (sandbox workers, signer, audit writer, GC, libuv) */
  others: number;
  /** of which the audit log's SQLite writer thread */
  writer: number;
  /** each of them by thread id */
  threads: Map<string, number>;
  process: number;
  children: number;
  server: number | null;
  machine: number;
  /** the event loop's utilization during the run, 0–1 */
  elu: number;
  /** the event loop's delay, ms */
  delayP50: number;
  delayP99: number;
  delayMax: number;
  /** GC pauses on the main thread, µs per request */
  gc: number;
  /** young-generation collections, and major (mark-sweep-compact) ones, per 1,000 requests */
  scavenges: number;
  majors: number;
  /** SQLite calls on the main thread: per request, and µs per request */
  sqliteCalls: number;
  sqliteUs: number;
  /** mean ms per request: in the executor's run (queue and run), the run itself, the audit entry's wait */
  runMs: number;
  execMs: number;
  recordMs: number | null;
  /** entries per transaction of the writer thread (SQLite) */
  perBatch: number | null;
}

let gcNs = 0;
const gcCount = { minor: 0, major: 0 };

async function measureRun(
  gen: LoadGenerator,
  op: HttpRequestSpec,
  on: boolean,
  n: number,
  pg: BenchPostgres | null,
): Promise<Run> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const writerNs = async () => {
    let ns = 0;
    for (const l of auditLogs) ns += (await l.store.writerCpuNs()) ?? 0;
    return ns;
  };
  const writer0 = await writerNs();
  const threads0 = threadsCpuNs();
  const elu0 = performance.eventLoopUtilization();
  const main0 = threadCpuNs() ?? 0;
  const proc0 = processCpuUs();
  const children0 = childrenCpuUs();
  const machine0 = machineBusyUs();
  const server0 = pg?.cpuMs() ?? null;
  sqliteTime.calls = 0;
  sqliteTime.ns = 0n;
  Object.assign(spans, { runs: 0, runMs: 0, execMs: 0, records: 0, recordMs: 0, batches: 0 });
  gcNs = 0;
  gcCount.minor = 0;
  gcCount.major = 0;
  delay.enable();
  const stats = await gen.http(50, n, op);
  delay.disable();
  const elu = performance.eventLoopUtilization(elu0);
  const main = ((threadCpuNs() ?? 0) - main0) / 1000;
  const proc = processCpuUs() - proc0;
  const children = childrenCpuUs() - children0;
  const machine = machineBusyUs() - machine0;
  const server = server0 === null ? null : ((pg as BenchPostgres).cpuMs() - server0) * 1000;
  const threads = new Map(
    [...threadsCpuNs()]
      .filter(([tid]) => tid !== String(process.pid))
      .map(([tid, ns]) => [tid, (ns - (threads0.get(tid) ?? 0)) / 1000 / stats.n]),
  );
  const writer = (await writerNs()) - writer0;
  const per = (x: number) => x / stats.n;
  return {
    on,
    n: stats.n,
    rps: stats.rps,
    p50: stats.p50,
    p99: stats.p99,
    main: per(main),
    others: [...threads.values()].reduce((a, x) => a + x, 0),
    writer: per(writer / 1000),
    threads,
    scavenges: (gcCount.minor * 1000) / stats.n,
    majors: (gcCount.major * 1000) / stats.n,
    process: per(proc),
    children: per(children),
    server: server === null ? null : per(server),
    machine: per(machine),
    elu: elu.utilization,
    delayP50: delay.percentile(50) / 1e6,
    delayP99: delay.percentile(99) / 1e6,
    delayMax: delay.max / 1e6,
    gc: per(gcNs / 1000),
    sqliteCalls: per(sqliteTime.calls),
    sqliteUs: per(Number(sqliteTime.ns) / 1000),
    runMs: spans.runMs / Math.max(1, spans.runs),
    execMs: spans.execMs / Math.max(1, spans.runs),
    recordMs: spans.records > 0 ? spans.recordMs / spans.records : null,
    perBatch: spans.batches > 0 ? spans.records / spans.batches : null,
  };
}

const COLUMNS: Array<[string, (r: Run) => number | null, number]> = [
  ["req/s", (r) => r.rps, 0],
  ["p50 ms", (r) => r.p50, 1],
  ["in run ms", (r) => r.runMs, 2],
  ["exec ms", (r) => r.execMs, 2],
  ["audit wait ms", (r) => r.recordMs, 2],
  ["entries per batch", (r) => r.perBatch, 1],
  ["p99 ms", (r) => r.p99, 1],
  ["main µs", (r) => r.main, 0],
  ["other threads µs", (r) => r.others, 0],
  ["audit writer µs", (r) => r.writer, 0],
  ["process µs", (r) => r.process, 0],
  ["children µs", (r) => r.children, 0],
  ["server µs", (r) => r.server, 0],
  ["machine µs", (r) => r.machine, 0],
  ["loop busy", (r) => r.elu, 3],
  ["delay p50 ms", (r) => r.delayP50, 2],
  ["delay p99 ms", (r) => r.delayP99, 2],
  ["delay max ms", (r) => r.delayMax, 1],
  ["GC µs", (r) => r.gc, 1],
  ["scavenges /1000", (r) => r.scavenges, 1],
  ["major GCs /1000", (r) => r.majors, 2],
  ["SQLite calls", (r) => r.sqliteCalls, 3],
  ["SQLite µs", (r) => r.sqliteUs, 1],
];

function row(label: string, values: Array<number | null>): string {
  return `| ${label} | ${values.map((v, i) => (v === null ? "–" : v.toFixed(COLUMNS[i][2]))).join(" | ")} |`;
}

function mean(runs: Run[], get: (r: Run) => number | null): number | null {
  const xs = runs.map(get);
  return xs.some((x) => x === null) ? null : (xs as number[]).reduce((a, x) => a + x, 0) / xs.length;
}

async function compare(gen: LoadGenerator, engine: "sqlite" | "postgres", pairs: number, n: number) {
  const servers: BenchPostgres[] = [];
  const stacks: Stack[] = [];
  try {
    // BENCH_AUDIT_AA=off|on: an A/A check, both stacks alike ("on" then only names the second one).
    const aa = process.env.BENCH_AUDIT_AA;
    const stackFor = async (role: boolean) => {
      const enabled = aa === "on" || aa === "off" ? aa === "on" : role;
      const pg = engine === "postgres" ? await startBenchPostgres(`sigil_audit_gap_${role}`) : null;
      if (pg) servers.push(pg);
      const s = await startStack({
        databaseUrl: pg?.url,
        rateLimits: UNLIMITED_RATES,
        executor: { poolSize: 2 },
        audit: { enabled },
      });
      stacks.push(s);
      return { s, pg, op: await setup(s) };
    };
    const off = await stackFor(false);
    const on = await stackFor(true);
    // As bench:audit: warmed at 10 clients, then at the measured 50, and the first pair starts with
    // the stack warmed last (the process's first run at 50 clients was slower than later ones).
    for (const x of [off, on]) await gen.http(10, 1_500, { ...x.op, rejectHasError: false });
    for (const x of [off, on]) await gen.http(50, 1_500, { ...x.op, rejectHasError: false });
    const runs: Run[] = [];
    for (let k = 0; k < pairs; k++) {
      const order = k % 2 === 0 ? [on, off] : [off, on];
      for (const x of order) runs.push(await measureRun(gen, x.op, x === on, n, x.pg));
    }
    console.log(
      `\n## ${engine}: one signature, 50 clients, ${n} requests a run, ${pairs} alternated pairs\n`,
    );
    console.log(`| run | ${COLUMNS.map((c) => c[0]).join(" | ")} |`);
    console.log(`|---|${COLUMNS.map(() => "---:").join("|")}|`);
    runs.forEach((r, i) =>
      console.log(
        row(
          `${r.on ? "on" : "off"} ${Math.floor(i / 2) + 1}`,
          COLUMNS.map((c) => c[1](r)),
        ),
      ),
    );
    const offMeans = COLUMNS.map((c) =>
      mean(
        runs.filter((r) => !r.on),
        c[1],
      ),
    );
    const onMeans = COLUMNS.map((c) =>
      mean(
        runs.filter((r) => r.on),
        c[1],
      ),
    );
    console.log(row("**off, mean**", offMeans));
    console.log(row("**on, mean**", onMeans));
    console.log(
      row(
        "on − off",
        onMeans.map((v, i) => (v === null || offMeans[i] === null ? null : v - (offMeans[i] as number))),
      ),
    );
    // Each stack's threads (its sandbox workers, signer, crypto and audit writer threads) run only in its
    // own runs; the process's shared ones (V8's GC helpers, libuv's pool) in both.
    const tids = new Set(runs.flatMap((r) => [...r.threads.keys()]));
    const byThread = [...tids]
      .map((tid) => {
        const m = (on: boolean) =>
          mean(
            runs.filter((r) => r.on === on),
            (r) => r.threads.get(tid) ?? 0,
          ) ?? 0;
        return { tid, off: m(false), on: m(true) };
      })
      .filter((t) => t.off + t.on >= 2)
      .sort((a, b) => Number(a.tid) - Number(b.tid));
    console.log(
      "\nThe other threads of the process (at least 2 µs per request), by thread id (creation order):\n",
    );
    console.log("| thread | off µs per request | on µs per request |\n|---|---:|---:|");
    for (const t of byThread) console.log(`| ${t.tid} | ${t.off.toFixed(1)} | ${t.on.toFixed(1)} |`);
    console.log(`\nrate on / off: ${((onMeans[0] as number) / (offMeans[0] as number)).toFixed(3)}`);
  } finally {
    for (const s of stacks) await s.close();
    for (const pg of servers) await pg.stop();
  }
}

async function main(): Promise<void> {
  timeSqliteCalls();
  timeSpans();
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcNs += e.duration * 1e6;
      const kind = (e as unknown as { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gcCount.minor++;
      else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcCount.major++;
    }
  }).observe({ entryTypes: ["gc"] });
  const engines = (process.env.BENCH_AUDIT_ENGINES ?? "sqlite").split(",") as Array<"sqlite" | "postgres">;
  const pairs = Number(process.env.BENCH_PAIRS ?? 4);
  const n = Number(process.env.BENCH_N ?? 3_000);
  const load = () =>
    os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(", ");
  console.log(`load average at start: ${load()}`);
  const gen = LoadGenerator.start();
  try {
    for (const engine of engines) await compare(gen, engine, pairs, n);
  } finally {
    await gen.stop();
    closeBenchConnections();
  }
  console.log(`\nload average at end: ${load()}`);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
