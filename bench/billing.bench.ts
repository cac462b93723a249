/**
 * Metering overhead per execution: assertCanAfford + chargeExecution around a real executor run,
 * against the same run unmetered, in the same process and the same run (alternating, so drift hits
 * both sides equally). Goal: ≤ 5 %.
 *
 *   npm run bench:billing            (BENCH_ROUNDS=… to change the sample size)
 *
 * The ledger is a real SQLite file (WAL, synchronous=NORMAL) in a temp folder. Two configurations:
 * the default write-behind charges (committed in batches every 50 ms) and strict mode
 * (chargeFlushMs: 0, one committed transaction per charge).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Enclave } from "../enclave";
import { ActionExecutor } from "../enclave";
import { type Principal, SimulatedProcessor, createBilling } from "../relayer/billing";

const WARMUP = 50;
const BLOCK = 20;
/** Runs per side (unmetered, metered), a multiple of BLOCK. */
const ROUNDS = Math.max(
  4 * BLOCK,
  Math.ceil(Number(process.env.BENCH_ROUNDS ?? 800) / (4 * BLOCK)) * 4 * BLOCK,
);
const CODE = "async function main(params) { return params.n + 1; }";
const CID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}
const pct = (x: number) => `${(x * 100).toFixed(2)} %`;

