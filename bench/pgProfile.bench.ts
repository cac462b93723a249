/**
 * Where the PostgreSQL server's CPU goes per execution (`npm run bench:pgprofile`): one relayer with
 * billing (simulated processor) and the audit log on an embedded PostgreSQL started with
 * `pg_stat_statements` (planning tracked too), hello-world executions at 50 concurrent clients (the
 * load generator of bench/loadgen.ts, its own process). After a warm-up the statistics are reset; after
 * the window each statement shape is printed with its calls per execution and its server time per
 * execution (planning and execution, ms), beside the server's whole CPU per execution (/proc: what
 * the statements' own times leave out is parsing, the protocol, commits, and background processes).
 *
 * `BENCH_QUICK=1` for a short run; `BENCH_BILLING=0` without billing; `BENCH_AUDIT=0` with the audit log
 * off; `BENCH_SIGN=1` for the one-signature action of `bench:audit` instead of hello world;
 * `BENCH_PG_FLAGS=name=value,…` further server settings (e.g. `synchronous_commit=off`, to see what the
 * commits' WAL flushes cost); `BENCH_N` executions in the window (3,000); `BENCH_HOT_VACUUM_MS` the
 * relayer's vacuum period of the hot tables (0: off; relayer/db/hotTableVacuum.ts);
 * `BENCH_AUDIT_VACUUM_TRUNCATE=1` lets VACUUM truncate `audit_pending` again, as before migration 23;
 * `BENCH_AUDIT_PENDING_PK=1` gives `audit_pending` its primary key (a second index) back, as before 24.
 */
import { Client } from "pg";
import { benchAccount, executionRequest, startBenchStack } from "./benchStack";
import { LoadGenerator } from "./loadgenClient";
import { startBenchPostgres } from "./embeddedPostgres";
import { setup } from "./auditLog";

interface StatementRow {
  query: string;
  calls: string;
  plans: string;
  total_plan_time: number;
  total_exec_time: number;
  rows: string;
}

async function main(): Promise<void> {
  const quick = process.env.BENCH_QUICK === "1";
  const n = Number(process.env.BENCH_N ?? (quick ? 300 : 3_000));
  const pg = await startBenchPostgres("sigil_profile", [
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.track_planning=on",
    "pg_stat_statements.track=all",
    ...(process.env.BENCH_PG_FLAGS ? process.env.BENCH_PG_FLAGS.split(",") : []),
  ]);
  const gen = LoadGenerator.start();
  const admin = new Client({ connectionString: pg.url });
  await admin.connect();
  await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  const t = await startBenchStack({
    tag: "pgprofile",
    databaseUrl: pg.url,
    billing: process.env.BENCH_BILLING !== "0",
    relayer: {
      audit: { enabled: process.env.BENCH_AUDIT !== "0" },
      ...(process.env.BENCH_HOT_VACUUM_MS ? { hotVacuumMs: Number(process.env.BENCH_HOT_VACUUM_MS) } : {}),
    },
  });
  // BENCH_AUDIT_VACUUM_TRUNCATE=1: let VACUUM truncate audit_pending again (as before migration 23).
  if (process.env.BENCH_AUDIT_VACUUM_TRUNCATE === "1")
    await admin.query("ALTER TABLE audit_pending SET (vacuum_truncate = true)");
  // BENCH_AUDIT_PENDING_PK=1: audit_pending's primary key (its second index) back, as before migration 24.
  if (process.env.BENCH_AUDIT_PENDING_PK === "1")
    await admin.query("ALTER TABLE audit_pending ADD PRIMARY KEY (id)");
  try {
    const hello =
      process.env.BENCH_SIGN === "1"
        ? await setup(t.stack)
        : await (async () => {
            const a = await benchAccount(t.stack.url, "async function main() { return 'hello world'; }");
            return executionRequest(t.stack.url, a.usageKey, { cid: a.cid, js_params: {} });
          })();
    await gen.http(4, quick ? 50 : 500, hello);
    await admin.query("SELECT pg_stat_statements_reset()");
    const cpu0 = pg.cpuMs();
    const byProcess0 = pg.cpuByProcess();
    const relayer0 = process.cpuUsage();
    const stats = await gen.http(50, n, hello);
    await new Promise((r) => setTimeout(r, 300)); // the window's releases and flushes are in
    const used = process.cpuUsage(relayer0);
    const serverMs = (pg.cpuMs() - cpu0) / n;
    const byProcess = [...pg.cpuByProcess()]
      .map(([kind, ms]) => [kind, (ms - (byProcess0.get(kind) ?? 0)) / n] as const)
      .filter(([, ms]) => ms > 0)
      .sort((a, b) => b[1] - a[1]);
    const { rows } = await admin.query<StatementRow>(
      `SELECT query, calls, plans, total_plan_time, total_exec_time, rows FROM pg_stat_statements
        WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_plan_time + total_exec_time DESC`,
    );
    let sum = 0;
    console.log(
      `\n${n} executions at 50 clients, ${stats.rps.toFixed(0)} req/s; per execution: server CPU ${serverMs.toFixed(3)} ms, relayer process CPU ${((used.user + used.system) / 1000 / n).toFixed(3)} ms\n`,
    );
    console.log("| calls/exec | plan ms/exec | exec ms/exec | statement |\n|---:|---:|---:|---|");
    for (const r of rows) {
      const plan = r.total_plan_time / n;
      const exec = r.total_exec_time / n;
      sum += plan + exec;
      if (plan + exec < 0.002) continue;
      const text = r.query.replace(/\s+/g, " ").slice(0, 110).replace(/\|/g, "\\|");
      console.log(
        `| ${(Number(r.calls) / n).toFixed(2)} | ${plan.toFixed(3)} | ${exec.toFixed(3)} | \`${text}\` |`,
      );
    }
    console.log(
      `\nthe server's CPU per execution by process: ${byProcess.map(([k, ms]) => `${k} ${(ms * 1000).toFixed(0)} µs`).join(", ")}`,
    );
    console.log(
      `\nstatements' planning and execution together: ${sum.toFixed(3)} ms per execution of the server's ${serverMs.toFixed(3)} ms CPU`,
    );
  } finally {
    await admin.end();
    await gen.stop();
    await t.close();
    await pg.stop();
  }
}

if (require.main === module)
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
