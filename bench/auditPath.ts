/**
 * Where the audit log's CPU goes, thread by thread, without the noise of a whole stack (npm run
 * bench:audit measures whole requests; on a shared, loaded machine its ratio swings by ±0.3 between
 * runs). Executions' entries are recorded as 50 concurrent requests record them (recordExecution: the
 * entry built from the run's result, its canonical JSON, the hand-off to the writer, awaited as a
 * request awaits it before answering), then chained behind them with the default window, on SQLite in
 * a file and on PostgreSQL (embedded), and the CPU each thread or process used is divided by the
 * entries:
 *
 *  - the main thread (the relayer's event loop, which serves every request),
 *  - the SQLite writer thread (relayer/audit/sqliteWriter.ts),
 *  - the rest of the process (V8's garbage collector and libuv threads),
 *  - the PostgreSQL server (every backend process).
 *
 * Then the main thread's share split into its parts, each timed alone in the same run: building the
 * entry, its canonical JSON, and (SQLite) the structured clone of the rows handed to the writer.
 * CPU, not time: it does not depend on how many other processes the machine runs (bench/threadCpu.ts).
 *
 * `npm run bench:audit-path`; BENCH_QUICK=1 for a short run; BENCH_AUDIT_ENGINES=sqlite or postgres.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { randomBytes } from "node:crypto";
import pino from "pino";
import { Enclave, canonicalJson } from "../enclave";
import type { AuthContext } from "../relayer/auth";
import { AuditLog } from "../relayer/audit/log";
import { keyOperationsOf, recordExecution } from "../relayer/audit/record";
import { responseDigest } from "../relayer/audit/format";
import { openDataLayer, type DataLayer } from "../relayer/db";
import { startBenchPostgres, type BenchPostgres } from "./embeddedPostgres";
import { processCpuUs, threadCpuNs } from "./threadCpu";

/** Concurrent recorders (BENCH_AUDIT_CLIENTS; 50 by default): how many entries can share a transaction. */
const CLIENTS = Number(process.env.BENCH_AUDIT_CLIENTS ?? 50);
const PKP = "0x" + "cd".repeat(32);

/** An authenticated usage key of account 1, as the auth middleware hands it to a route. */
const AUTH = {
  principal: { kind: "usage", keyAddress: "0x" + "AB".repeat(20), accountId: "1" },
  ownerSession: false,
} as unknown as AuthContext;

/** A one-signature run's result, as the executor answers it. */
function runOf(i: number) {
  return {
    requestId: "req-" + i,
    cid: "QmS1GkTUCcMk3Hb8ASTdRzBUPxf7dwaZLPaFvFHmaBWWmt",
    pkpNamed: PKP,
    pkpsUsed: [PKP],
    result: {
      response: { signature: "0x" + "5a".repeat(65), message: "bench", n: i },
      has_error: false,
      execution_ms: 3.5,
      key_ops: 1,
      key_operations: [{ kind: "message", pkp: PKP, digest: "0x" + "ef".repeat(32) }],
    },
    chargedCents: 0,
  };
}

interface PerEntry {
  /** µs per entry */
  mainRecord: number;
  main: number;
  writer: number | null;
  otherThreads: number;
  server: number | null;
}

