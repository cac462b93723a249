/**
 * Triggers benchmark (`npm run bench:triggers`). Everything real: anvil, the contracts, the relayer,
 * the executor. Prints a ratio against a baseline measured in the same run, on the same stack:
 *
 *  p95 latency of another account's `svc_action` runs while one webhook trigger is flooded (1,000
 *  calls, `max_queued_runs: 20`: 20 queued and run, the rest refused 429), against the same runs
 *  with no flood, alternated round by round. Goal: ratio ≈ 1 (a refused hook call costs the relayer
 *  little; the queued runs are shared fairly with other accounts by the executor).
 *
 * Who runs where, so that the ratio measures the relayer and not the load: the relayer alone in this
 * process (which only drives the two generators between phases and waits for them during one); the
 * other account's clients in one forked load generator (bench/loadgen.ts), the flood in another, each
 * with its own event loop, both over HTTP to 127.0.0.1. Every loop is bounded in count and in time.
 * Each round has three phases: without a flood, during the same flood sent to a bare server in the
 * flood generator's process (the control: what a flood costs this machine without the relayer), and
 * during the flood of the trigger.
 *
 * Then the intake's own cost, in CPU rather than latency (so the machine's load matters less): the
 * relayer process's CPU time (process.cpuUsage: user + system, every thread) per call while the same
 * flood hits a known-full trigger through the relayer's server (the hooks' fast path answers) and
 * through the same Express app on a server of its own (the app answers every call), alternated
 * round by round; the ratio app / fast path is what the fast path saves a refused call. That trigger's
 * runs_per_minute equals its max_queued_runs (20), so after its first fill it stays refused (its
 * queue, then its minute) and every call of those rounds is a refusal: with 600, as before, the
 * runner drained its queue at full speed (no other account runs then), and the rounds counted the
 * runs that let in and the calls each claimed run let cross to the main thread as the cost of
 * "refused" calls. Each phase and CPU round also prints what crossed to the main thread.
 *
 * Method: a first, uncounted flood round (printed, labelled cold): the first round was often the
 * worst, and what is cold in it is one-time start-up (the hooks' thread's code not yet optimised, the
 * flooded account's action never yet run in the executor's workers, the first hint), which no later
 * flood pays again. The flood scales with the victims' phase, and each round says whether the flood
 * lasted the whole phase (one that ends first leaves part of "during" measuring no flood).
 *
 * Knobs (environment): BENCH_ROUNDS (3), BENCH_VICTIM_CLIENTS (8), BENCH_VICTIM_RUNS (240 a phase),
 * BENCH_FLOOD (1,000 calls a round per 240 victim runs), BENCH_FLOOD_CLIENTS (50), BENCH_TRIGGER_RUN=0 (the runner off:
 * intake only), BENCH_TRIGGER_WORKERS (4), BENCH_HOOKS_LISTENER=1 (the hooks on their own listener, a
 * thread of their own: `triggers.hooksPort`; the triggers' URLs then point there, so the flood and the
 * CPU rounds' "fast path" calls go to it), BENCH_FLOOD_NICE=1 (the flood generator's process at the
 * lowest priority, nice 19: on this shared machine the attacker's CPU competes with the relayer's, on a
 * real deployment it is somebody else's machine; a labelled extra measurement, not the plain one),
 * BENCH_WARM_FLOOD=0 (no uncounted first flood: the method before), BENCH_CPU_RUNS_PER_MINUTE (20; 600
 * is the CPU rounds' method before).
 */
import * as http from "node:http";
import * as os from "node:os";
import type { AddressInfo } from "node:net";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import type { HttpRequestSpec } from "./loadgen";
import { LoadGenerator, pct, type Stats } from "./loadgenClient";
import { threadCpuNs } from "./threadCpu";
import { startStack, setupAccount, type Stack } from "../testkit/stack";

