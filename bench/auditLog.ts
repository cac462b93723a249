/**
 * What the audit log costs an execution (docs/audit-log.md): the one-signature action at 50 concurrent
 * clients on a stack with the log on, as a ratio of the same on a stack with it off, measured in the
 * same run. Both stacks are built alike (anvil, contracts, relayer with 2 sandbox workers, the same
 * account setup) and exist at once, idle but for the run being measured; runs alternate off/on in pairs
 * (the order flipping each pair), so drift in the machine's load hits both alike. The ratio is of the
 * mean rates. On PostgreSQL each stack has its own embedded server.
 *
 * `npm run bench:audit` runs it alone (SQLite, then PostgreSQL; BENCH_AUDIT_ENGINES to choose;
 * BENCH_AUDIT_GROUP_MS for another group-commit wait than the default); bench:relayer prints it too.
 * BENCH_AUDIT_AA=off|on: an A/A check (both stacks alike); BENCH_AUDIT_ON_FIRST=1 starts the "on" stack
 * first; BENCH_AUDIT_PAIRS pairs (4); BENCH_AUDIT_PENDING_PK=1 audit_pending as before migration 24.
 */
import * as os from "node:os";
import { Client } from "pg";
import { startStack, type Stack } from "../testkit/stack";
import { startBenchPostgres, type BenchPostgres } from "./embeddedPostgres";
import { UNLIMITED_RATES, benchAccount, closeBenchConnections, executionRequest } from "./benchStack";
import type { HttpRequestSpec } from "./loadgen";
import { LoadGenerator, type Stats } from "./loadgenClient";

/** An account with a PKP, a one-signature action in a group, and a usage key that may run it. */
export async function setup(s: Stack): Promise<HttpRequestSpec> {
  const a = await benchAccount(
    s.url,
    (pkp) =>
      `async function main(p) { return await Actions.signMessage({ pkpId: "${pkp}", message: p.m }); }`,
  );
  return executionRequest(s.url, a.usageKey, { cid: a.cid, pkp_id: a.pkpId, js_params: { m: "bench" } });
}

export interface AuditOverhead {
  engine: "sqlite" | "postgres";
  off: Stats[];
  on: Stats[];
  /** Mean requests/s with the log on over the same with it off. */
  ratio: number;
}

export async function auditOverhead(
  gen: LoadGenerator,
  engine: "sqlite" | "postgres",
  quick: boolean,
): Promise<AuditOverhead> {
  const servers: BenchPostgres[] = [];
  const stacks: Stack[] = [];
  try {
    // BENCH_AUDIT_AA=off|on: an A/A check, both stacks alike (the "on" role only names the second).
    const aa = process.env.BENCH_AUDIT_AA;
    const stackFor = async (role: boolean) => {
      const enabled = aa === "on" || aa === "off" ? aa === "on" : role;
      let databaseUrl: string | undefined;
      if (engine === "postgres") {
        const pg = await startBenchPostgres(
          role ? "sigil_audit_on" : "sigil_audit_off",
          process.env.BENCH_PG_FLAGS ? process.env.BENCH_PG_FLAGS.split(",") : [],
        );
        servers.push(pg);
        databaseUrl = pg.url;
      }
      const s = await startStack({
        databaseUrl,
        rateLimits: UNLIMITED_RATES,
        executor: { poolSize: 2 },
        audit: { enabled, groupCommitMs: groupCommitMs() },
      });
      stacks.push(s);
      // BENCH_AUDIT_PENDING_PK=1: audit_pending's primary key (a second index) back, as before
      // migration 24, to compare with it alternated in one shell.
      if (databaseUrl && process.env.BENCH_AUDIT_PENDING_PK === "1") {
        const admin = new Client({ connectionString: databaseUrl });
        await admin.connect();
        await admin.query("ALTER TABLE audit_pending ADD PRIMARY KEY (id)");
        await admin.end();
      }
      return s;
    };
    // BENCH_AUDIT_ON_FIRST=1 starts the "on" stack first: whether the order of the stacks' start moves
    // the ratio (it is otherwise always the "off" stack first).
    let offOp: HttpRequestSpec;
    let onOp: HttpRequestSpec;
    if (process.env.BENCH_AUDIT_ON_FIRST === "1") {
      onOp = await setup(await stackFor(true));
      offOp = await setup(await stackFor(false));
    } else {
      offOp = await setup(await stackFor(false));
      onOp = await setup(await stackFor(true));
    }
    // Warm-up, not measured: a run of a cold executor on a loaded machine may hit its time limit
    // (answered 200 with has_error), which must not end the benchmark.
    for (const op of [offOp, onOp]) await gen.http(10, quick ? 100 : 1_500, { ...op, rejectHasError: false });
    // Then each at the measured concurrency: the process's first run at 50 clients (its heap growing to
    // the load, 40 more sockets, the executor's deeper queue) was slower than later ones, and it was
    // always the "off" stack's first pair, which flattered the log (docs/audit-log.md, "Is the
    // benchmark fair?"). The first measured run follows its own stack's warm-up, as later runs follow
    // their stack's previous run or the other's, half and half.
    if (!quick) for (const op of [offOp, onOp]) await gen.http(50, 1_500, { ...op, rejectHasError: false });
    const pairs = quick ? 1 : Number(process.env.BENCH_AUDIT_PAIRS ?? 4);
    const n = quick ? 100 : 1_500;
    const off: Stats[] = [];
    const on: Stats[] = [];
    for (let k = 0; k < pairs; k++) {
      if (k % 2 === 0) {
        on.push(await gen.http(50, n, onOp));
        off.push(await gen.http(50, n, offOp));
      } else {
        off.push(await gen.http(50, n, offOp));
        on.push(await gen.http(50, n, onOp));
      }
    }
    const mean = (xs: Stats[]) => xs.reduce((a, x) => a + x.rps, 0) / xs.length;
    return { engine, off, on, ratio: mean(on) / mean(off) };
  } finally {
    for (const s of stacks) await s.close();
    for (const pg of servers) await pg.stop();
  }
}