async function measure(
  executor: ActionExecutor,
  chargeFlushMs: number,
): Promise<{ direct: number; endToEnd: number }> {
  const dir = mkdtempSync(join(tmpdir(), "sigil-billing-bench-"));
  try {
    return await measureIn(dir, executor, chargeFlushMs);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measureIn(
  dir: string,
  executor: ActionExecutor,
  chargeFlushMs: number,
): Promise<{ direct: number; endToEnd: number }> {
  const billing = await createBilling({
    dbPath: join(dir, "billing.sqlite"),
    processor: new SimulatedProcessor(),
    signupCreditCents: 1_000_000_000,
    chargeFlushMs,
  });
  const p: Principal = {
    accountId: "1",
    keyAddress: "0x00000000000000000000000000000000000000aa",
    kind: "usage",
  };
  await billing.onAccountCreated(p.accountId);
  await billing.setKeySpendCap(p.accountId, p.keyAddress, 1_000_000_000); // exercise the cap check too

  const authorizePkp = async (id: string) => id;

  let ref = 0;
  const unmetered = async (n: number) => {
    const t = performance.now();
    const r = await executor.run({ code: CODE, cid: CID, jsParams: { n }, authorizePkp });
    if (r.has_error) throw new Error("action failed: " + JSON.stringify(r.error));
    return performance.now() - t;
  };
  const metered = async (n: number) => {
    const t = performance.now();
    await billing.assertCanAfford(p, "execution");
    const r = await executor.run({ code: CODE, cid: CID, jsParams: { n }, authorizePkp });
    if (r.has_error) throw new Error("action failed: " + JSON.stringify(r.error));
    await billing.chargeExecution(p, r.execution_ms, "bench-" + ref++, undefined, CID);
    return performance.now() - t;
  };

  for (let i = 0; i < WARMUP; i++) {
    await unmetered(i);
    await metered(i);
  }
  // Blocks of BLOCK runs, alternating unmetered and metered blocks (ABBA order), timed as a whole:
  // the block time includes everything metering costs, write-behind flushes included.
  const plain: number[] = [];
  const withBilling: number[] = [];
  const plainBlocks: number[] = [];
  const meteredBlocks: number[] = [];
  const runBlock = async (fn: (n: number) => Promise<number>, into: number[], blocks: number[]) => {
    const t = performance.now();
    for (let j = 0; j < BLOCK; j++) into.push(await fn(j));
    blocks.push(performance.now() - t);
  };
  for (let b = 0; b < ROUNDS / BLOCK; b++) {
    if (b % 2 === 0) {
      await runBlock(unmetered, plain, plainBlocks);
      await runBlock(metered, withBilling, meteredBlocks);
    } else {
      await runBlock(metered, withBilling, meteredBlocks);
      await runBlock(unmetered, plain, plainBlocks);
    }
  }

  // The metering calls alone, same ledger, same key: the cost added to each execution.
  const meterOnly: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const t = performance.now();
    await billing.assertCanAfford(p, "execution");
    await billing.chargeExecution(p, 3, "bench-only-" + i, undefined, CID);
    meterOnly.push(performance.now() - t);
  }

  const audit = await billing.audit(p.accountId);
  if (audit.balance_cents !== audit.ledger_sum_cents) throw new Error("ledger does not sum to the balance");
  const charged = WARMUP + ROUNDS * 2;
  if ((await billing.keySpend(p.keyAddress)).spent_cents !== charged)
    throw new Error(`expected ${charged} cents of spend`);

  const rows = [
    ["unmetered execution (trivial action, real SES executor)", mean(plain), median(plain)],
    ["metered execution (assertCanAfford + run + chargeExecution)", mean(withBilling), median(withBilling)],
    ["metering calls alone (assertCanAfford + chargeExecution)", mean(meterOnly), median(meterOnly)],
  ] as const;
  const mode =
    chargeFlushMs > 0
      ? `write-behind charges (flush every ${chargeFlushMs} ms)`
      : "strict charges (one commit per charge)";
  console.log(`\n## ${mode} — ${ROUNDS} rounds after ${WARMUP} warm-up, executor pool of 1 worker`);
  console.log("| measurement | mean ms | median ms |");
  console.log("|---|---:|---:|");
  for (const [name, m, med] of rows) console.log(`| ${name} | ${m.toFixed(3)} | ${med.toFixed(3)} |`);
  const direct = mean(meterOnly) / mean(plain);
  const directMedian = median(meterOnly) / median(plain);
  const endToEnd = median(meteredBlocks) / median(plainBlocks) - 1;
  console.log("");
  console.log(
    `overhead, metering cost / unmetered execution (medians): ${pct(directMedian)}   goal ≤ 5 %: ${directMedian <= 0.05 ? "met" : "NOT met"}`,
  );
  console.log(
    `overhead, metering cost / unmetered execution (means):   ${pct(direct)}   goal ≤ 5 %: ${direct <= 0.05 ? "met" : "NOT met"}`,
  );
  console.log(
    `overhead, metered / unmetered block time − 1 (medians of ${BLOCK}-run blocks): ${pct(endToEnd)}`,
  );

  await billing.close();
  return { direct: directMedian, endToEnd };
}

/**
 * A/A control: the same unmetered run on both sides, timed in the same block pattern. Its ratio is
 * the noise floor of the end-to-end line on this machine at this moment.
 */
async function control(executor: ActionExecutor): Promise<void> {
  const authorizePkp = async (id: string) => id;
  const run = async (n: number) => {
    const r = await executor.run({ code: CODE, cid: CID, jsParams: { n }, authorizePkp });
    if (r.has_error) throw new Error("action failed: " + JSON.stringify(r.error));
  };
  const a: number[] = [];
  const b: number[] = [];
  const block = async (into: number[]) => {
    const t = performance.now();
    for (let j = 0; j < BLOCK; j++) await run(j);
    into.push(performance.now() - t);
  };
  for (let i = 0; i < ROUNDS / BLOCK; i++) {
    if (i % 2 === 0) {
      await block(a);
      await block(b);
    } else {
      await block(b);
      await block(a);
    }
  }
  console.log(`\n## A/A control (unmetered on both sides, same block pattern)`);
  console.log(
    `block time B / A − 1 (medians): ${pct(median(b) / median(a) - 1)}  ← noise floor of the end-to-end lines`,
  );
}

async function main(): Promise<void> {
  const enclave = Enclave.fromRootKey("0x" + "5a".repeat(32));
  const executor = new ActionExecutor({ keys: enclave, poolSize: 1 });
  await executor.ready();
  console.log("# billing: metering overhead per execution (real SES executor, trivial action, same run)");
  // On a shared, busy machine every extra microsecond of main-thread work is amplified by the
  // scheduler; the load average tells the reader how much to trust the end-to-end line.
  console.log(
    `cores ${availableParallelism()}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")}`,
  );
  await measure(executor, 50);
  await measure(executor, 0);
  await control(executor);
  await executor.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