const env = (name: string, def: number) => Number(process.env[name] ?? def);
const ROUNDS = env("BENCH_ROUNDS", 3);
const VICTIM_CLIENTS = env("BENCH_VICTIM_CLIENTS", 8);
const VICTIM_RUNS = env("BENCH_VICTIM_RUNS", 240);
/** 1,000 calls for the default 240 victim runs, scaled with them, so that the flood lasts the phase. */
const FLOOD = env("BENCH_FLOOD", Math.round((1_000 * VICTIM_RUNS) / 240));
const FLOOD_CLIENTS = env("BENCH_FLOOD_CLIENTS", 50);
const RUNNER_ON = process.env.BENCH_TRIGGER_RUN !== "0";
/** Trigger runs in flight at once on the instance (`triggers.workers`, 4 by default). */
const TRIGGER_WORKERS = env("BENCH_TRIGGER_WORKERS", 4);
const HOOKS_LISTENER = process.env.BENCH_HOOKS_LISTENER === "1";
const FLOOD_NICE = process.env.BENCH_FLOOD_NICE === "1";
/** A flood round before round 1, printed (labelled cold) and not counted: see the header. */
const WARM_FLOOD = process.env.BENCH_WARM_FLOOD !== "0";
/** The CPU rounds' trigger's runs_per_minute (= its max_queued_runs, 20: nothing drains; 600: as before). */
const CPU_RUNS_PER_MINUTE = env("BENCH_CPU_RUNS_PER_MINUTE", 20);
/** No phase may run longer than this (a stuck relayer ends the bench instead of hanging it). */
const PHASE_DEADLINE_MS = 60_000;