async function measure(
  engine: "sqlite" | "postgres",
  n: number,
  pg: BenchPostgres | null,
): Promise<PerEntry> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-audit-path-"));
  let db: DataLayer;
  if (engine === "postgres") {
    db = await openDataLayer({ databaseUrl: (pg as BenchPostgres).url, sqlitePath: "" });
    // Each round starts from empty tables: the same work per entry in every round.
    for (const t of ["audit_pending", "audit_entries", "audit_heads", "audit_checkpoints"])
      await db.exec(`DELETE FROM ${t}`);
  } else db = await openDataLayer({ sqlitePath: path.join(dir, "audit.sqlite") });
  // The enclave's own signer, as the relayer's (an ethers Wallet recomputes its public key per signature).
  const enclave = Enclave.fromRootKey(randomBytes(32));
  const log = new AuditLog(
    db,
    { address: enclave.attestationIdentity().address, sign: (d) => enclave.signAuditCheckpoint(d) },
    "bench",
    { sweepMs: 3_600_000 },
    pino({ level: "silent" }),
  );
  try {
    await recordExecution(log, AUTH, runOf(-1)); // the writer thread starts on the first write
    await log.flush();
    const main0 = threadCpuNs() ?? 0;
    const proc0 = processCpuUs();
    const writer0 = await log.store.writerCpuNs();
    const server0 = pg ? pg.cpuMs() : null;
    let recordNs = 0;
    for (let i = 0; i < n; i += CLIENTS) {
      const r0 = threadCpuNs() ?? 0;
      await Promise.all(Array.from({ length: CLIENTS }, (_, k) => recordExecution(log, AUTH, runOf(i + k))));
      recordNs += (threadCpuNs() ?? 0) - r0;
      // The turn the answers go out in, as behind real answers.
      await new Promise((resolve) => setImmediate(resolve));
    }
    await log.flush();
    const main = ((threadCpuNs() ?? 0) - main0) / 1000;
    const proc = processCpuUs() - proc0;
    const writer1 = await log.store.writerCpuNs();
    const writer = writer0 !== null && writer1 !== null ? (writer1 - writer0) / 1000 : null;
    const server1 = pg ? pg.cpuMs() : null;
    return {
      mainRecord: recordNs / 1000 / n,
      main: main / n,
      writer: writer === null ? null : writer / n,
      otherThreads: (proc - main - (writer ?? 0)) / n,
      server: server0 !== null && server1 !== null ? ((server1 - server0) * 1000) / n : null,
    };
  } finally {
    await log.stop();
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** µs of main-thread CPU per entry of each part of recording, each timed alone. */
function parts(n: number): Record<string, number> {
  // process.cpuUsage (getrusage: exact), not the scheduler's per-thread figure, which moves only at
  // the scheduler's ticks: too coarse for a few milliseconds. Only this thread works meanwhile.
  const time = (f: (i: number) => unknown) => {
    const t0 = processCpuUs();
    for (let i = 0; i < n; i++) f(i);
    return (processCpuUs() - t0) / n;
  };
  const runs = Array.from({ length: n }, (_, i) => runOf(i));
  const data = runs.map((r) => ({
    key_operations: keyOperationsOf(r.result),
    response_sha256: responseDigest(r.result.response),
    request_id: r.requestId,
    principal: { kind: "usage_key", address: "0x" + "ab".repeat(20) },
    cid: r.cid,
    pkp_named: PKP,
    pkps_used: [PKP],
    key_operation_count: 1,
    has_error: false,
    error_code: null,
    duration_ms: 3.5,
    charged_cents: 0,
    instance: "bench",
  }));
  const texts = data.map((d) => canonicalJson(d));
  const rows = texts.map((t, i) => [
    "1",
    "execution",
    1764218000000 + i,
    t,
    data[i].principal.address,
    data[i].cid,
    "," + PKP + ",",
    "ok",
  ]);
  return {
    "key operations (keyOperationsOf)": time((i) => keyOperationsOf(runs[i].result)),
    "response SHA-256 (responseDigest)": time((i) => responseDigest(runs[i].result.response)),
    "canonical JSON of the data": time((i) => canonicalJson(data[i])),
    "structured clone of the rows (per entry, batches of 50)": time((i) =>
      i % CLIENTS === 0 ? structuredClone(rows.slice(i, i + CLIENTS)) : null,
    ),
  };
}

async function main(): Promise<void> {
  // The writer thread does not hold the process open (sqliteWriter.ts): a server would; this does.
  const keepAlive = setInterval(() => undefined, 60_000);
  try {
    await report();
  } finally {
    clearInterval(keepAlive);
  }
}

async function report(): Promise<void> {
  const quick = process.env.BENCH_QUICK === "1";
  const n = quick ? 2_000 : 20_000;
  const rounds = quick ? 1 : 3;
  const engines = (process.env.BENCH_AUDIT_ENGINES ?? "sqlite,postgres").split(",") as Array<
    "sqlite" | "postgres"
  >;
  const f = (x: number | null) => (x === null ? "–" : x.toFixed(1));
  const mean = (xs: Array<number | null>) =>
    xs.some((x) => x === null) ? null : (xs as number[]).reduce((a, x) => a + x, 0) / xs.length;
  console.log(
    `load average at start: ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(", ")}`,
  );
  for (const engine of engines) {
    const pg = engine === "postgres" ? await startBenchPostgres("sigil_audit_path") : null;
    try {
      await measure(engine, 1_000, pg); // warm-up
      const got: PerEntry[] = [];
      for (let k = 0; k < rounds; k++) got.push(await measure(engine, n, pg));
      const m = (k: keyof PerEntry) => mean(got.map((g) => g[k]));
      const all = (m("main") ?? 0) + (m("writer") ?? 0) + (m("otherThreads") ?? 0) + (m("server") ?? 0);
      console.log(
        `\n## The audit log's CPU per entry, by thread (${engine}, ${CLIENTS} concurrent, ${n} entries, ${rounds} rounds)\n`,
      );
      console.log("| where | µs per entry |\n|---|---:|");
      console.log(`| main thread, recording (before the answers) | ${f(m("mainRecord"))} |`);
      console.log(`| main thread, all (recording + chaining + signing) | ${f(m("main"))} |`);
      console.log(`| SQLite writer thread | ${f(m("writer"))} |`);
      console.log(`| rest of the process (GC, libuv) | ${f(m("otherThreads"))} |`);
      console.log(`| PostgreSQL server | ${f(m("server"))} |`);
      console.log(`| **all threads and processes** | **${f(all)}** |`);
    } finally {
      await pg?.stop();
    }
  }
  console.log(`\n## The main thread's parts of recording an entry, each timed alone (${n} entries)\n`);
  console.log("| part | µs per entry |\n|---|---:|");
  for (const [k, v] of Object.entries(parts(n))) console.log(`| ${k} | ${f(v)} |`);
  console.log(
    `\nload average at end: ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(", ")}`,
  );
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
