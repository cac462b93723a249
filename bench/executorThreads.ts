/**
 * `npm run bench:executor-threads`: where a warm run's CPU goes, thread by thread (Linux only).
 *
 * One caller, a pool of one worker, sequential runs of the trivial and of the one-signature action
 * (the run's own PKP, served by the worker and the signer thread), alternated in rounds. Around each
 * round it reads every thread's CPU time (/proc/self/task/<tid>/schedstat, nanoseconds on a CPU) and
 * prints the CPU per run of: the main thread, the threads the executor started (the action worker and
 * the signer thread, told apart by their share in the one-signature rows: the signer thread does
 * nothing in a trivial run), and the process's other threads (V8's GC and compiler helpers, libuv).
 * A bare signature's CPU in the main thread (Enclave.pkpSignMessage), measured in the same rounds, is
 * the unit the goals are written in.
 *
 *   npm run bench:executor-threads   (THREADS_RUNS per round, THREADS_ROUNDS, THREADS_KINDS)
 */
import fs from "node:fs";
import os from "node:os";
import { ethers } from "ethers";
import { ActionExecutor, Enclave, type RunRequest } from "../enclave";

const CID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
const PKP = ethers.zeroPadValue("0x65", 32);
const TRIVIAL = `async function main() { return 1; }`;
const SIGN = `async function main(p) { return await Actions.signMessage({ pkpId: p.pkpId, message: "bench" }); }`;
const RUNS = Number(process.env.THREADS_RUNS ?? 2_000);
const ROUNDS = Number(process.env.THREADS_ROUNDS ?? 4);
/** THREADS_KINDS=sign: the one-signature rows alone (for a CPU profile of that run). */
const KINDS = process.env.THREADS_KINDS === "sign" ? (["sign"] as const) : (["trivial", "sign"] as const);

/** Nanoseconds on a CPU of every thread of this process, by thread id. */
function threadCpu(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of fs.readdirSync("/proc/self/task")) {
    try {
      out.set(Number(tid), Number(fs.readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]));
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

function delta(after: Map<number, number>, before: Map<number, number>): Map<number, number> {
  const d = new Map<number, number>();
  for (const [tid, ns] of after) d.set(tid, ns - (before.get(tid) ?? 0));
  return d;
}

async function main(): Promise<void> {
  const enclave = Enclave.fromRootKey("0x" + "42".repeat(32));
  const request = (code: string): RunRequest => ({
    code,
    cid: CID,
    jsParams: { pkpId: PKP },
    authorizePkp: async (id: string) => id,
    ...(code === SIGN ? { runPkp: { ref: PKP, scope: 0 } } : {}),
  });
  const before = new Set(threadCpu().keys());
  const executor = new ActionExecutor({ keys: enclave, poolSize: 1 });
  await executor.ready();
  for (let i = 0; i < 1_000; i++) await executor.run(request(i % 2 ? TRIVIAL : SIGN)); // warm-up
  for (let i = 0; i < 500; i++) enclave.pkpSignMessage(PKP, "bench");
  const started = [...threadCpu().keys()].filter((t) => !before.has(t)).sort((a, b) => a - b);

  const totals = { trivial: new Map<number, number>(), sign: new Map<number, number>(), bare: 0 };
  const add = (into: Map<number, number>, d: Map<number, number>) => {
    for (const [tid, ns] of d) into.set(tid, (into.get(tid) ?? 0) + ns);
  };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? KINDS : [...KINDS].reverse();
    for (const kind of order) {
      const t0 = threadCpu();
      for (let i = 0; i < RUNS; i++) {
        const r = await executor.run(request(kind === "sign" ? SIGN : TRIVIAL));
        if (r.has_error) throw new Error(JSON.stringify(r.error));
      }
      add(totals[kind], delta(threadCpu(), t0));
    }
    const b0 = threadCpu().get(process.pid) ?? 0;
    for (let i = 0; i < RUNS; i++) enclave.pkpSignMessage(PKP, "bench");
    totals.bare += (threadCpu().get(process.pid) ?? 0) - b0;
  }
  await executor.close();

  const n = RUNS * ROUNDS;
  const bareUs = totals.bare / n / 1000;
  const us = (m: Map<number, number>, pick: (tid: number) => boolean) =>
    [...m].filter(([tid]) => pick(tid)).reduce((s, [, ns]) => s + ns, 0) / n / 1000;
  console.log(
    `executor CPU by thread: node ${process.version}, ${os.cpus().length} CPUs, pool of 1, one caller, ${ROUNDS} rounds of ${RUNS} runs, load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(" ")}`,
  );
  console.log(`  bare signature (main thread): ${bareUs.toFixed(1)} µs`);
  console.log(
    "  µs of CPU per run           " +
      ["main", ...started.map((_, i) => `started #${i + 1}`), "other", "all", "×bare"]
        .map((h) => h.padStart(11))
        .join(""),
  );
  for (const kind of KINDS) {
    const m = totals[kind];
    const main = us(m, (t) => t === process.pid);
    const own = started.map((s) => us(m, (t) => t === s));
    const other = us(m, (t) => t !== process.pid && !started.includes(t));
    const all = us(m, () => true);
    console.log(
      `  ${(kind === "sign" ? "one signature" : "trivial").padEnd(28)}` +
        [main, ...own, other, all, all / bareUs].map((x) => x.toFixed(1).padStart(11)).join(""),
    );
  }
  const load = os.loadavg()[0];
  console.log(`  load average at the end: ${load.toFixed(1)}`);
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