/** Waits (bounded) until the trigger has no run queued or running, so the next baseline is quiet. */
async function settle(s: Stack, key: string, triggerId: string): Promise<void> {
  const until = Date.now() + PHASE_DEADLINE_MS;
  while (Date.now() < until) {
    let busy = 0;
    for (const status of ["queued", "running"]) {
      const r = await s.api("GET", `/core/v1/triggers/${triggerId}/runs?status=${status}&page_size=1`, {
        key,
      });
      busy += Number(r.body.total);
    }
    if (busy === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`trigger ${triggerId} still has runs after ${PHASE_DEADLINE_MS} ms`);
}

/**
 * What a phase cost this process (the relayer's): its main event loop's busy time (event-loop
 * utilisation) and delay (how late a 10 ms timer fires: what a request waiting on the loop waits), and
 * the CPU of every thread (the main loop, the executor's workers, the hooks' thread, libuv's pool).
 */
function phaseMeter() {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const main0 = threadCpuNs();
  delay.enable();
  return () => {
    delay.disable();
    const elu = performance.eventLoopUtilization(elu0);
    const cpu = process.cpuUsage(cpu0);
    const main1 = threadCpuNs();
    return {
      /** The main thread's own CPU (null without /proc): the rest of cpuMs is the other threads'. */
      mainCpuMs: main0 === null || main1 === null ? null : (main1 - main0) / 1e6,
      mainBusyMs: elu.active,
      wallMs: elu.active + elu.idle,
      cpuMs: (cpu.user + cpu.system) / 1000,
      delayMeanMs: delay.mean / 1e6,
      delayP99Ms: delay.percentile(99) / 1e6,
      delayMaxMs: delay.max / 1e6,
    };
  };
}
type PhaseCost = ReturnType<ReturnType<typeof phaseMeter>>;

const fmtCost = (c: PhaseCost) =>
  `main loop busy ${c.mainBusyMs.toFixed(0)} of ${c.wallMs.toFixed(0)} ms, delay mean ${c.delayMeanMs.toFixed(1)} p99 ${c.delayP99Ms.toFixed(1)} max ${c.delayMaxMs.toFixed(1)} ms; process CPU ${c.cpuMs.toFixed(0)} ms` +
  (c.mainCpuMs === null
    ? ""
    : ` (main thread ${c.mainCpuMs.toFixed(0)}, other threads ${(c.cpuMs - c.mainCpuMs).toFixed(0)})`);

/**
 * The flooded trigger's runs (the runner's own record): how many, their wall time from claim to finish,
 * and how many started while the flood lasted (`floodFrom`–`floodTo`, this machine's clock) and while
 * the other account's phase did (to `phaseTo`), with the first and last start after the flood began.
 */
async function runsOf(
  s: Stack,
  key: string,
  triggerId: string,
  floodFrom: number,
  floodTo: number,
  phaseTo: number,
): Promise<{ n: number; ms: number; inFlood: number; inPhase: number; firstMs: number; lastMs: number }> {
  const r = await s.api("GET", `/core/v1/triggers/${triggerId}/runs?page_size=100`, { key });
  const items = (r.body.items ?? []) as Array<{ started_at: string | null; finished_at: string | null }>;
  let ms = 0;
  let inFlood = 0;
  let inPhase = 0;
  let firstMs = Infinity;
  let lastMs = -Infinity;
  for (const i of items) {
    if (!i.started_at) continue;
    const started = Date.parse(i.started_at);
    if (i.finished_at) ms += Date.parse(i.finished_at) - started;
    if (started >= floodFrom && started <= floodTo) inFlood++;
    if (started >= floodFrom && started <= phaseTo) inPhase++;
    firstMs = Math.min(firstMs, started - floodFrom);
    lastMs = Math.max(lastMs, started - floodFrom);
  }
  return { n: items.length, ms, inFlood, inPhase, firstMs, lastMs };
}

const fmt = (x: Stats) =>
  `p50 ${x.p50.toFixed(1)} ms, p95 ${x.p95.toFixed(1)} ms (n=${x.n}, ${x.rps.toFixed(0)}/s)`;

async function main(): Promise<void> {
  const s = await startStack({
    triggers: {
      run: RUNNER_ON,
      workers: TRIGGER_WORKERS,
      pollMs: 50,
      hookPerIpPerMinute: 1_000_000,
      hookPerTriggerPerMinute: 1_000_000,
      ...(HOOKS_LISTENER ? { hooksPort: 0 } : {}),
    },
  });
  const victims = LoadGenerator.start();
  const flooder = LoadGenerator.start();
  if (FLOOD_NICE) os.setPriority(flooder.pid!, 19);
  try {
    const victim = await setupAccount(s, "async function main() { return 1; }");
    const flooded = await setupAccount(s, "async function main() { return 2; }");
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: flooded.accountKey,
      body: { name: "t", execute_in_groups: [flooded.groupId] },
    });
    const victimRun: HttpRequestSpec = {
      url: `${s.url}/core/v1/svc_action`,
      body: { cid: victim.cid, pkp_id: victim.pkpId },
      headers: { "x-api-key": victim.accountKey },
      expectStatus: 200,
      rejectHasError: true,
    };
    // Warm the executor and the connections before anything is measured.
    await victims.http(VICTIM_CLIENTS, VICTIM_RUNS / 2, victimRun);

    // The control: the same flood at a bare server in the flood generator's process (what the flood
    // costs this machine without touching the relayer: the generator's CPU, the kernel's, a refusal).
    const bareUrl = `http://127.0.0.1:${await flooder.bareServer()}/hooks/v1/bare`;
    const bareHook: HttpRequestSpec = { url: bareUrl, body: {}, expectStatus: 429 };

    const rows: Array<{
      before: Stats;
      during: Stats;
      control: Stats;
      flood: Stats;
      statuses: Record<number, number>;
    }> = [];
    let coldRatio: number | null = null;
    let shortFloods = 0;
    // What the hooks' thread handed the main thread (lookups, calls) since `from`: without the listener
    // every hook call is the main thread's; with it only these are.
    const handed = () => ({ ...(s.relayer.hooks?.handed ?? { lookups: 0, calls: 0 }) });
    const crossed = (from: { lookups: number; calls: number }) =>
      s.relayer.hooks
        ? `; crossed to the main thread: ${s.relayer.hooks.handed.calls - from.calls} calls, ${s.relayer.hooks.handed.lookups - from.lookups} lookups`
        : "";
    for (let round = WARM_FLOOD ? -1 : 0; round < ROUNDS; round++) {
      const label = round < 0 ? "warm-up (cold; not counted)" : `round ${round + 1}`;
      let meter = phaseMeter();
      const before = await victims.http(VICTIM_CLIENTS, VICTIM_RUNS, victimRun);
      const beforeCost = meter();
      meter = phaseMeter();
      const [control, controlFlood] = await Promise.all([
        victims.http(VICTIM_CLIENTS, VICTIM_RUNS, victimRun),
        flooder.tally(FLOOD_CLIENTS, FLOOD, bareHook, PHASE_DEADLINE_MS),
      ]);
      const controlCost = meter();
      const t = await s.api("POST", "/core/v1/triggers", {
        key: flooded.accountKey,
        body: {
          name: `flood-${round + 1}`,
          kind: "webhook",
          cid: flooded.cid,
          pkp_ids: [flooded.pkpId],
          run_as: { key_address: k.body.id },
          limits: { max_queued_runs: 20, runs_per_minute: 600, concurrency: "parallel" },
        },
      });
      if (t.status !== 201) throw new Error(`trigger: ${t.status} ${JSON.stringify(t.body)}`);
      const hook: HttpRequestSpec = { url: t.body.webhook.url, body: {}, expectStatus: 202 };
      meter = phaseMeter();
      const handed0 = handed();
      const floodFrom = Date.now();
      let floodTo = 0;
      let victimsTo = 0;
      const [during, flood] = await Promise.all([
        victims.http(VICTIM_CLIENTS, VICTIM_RUNS, victimRun).then((r) => {
          victimsTo = Date.now();
          return r;
        }),
        flooder.tally(FLOOD_CLIENTS, FLOOD, hook, PHASE_DEADLINE_MS).then((r) => {
          floodTo = Date.now();
          return r;
        }),
      ]);
      const phaseTo = Date.now();
      const duringCost = meter();
      const duringCrossed = crossed(handed0);
      // A flood that ends before the victims' phase leaves part of "during" measuring no flood.
      const floodShort = floodTo < victimsTo;
      if (round >= 0) {
        rows.push({ before, during, control, flood: flood.stats, statuses: flood.statuses });
        if (floodShort) shortFloods++;
      } else coldRatio = during.p95 / before.p95;
      if (RUNNER_ON) await settle(s, flooded.accountKey, t.body.id);
      const runs = await runsOf(s, flooded.accountKey, t.body.id, floodFrom, floodTo, phaseTo);
      console.log(
        `         cost    without: ${fmtCost(beforeCost)}\n` +
          `                 control: ${fmtCost(controlCost)}; flood generator CPU ${(controlFlood.cpuUs / 1000).toFixed(0)} ms\n` +
          `                 during:  ${fmtCost(duringCost)}; flood generator CPU ${(flood.cpuUs / 1000).toFixed(0)} ms${duringCrossed}\n` +
          `                 the flood's ${runs.n} runs: ${runs.ms} ms claimed to finished in all; ` +
          `${runs.inFlood} started during the flood (${floodTo - floodFrom} ms; the victims' phase ${victimsTo - floodFrom} ms${floodShort ? ": the flood ended first" : ""}), ${runs.inPhase} before the phase ended (${phaseTo - floodFrom} ms)` +
          (runs.inPhase > 0
            ? `, first ${runs.firstMs} ms, last ${runs.lastMs} ms after the flood began`
            : ""),
      );
      console.log(
        `${label}: without ${fmt(before)}\n         control ${fmt(control)} (flood at a bare server)\n         during  ${fmt(during)} (${(during.n / during.rps).toFixed(2)} s)\n` +
          `         flood   ${JSON.stringify(flood.statuses)} in ${(flood.stats.n / flood.stats.rps).toFixed(2)} s, ` +
          `hook p50 ${flood.stats.p50.toFixed(1)} ms p95 ${flood.stats.p95.toFixed(1)} ms\n` +
          `         ratio p95 during / without: ${(during.p95 / before.p95).toFixed(2)}, p50: ${(during.p50 / before.p50).toFixed(2)}`,
      );
    }
    const accepted = rows.reduce((a, r) => a + (r.statuses[202] ?? 0), 0);
    const refused = rows.reduce((a, r) => a + (r.statuses[429] ?? 0), 0);
    const other = rows.reduce((a, r) => a + r.flood.n, 0) - accepted - refused;
    const ratios = rows.map((r) => (r.during.p95 / r.before.p95).toFixed(2));
    console.log(
      `\nrelayer in this process; ${VICTIM_CLIENTS} clients of another account and ${FLOOD_CLIENTS} flood clients in two forked generators; runner ${RUNNER_ON ? `on, ${TRIGGER_WORKERS} workers` : "off"}; hooks ${HOOKS_LISTENER ? "on their own listener (a thread)" : "on the main port"}${FLOOD_NICE ? "; flood generator at nice 19" : ""}`,
    );
    console.log(
      `flood: ${ROUNDS} x ${FLOOD} hook calls, ${accepted} accepted, ${refused} answered 429, ${other} other; ` +
        `${shortFloods} of ${ROUNDS} floods ended before the victims' phase (part of "during" without a flood)`,
    );
    console.log(
      `svc_action p95 ratio during / without, per round: ${ratios.join(", ")} (goal ≈ 1, ≤ 1.5)` +
        (coldRatio === null ? "" : `; the cold warm-up round, not counted: ${coldRatio.toFixed(2)}`),
    );
    console.log(
      `control (the same flood at a bare server, not the relayer) / without: ${rows.map((r) => (r.control.p95 / r.before.p95).toFixed(2)).join(", ")}`,
    );
    // One round's p95 is the 12th-slowest of 240 runs: a single stall moves it. Pooled over every
    // round (each phase's samples together) it is the run's steadier figure, read beside the control's.
    const pooled = (pick: (r: (typeof rows)[number]) => Stats) =>
      pct(
        rows.flatMap((r) => pick(r).sortedMs ?? []).sort((a, b) => a - b),
        95,
      );
    const [pWithout, pDuring, pControl] = [
      pooled((r) => r.before),
      pooled((r) => r.during),
      pooled((r) => r.control),
    ];
    console.log(
      `pooled over the ${rows.length} rounds, p95 without ${pWithout.toFixed(1)} ms, during ${pDuring.toFixed(1)} ms, control ${pControl.toFixed(1)} ms: ` +
        `during / without ${(pDuring / pWithout).toFixed(2)} (goal ≤ 1.5), control / without ${(pControl / pWithout).toFixed(2)}`,
    );

    // The intake's CPU per call: the relayer's server (fast path first) against its app alone.
    const appOnly = http.createServer(s.relayer.app);
    appOnly.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve) => appOnly.listen(0, "127.0.0.1", resolve));
    try {
      const t = await s.api("POST", "/core/v1/triggers", {
        key: flooded.accountKey,
        body: {
          name: "flood-cpu",
          kind: "webhook",
          cid: flooded.cid,
          pkp_ids: [flooded.pkpId],
          run_as: { key_address: k.body.id },
          limits: { max_queued_runs: 20, runs_per_minute: CPU_RUNS_PER_MINUTE, concurrency: "parallel" },
        },
      });
      const fastUrl: string = t.body.webhook.url;
      const path = new URL(fastUrl).pathname;
      const appUrl = `http://127.0.0.1:${(appOnly.address() as AddressInfo).port}${path}`;
      const cpuPerCall = async (url: string) => {
        const handed0 = handed();
        const before = process.cpuUsage();
        const main0 = threadCpuNs();
        const r = await flooder.tally(
          FLOOD_CLIENTS,
          FLOOD,
          { url, body: {}, expectStatus: 429 },
          PHASE_DEADLINE_MS,
        );
        const d = process.cpuUsage(before);
        const main1 = threadCpuNs();
        const us = (d.user + d.system) / r.stats.n;
        const mainUs = main0 === null || main1 === null ? null : (main1 - main0) / 1000 / r.stats.n;
        return { us, mainUs, genUs: r.cpuUs / r.stats.n, statuses: r.statuses, crossed: crossed(handed0) };
      };
      await cpuPerCall(fastUrl); // fills the queue; warms both paths' code
      await cpuPerCall(appUrl);
      const perCall = (c: { us: number; mainUs: number | null; genUs: number }) =>
        `${c.us.toFixed(0)} µs` +
        (c.mainUs === null
          ? ""
          : ` (main thread ${c.mainUs.toFixed(0)}, other threads ${(c.us - c.mainUs).toFixed(0)})`) +
        `, generator ${c.genUs.toFixed(0)} µs`;
      const cpu: Array<{ fast: number; app: number }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        const fast = await cpuPerCall(fastUrl);
        const app = await cpuPerCall(appUrl);
        cpu.push({ fast: fast.us, app: app.us });
        console.log(
          `cpu round ${round + 1}: relayer CPU per hook call: ${HOOKS_LISTENER ? "listener" : "fast path"} ${perCall(fast)} ${JSON.stringify(fast.statuses)}${fast.crossed}, app alone ${perCall(app)} ${JSON.stringify(app.statuses)}`,
        );
      }
      console.log(
        `relayer CPU per refused hook call, app alone / fast path, per round: ${cpu.map((c) => (c.app / c.fast).toFixed(2)).join(", ")}`,
      );
    } finally {
      await new Promise((resolve) => appOnly.close(resolve));
    }
  } finally {
    await victims.stop();
    await flooder.stop();
    await s.close();
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
