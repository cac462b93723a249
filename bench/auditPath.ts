/**
 * Where the audit log's cost goes, without the noise of a whole stack (npm run bench:audit measures
 * the whole request; on a shared, loaded machine its ratio swings by ±0.3 between runs): the process's
 * CPU per entry (the main thread's and, on SQLite in a file, the log's writer thread's: sqliteWriter.ts) for writing entries as 50 concurrent requests do (record: the canonical JSON
 * and the INSERT into audit_pending, before the answer) and for chaining them behind the answers, on
 * SQLite, with the chaining window at 0 (a pass per turn of the event loop) and at the default, in the
 * same run. Printed as µs of CPU per entry and as the ratio of the two windows.
 *
 * `npm run bench:audit-path`.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Wallet } from "ethers";
import pino from "pino";
import { AuditLog, DEFAULT_CHAIN_AFTER_MS } from "../relayer/audit/log";
import type { ExecutionData, PendingEntry } from "../relayer/audit/entries";
import { openDataLayer } from "../relayer/db";

const CLIENTS = 50;

function entry(i: number): PendingEntry {
  const data: ExecutionData = {
    request_id: "req-" + i,
    principal: { kind: "usage_key", address: "0x" + "ab".repeat(20) },
    cid: "QmS1GkTUCcMk3Hb8ASTdRzBUPxf7dwaZLPaFvFHmaBWWmt",
    pkp_named: "0x" + "cd".repeat(32),
    pkps_used: ["0x" + "cd".repeat(32)],
    key_operations: [
      { operation: "message", allowed: true, pkp: "0x" + "cd".repeat(32), digest: "0x" + "ef".repeat(32) },
    ],
    key_operation_count: 1,
    response_sha256: "0x" + "12".repeat(32),
    has_error: false,
    error_code: null,
    duration_ms: 3.5,
    charged_cents: 0,
    instance: "bench",
  };
  return {
    account: "1",
    kind: "execution",
    timeMs: Date.now(),
    data,
    principal: data.principal.address,
    cid: data.cid,
    pkps: data.pkps_used,
    outcome: "ok",
  };
}

/** CPU µs per entry: recording `n` entries 50 at a time (each batch as concurrent requests), then chaining. */
async function measure(chainAfterMs: number, n: number): Promise<{ record: number; total: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-audit-path-"));
  const db = await openDataLayer({ sqlitePath: path.join(dir, "audit.sqlite") });
  const wallet = Wallet.createRandom();
  const log = new AuditLog(
    db,
    { address: wallet.address, sign: (digest) => wallet.signMessageSync(digest) },
    "bench",
    { chainAfterMs, sweepMs: 3_600_000 },
    pino({ level: "silent" }),
  );
  try {
    const t0 = process.cpuUsage();
    let recordUs = 0;
    for (let i = 0; i < n; i += CLIENTS) {
      const r0 = process.cpuUsage();
      await Promise.all(Array.from({ length: CLIENTS }, (_, k) => log.record(entry(i + k))));
      const r = process.cpuUsage(r0);
      recordUs += r.user + r.system;
      // The turn the answers go out in: the chainer (window 0) runs here, as behind real answers.
      await new Promise((resolve) => setImmediate(resolve));
    }
    await log.flush();
    const t = process.cpuUsage(t0);
    return { record: recordUs / n, total: (t.user + t.system) / n };
  } finally {
    await log.stop();
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const n = process.env.BENCH_QUICK === "1" ? 2_000 : 20_000;
  await measure(0, 1_000); // warm-up
  const rounds = 3;
  const zero: Array<{ record: number; total: number }> = [];
  const dflt: Array<{ record: number; total: number }> = [];
  for (let k = 0; k < rounds; k++) {
    zero.push(await measure(0, n));
    dflt.push(await measure(DEFAULT_CHAIN_AFTER_MS, n));
  }
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  const f = (x: number) => x.toFixed(1);
  console.log(
    `\n## The audit log's main-thread CPU per entry (SQLite, ${CLIENTS} concurrent, ${n} entries, ${rounds} rounds)\n`,
  );
  console.log("| chaining window | record (before the answer) µs | record + chain µs |\n|---|---|---|");
  console.log(`| 0 ms | ${f(mean(zero.map((x) => x.record)))} | ${f(mean(zero.map((x) => x.total)))} |`);
  console.log(
    `| ${DEFAULT_CHAIN_AFTER_MS} ms (default) | ${f(mean(dflt.map((x) => x.record)))} | ${f(mean(dflt.map((x) => x.total)))} |`,
  );
  console.log(
    `\nrecord + chain, default window / window 0: ${(mean(dflt.map((x) => x.total)) / mean(zero.map((x) => x.total))).toFixed(3)}`,
  );
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
