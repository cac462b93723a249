/**
 * Reproduces the stall of trivial runs under load (docs/performance.md, "The 30-second stall"): the
 * warm-up pattern of bench:relayer (50 concurrent clients sending a one-signature action, or
 * `return 1`, to a cold executor: its workers just started), on a fresh stack per round, and every run
 * slower than STALL_REPORT_MS (5 s) reported with its answer. The executor's warn lines (where a run
 * stopped at its wall-time limit was: pool.ts, WallTimeStop) are printed as they come.
 *
 *   npx ts-node --transpile-only bench/stall.ts
 *   STALL_ROUNDS=5 STALL_PER_CLIENT=6 STALL_ACTION=one STALL_BURN=4 npx ts-node --transpile-only bench/stall.ts
 *
 * STALL_BURN=n starts n busy-loop processes (nice STALL_BURN_NICE, default 10) for the rounds' duration, to load a quiet machine
 * as the colleagues who saw the stall had it (load 7-17 on 2 CPUs).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as os from "node:os";
import pino from "pino";
import { startStack } from "../testkit/stack";
import { keepAliveAgent, postBytes } from "./httpPost";

const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const ROUNDS = num("STALL_ROUNDS", 3);
const CLIENTS = num("STALL_CLIENTS", 50);
const PER_CLIENT = num("STALL_PER_CLIENT", 2);
/** Bursts per stack: the first meets a cold executor; each burst's tail frees workers while runs queue. */
const BURSTS = num("STALL_BURSTS", 10);
const REPORT_MS = num("STALL_REPORT_MS", 5_000);
const BURN = num("STALL_BURN", 0);
const BURN_NICE = num("STALL_BURN_NICE", 10);
const ACTION = process.env.STALL_ACTION === "one" ? "one" : "sign";

const agent = keepAliveAgent();
const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  postBytes(agent, url, Buffer.from(JSON.stringify(body)), headers);
const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(" ");

function burners(n: number): ChildProcess[] {
  const code = "process.title='stall-burn'; for (;;) {}";
  return Array.from({ length: n }, () => {
    const child = spawn(process.execPath, ["-e", code], { stdio: "ignore" });
    if (child.pid !== undefined) os.setPriority(child.pid, BURN_NICE);
    return child;
  });
}

async function round(index: number): Promise<{ runs: number; slow: string[] }> {
  // Warn level only: the executor's stop lines (and any other warning) reach stdout.
  const logger = pino({ level: "warn", base: { round: index } });
  const s = await startStack({
    executor: { poolSize: 2 },
    logger,
    rateLimits: {
      perKeyPerMinute: 1e9,
      perAccountPerMinute: 1e9,
      newAccountPerIpPerHour: 1e9,
      concurrentExecutionsPerAccount: 1000,
    },
  });
  try {
    const acct = JSON.parse((await post(`${s.url}/core/v1/new_account`, {})).body);
    const auth = { "x-api-key": acct.api_key as string };
    const pkp = JSON.parse((await post(`${s.url}/core/v1/pkps/create`, {}, auth)).body).pkp_id as string;
    const code =
      ACTION === "one"
        ? "async function main() { return 1; }"
        : `async function main(p) { return await Actions.signMessage({ pkpId: "${pkp}", message: p.m }); }`;
    const cid = JSON.parse((await post(`${s.url}/core/v1/actions`, { code }, auth)).body).cid as string;
    await post(`${s.url}/core/v1/groups`, { name: "stall", pkps: [pkp], actions: [cid] }, auth);
    const usage = JSON.parse(
      (await post(`${s.url}/core/v1/add_usage_api_key`, { name: "stall", execute_in_groups: [0] }, auth))
        .body,
    ).usage_api_key as string;
    const body = { cid, pkp_id: pkp, js_params: { m: "bench" } };
    const slow: string[] = [];
    let runs = 0;
    // Cold: the first burst's requests reach workers that have not run anything yet, all 50 at once.
    for (let burst = 0; burst < BURSTS; burst++)
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, client) => {
          for (let i = 0; i < PER_CLIENT; i++) {
            const t0 = performance.now();
            const r = await post(`${s.url}/core/v1/svc_action`, body, { "x-api-key": usage });
            const ms = performance.now() - t0;
            runs++;
            if (ms > REPORT_MS) {
              let answer = r.body.slice(0, 160);
              try {
                const j = JSON.parse(r.body);
                answer = JSON.stringify({ has_error: j.has_error, error: j.error ?? j.code });
              } catch {
                // not JSON: the first characters are shown
              }
              slow.push(
                `burst ${burst} client ${client} request ${i}: ${ms.toFixed(0)} ms, status ${r.status}, ${answer}`,
              );
            }
          }
        }),
      );
    return { runs, slow };
  } finally {
    await s.close();
  }
}

async function main(): Promise<void> {
  const burn = burners(BURN);
  try {
    console.log(
      `stall driver: ${ROUNDS} rounds × ${BURSTS} bursts × ${CLIENTS} clients × ${PER_CLIENT} runs of "${ACTION}", burners ${BURN}, load ${load()}`,
    );
    let total = 0;
    let slowTotal = 0;
    for (let i = 1; i <= ROUNDS; i++) {
      const t0 = performance.now();
      const { runs, slow } = await round(i);
      total += runs;
      slowTotal += slow.length;
      console.log(
        `round ${i}: ${runs} runs in ${((performance.now() - t0) / 1000).toFixed(1)} s, ${slow.length} over ${REPORT_MS} ms, load ${load()}`,
      );
      for (const line of slow) console.log(`  ${line}`);
    }
    console.log(`total: ${total} runs, ${slowTotal} over ${REPORT_MS} ms`);
  } finally {
    for (const b of burn) b.kill();
  }
}

if (require.main === module)
  main().catch((e) => {
    console.error(e);
    process.exitCode = 1;
  });
