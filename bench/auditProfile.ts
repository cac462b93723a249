/**
 * A driver for profiling the audit log's cost (docs/audit-log.md, "What it costs"): one stack (SQLite, or
 * PostgreSQL with BENCH_AUDIT_ENGINES=postgres), the log on or off (AUDIT=off), the one-signature action
 * at 50 clients for BENCH_N requests (default 6,000), then the SQLite statements it ran, counted per
 * request. Run it under `node --cpu-prof` to see where the main thread's time goes:
 *
 *   AUDIT=on node --cpu-prof --cpu-prof-dir=/tmp/prof-on -r ts-node/register/transpile-only bench/auditProfile.ts
 *
 * and compare with AUDIT=off. Or CPU_PROFILE=<file>: a profile of the main thread during the measured
 * requests alone (not the stack's start), to diff by function with bench/cpuProfileDiff.ts:
 *
 *   AUDIT=off CPU_PROFILE=/tmp/off.cpuprofile npm run bench:audit-profile
 *   AUDIT=on CPU_PROFILE=/tmp/on.cpuprofile npm run bench:audit-profile
 *   npx ts-node --transpile-only bench/cpuProfileDiff.ts /tmp/off.cpuprofile /tmp/on.cpuprofile
 *
 * `npm run bench:audit` is the measurement; this only explains it.
 */
import * as fs from "node:fs";
import { Session } from "node:inspector";
import BetterSqlite3 from "better-sqlite3";
import { startStack } from "../testkit/stack";
import { startBenchPostgres, type BenchPostgres } from "./embeddedPostgres";
import { setup } from "./auditLog";
import { LoadGenerator } from "./loadgenClient";
import { UNLIMITED_RATES } from "./benchStack";

/**
 * Every SQLite statement the process runs, counted and timed by its text (the statement's first words and
 * table): better-sqlite3 has no trace hook that times statements, so its methods are wrapped here.
 */
const tally = new Map<string, { n: number; ns: bigint }>();
function label(text: string): string {
  const t = text.replace(/\s+/g, " ").trim();
  const m = /^(INSERT INTO|DELETE FROM|UPDATE|SELECT .*? FROM|BEGIN|COMMIT|ROLLBACK)\s*(\w+)?/i.exec(t);
  return m ? `${m[1].split(" ")[0].toUpperCase()} ${m[2] ?? ""}`.trim() : t.slice(0, 40);
}
function count(text: string, ns: bigint): void {
  const k = label(text);
  const c = tally.get(k) ?? { n: 0, ns: 0n };
  c.n++;
  c.ns += ns;
  tally.set(k, c);
}
function traceSqlite(): void {
  const probe = new BetterSqlite3(":memory:");
  const statementProto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<string, unknown>;
  probe.close();
  for (const method of ["run", "all", "get"]) {
    const original = statementProto[method] as (...a: unknown[]) => unknown;
    statementProto[method] = function (this: { source: string }, ...args: unknown[]) {
      const t0 = process.hrtime.bigint();
      try {
        return original.apply(this, args);
      } finally {
        count(this.source, process.hrtime.bigint() - t0);
      }
    };
  }
  const dbProto = BetterSqlite3.prototype as unknown as Record<string, unknown>;
  const exec = dbProto.exec as (...a: unknown[]) => unknown;
  dbProto.exec = function (this: unknown, text: string) {
    const t0 = process.hrtime.bigint();
    try {
      return exec.call(this, text);
    } finally {
      count(text, process.hrtime.bigint() - t0);
    }
  };
}

/** The main thread's CPU profile from `start` until the function it answers is called, to `file`. */
async function profileTo(file: string): Promise<() => Promise<void>> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))),
    );
  await post("Profiler.enable");
  await post("Profiler.setSamplingInterval", { interval: 200 });
  await post("Profiler.start");
  return async () => {
    const { profile } = (await post("Profiler.stop")) as { profile: unknown };
    fs.writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  };
}

async function main(): Promise<void> {
  if (process.env.BENCH_AUDIT_ENGINES !== "postgres") traceSqlite();
  const enabled = process.env.AUDIT !== "off";
  const engine = process.env.BENCH_AUDIT_ENGINES === "postgres" ? "postgres" : "sqlite";
  const n = Number(process.env.BENCH_N ?? 6_000);
  let pg: BenchPostgres | null = null;
  if (engine === "postgres") pg = await startBenchPostgres("sigil_audit_profile");
  const s = await startStack({
    databaseUrl: pg?.url,
    rateLimits: UNLIMITED_RATES,
    executor: { poolSize: 2 },
    audit: { enabled },
  });
  const gen = LoadGenerator.start();
  try {
    const op = await setup(s);
    await gen.http(10, 500, op);
    tally.clear();
    const stopProfile = process.env.CPU_PROFILE ? await profileTo(process.env.CPU_PROFILE) : null;
    const before = process.cpuUsage();
    const r = await gen.http(50, n, op);
    const cpu = process.cpuUsage(before);
    await stopProfile?.();
    console.log(
      `audit ${enabled ? "on" : "off"} (${engine}): ${r.rps.toFixed(1)} req/s, p50 ${r.p50.toFixed(1)} ms, ` +
        `main process CPU ${((cpu.user + cpu.system) / r.n).toFixed(0)} µs per request`,
    );
    if (tally.size > 0) {
      console.log("| statement | per request | µs per request |\n|---|---|---|");
      let n = 0;
      let ns = 0n;
      for (const [k, c] of [...tally].sort((a, b) => Number(b[1].ns - a[1].ns))) {
        n += c.n;
        ns += c.ns;
        console.log(`| ${k} | ${(c.n / r.n).toFixed(3)} | ${(Number(c.ns) / 1000 / r.n).toFixed(1)} |`);
      }
      console.log(`| all | ${(n / r.n).toFixed(3)} | ${(Number(ns) / 1000 / r.n).toFixed(1)} |`);
    }
  } finally {
    await gen.stop();
    await s.close();
    await pg?.stop();
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