/** BENCH_AUDIT_GROUP_MS: the log's group-commit wait (absent: the relayer's default). */
function groupCommitMs(): number | undefined {
  const v = process.env.BENCH_AUDIT_GROUP_MS;
  return v === undefined || v === "" ? undefined : Number(v);
}

const f = (x: number) => x.toFixed(1);

export function printAuditOverhead(r: AuditOverhead): void {
  console.log(`\n## The audit log's cost (${r.engine}): one signature, 50 clients, log on vs off\n`);
  console.log("| run | n | req/s | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|---|");
  r.off.forEach((off, k) => {
    const on = r.on[k];
    console.log(
      `| log off, pair ${k + 1} | ${off.n} | ${f(off.rps)} | ${f(off.p50)} | ${f(off.p95)} | ${f(off.p99)} |`,
    );
    console.log(
      `| log on, pair ${k + 1} | ${on.n} | ${f(on.rps)} | ${f(on.p50)} | ${f(on.p95)} | ${f(on.p99)} |`,
    );
  });
  // Each pair's own ratio (its two runs are next to each other in time): how far one pair's answer is
  // from another's says how much the mean's ratio can be trusted at the machine's load.
  const pairRatios = r.on.map((on, k) => on.rps / r.off[k].rps);
  const sorted = [...pairRatios].sort((a, b) => a - b);
  const median = (sorted[(sorted.length - 1) >> 1] + sorted[sorted.length >> 1]) / 2;
  console.log(
    `\npairs' ratios: ${pairRatios.map((x) => x.toFixed(3)).join(", ")} (median ${median.toFixed(3)}); load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(", ")}`,
  );
  console.log(
    `log on / log off (${r.engine}): ${r.ratio.toFixed(3)} → goal ≥ 0.95 ${r.ratio >= 0.95 ? "met" : "NOT met"}`,
  );
}

async function main(): Promise<void> {
  const quick = process.env.BENCH_QUICK === "1";
  const engines = (process.env.BENCH_AUDIT_ENGINES ?? "sqlite,postgres").split(",") as Array<
    "sqlite" | "postgres"
  >;
  const gen = LoadGenerator.start();
  try {
    for (const engine of engines) printAuditOverhead(await auditOverhead(gen, engine, quick));
  } finally {
    await gen.stop();
    closeBenchConnections();
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
