/**
 * Relayer benchmark (`npm run bench:relayer`). Everything real: anvil, the contracts, the relayer with its
 * SES executor, HTTP over loopback. Prints ratios against baselines measured in the same run:
 *
 *  1. Executions over HTTP (hello world, and one PKP signature) at 1, 10 and 50 concurrent clients
 *     (at 50 also with the usage key never sent: signed requests, as a ratio to the bearer rate over
 *     alternated pairs of runs; and with a five-rule signing policy on the PKP's group, as a ratio to the
 *     same action without a policy over ten pairs in alternated order, ratio of the means and median
 *     pair, goal ≥ 0.95):
 *     requests/s and p50/p95/p99, against a bare Express JSON echo endpoint in the same process as the
 *     relayer, hit by the same client. Goal: p95 of the one-signature action at 50 clients < 50 ms (the reference system's own
 *     target is 2 s).
 *  2. Path-A writes (createPkp through the forwarder, each answered after its receipt) against raw
 *     pre-signed transactions of the same call sent straight to the registry by wallet owners, both with the
 *     same number of concurrent clients, each run on a fresh automining chain (writeRun explains why).
 *     Goal: ≥ 50% of the raw rate. The relayer batches forward requests that are ready together into
 *     one executeBatch transaction (relayer/chain/sender.ts); each raw transaction carries one call.
 *
 * The measured clients (HTTP and raw-transaction senders alike) run in a separate process, bench/loadgen.ts,
 * forked once and driven over IPC: real clients are other processes, and clients in the server's process
 * would compete with its main thread. Baselines and measured rows go through that same generator.
 */
import * as http from "node:http";
import * as os from "node:os";
import type { AddressInfo } from "node:net";
import express from "express";
import { NonceManager, Wallet, ZeroAddress, parseEther } from "ethers";
import { AccountRegistry__factory } from "../typechain-types";
import { DEV_KEY } from "../testkit/anvil";
import { startStack } from "../testkit/stack";
import { signRequest } from "sigil/sdk";
import { keepAliveAgent, postBytes } from "./httpPost";
import type { HttpRequestSpec } from "./loadgen";
import { LoadGenerator, type Stats } from "./loadgenClient";
import { auditOverhead, printAuditOverhead } from "./auditLog";
import { UNLIMITED_RATES, FIVE_RULE_POLICY } from "./benchStack";
import { cpuByThreadKind, cpuDelta, labelWorkerThreads, mainThreadCpuUs } from "./threadCpu";

const agent = keepAliveAgent();
const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  postBytes(agent, url, Buffer.from(JSON.stringify(body)), headers);

const f = (x: number) => x.toFixed(1);
const row = (name: string, s: Stats, base?: Stats) =>
  `| ${name.padEnd(34)} | ${String(s.n).padStart(5)} | ${f(s.rps).padStart(8)} | ${f(s.p50).padStart(6)} | ${f(s.p95).padStart(6)} | ${f(s.p99).padStart(6)} |${base ? ` ${(s.rps / base.rps).toFixed(2)}× |` : "  1.00× |"}`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const header =
  "| run                                |     n |    req/s | p50 ms | p95 ms | p99 ms | vs baseline |\n|---|---|---|---|---|---|---|";

const STACK_OPTIONS = {
  rateLimits: UNLIMITED_RATES,
  executor: { poolSize: 2 },
  gasWallets: 4,
};

/**
 * One write run on a fresh stack: `clients` concurrent clients, `perClient` createPkp each, either as
 * raw pre-signed transactions straight to the registry (one wallet owner per client, each with its own
 * account; the baseline) or through the relayer (one account key per client, path A).
 */
async function writeRun(
  kind: "raw" | "relayer",
  gen: LoadGenerator,
  clients: number,
  perClient: number,
): Promise<Stats> {
  const s = await startStack(STACK_OPTIONS);
  try {
    if (kind === "relayer") {
      const keys: string[] = [];
      for (let i = 0; i < clients; i++)
        keys.push(JSON.parse((await post(`${s.url}/core/v1/new_account`, {})).body).api_key);
      const createPkp = keys.map((k) => ({
        url: `${s.url}/core/v1/pkps/create`,
        body: {},
        headers: { "x-api-key": k },
        expectStatus: 201,
      }));
      await gen.httpPerClient(createPkp, 2); // warm-up: connections, JIT, the accounts in the permission cache
      return await gen.httpPerClient(createPkp, perClient);
    }
    const funder = new NonceManager(new Wallet(DEV_KEY, s.provider));
    const owners = Array.from({ length: clients }, () => Wallet.createRandom().connect(s.provider));
    for (const o of owners)
      await (await funder.sendTransaction({ to: o.address, value: parseEther("10") })).wait();
    const network = await s.provider.getNetwork();
    const presigned: string[][] = [];
    for (const o of owners) {
      const reg = AccountRegistry__factory.connect(s.deployment.registry, o);
      await (await reg.createAccount("raw", ZeroAddress)).wait();
      const data = reg.interface.encodeFunctionData("createPkp", ["", ""]);
      const gas = await s.provider.estimateGas({ from: o.address, to: s.deployment.registry, data });
      const gasPrice = (await s.provider.getFeeData()).gasPrice! * 2n;
      let nonce = await s.provider.getTransactionCount(o.address);
      const txs: string[] = [];
      for (let i = 0; i < perClient + 2; i++) {
        txs.push(
          await o.signTransaction({
            type: 0,
            chainId: network.chainId,
            to: s.deployment.registry,
            data,
            gasLimit: gas * 2n,
            gasPrice,
            nonce: nonce++,
          }),
        );
      }
      presigned.push(txs);
    }
    await gen.rawTx(
      s.chain.rpcUrl,
      presigned.map((txs) => txs.slice(0, 2)),
    ); // the same warm-up
    return await gen.rawTx(
      s.chain.rpcUrl,
      presigned.map((txs) => txs.slice(2)),
    );
  } finally {
    await s.close();
  }
}

async function main(): Promise<void> {
  const quick = process.env.BENCH_QUICK === "1";
  /** BENCH_WRITES_ONLY=1: only the path-A write comparison (the slow execution rows are skipped). */
  const writesOnly = process.env.BENCH_WRITES_ONLY === "1";
  /**
   * BENCH_EXECUTIONS_ONLY=1: only the execution rows against the echo baseline (no signed pairs, no
   * writes; the policy pairs do run), for before/after runs of the execution path on a noisy machine.
   */
  const executionsOnly = process.env.BENCH_EXECUTIONS_ONLY === "1";
  // Before the stack starts its threads: the policy pairs print the CPU of each kind of thread apart.
  labelWorkerThreads();
  const s = await startStack(STACK_OPTIONS);
  const echo = express();
  echo.post("/echo", express.json(), (req, res) => {
    res.json({ response: req.body });
  });
  const echoServer = http.createServer(echo);
  await new Promise<void>((r) => echoServer.listen(0, "127.0.0.1", () => r()));
  const echoUrl = `http://127.0.0.1:${(echoServer.address() as AddressInfo).port}/echo`;
  const gen = LoadGenerator.start();

  try {
    // ---- setup: one account, one PKP, a group listing both actions --------------------------------
    const acct = JSON.parse((await post(`${s.url}/core/v1/new_account`, {})).body);
    const key = acct.api_key as string;
    const auth = { "x-api-key": key };
    const pkp = JSON.parse((await post(`${s.url}/core/v1/pkps/create`, {}, auth)).body).pkp_id as string;
    const hello = "async function main() { return 'hello world'; }";
    const sign = `async function main(p) { return await Actions.signMessage({ pkpId: "${pkp}", message: p.m }); }`;
    const cids: string[] = [];
    for (const code of [hello, sign])
      cids.push(JSON.parse((await post(`${s.url}/core/v1/actions`, { code }, auth)).body).cid);
    await post(`${s.url}/core/v1/groups`, { name: "bench", pkps: [pkp], actions: cids }, auth);
    // A second PKP whose group has a five-rule signing policy (docs/policies.md) allowing the message.
    const pkpP = JSON.parse((await post(`${s.url}/core/v1/pkps/create`, {}, auth)).body).pkp_id as string;
    const signP = sign.replace(pkp, pkpP);
    const cidP = JSON.parse((await post(`${s.url}/core/v1/actions`, { code: signP }, auth)).body)
      .cid as string;
    const fiveRules = FIVE_RULE_POLICY;
    const policyCid = JSON.parse((await post(`${s.url}/core/v1/policies`, { policy: fiveRules }, auth)).body)
      .cid as string;
    const groupP = JSON.parse(
      (await post(`${s.url}/core/v1/groups`, { name: "bench-policy", pkps: [pkpP], actions: [cidP] }, auth))
        .body,
    ).group_id as number;
    await post(`${s.url}/core/v1/groups/${groupP}/policy`, { cid: policyCid }, auth);
    const usage = JSON.parse(
      (await post(`${s.url}/core/v1/add_usage_api_key`, { name: "bench", execute_in_groups: [0] }, auth))
        .body,
    ).usage_api_key as string;
    const uauth = { "x-api-key": usage };

    const exec = (cid: string): HttpRequestSpec => ({
      url: `${s.url}/core/v1/svc_action`,
      body: { cid, pkp_id: pkp, js_params: { m: "bench" } },
      headers: uauth,
      expectStatus: 200,
      rejectHasError: true,
    });
    const execUnderPolicy: HttpRequestSpec = {
      url: `${s.url}/core/v1/svc_action`,
      body: { cid: cidP, pkp_id: pkpP, js_params: { m: "bench" } },
      headers: uauth,
      expectStatus: 200,
      rejectHasError: true,
    };
    // Signed requests (one nonce each) by the SDK's signer, in this process. Every header set the runs
    // will send is made here, before the warm-up: signing thousands of requests leaves garbage that a
    // measured run would otherwise collect, and that is the bench's cost, not the relayer's.
    const usageWallet = new Wallet("0x" + usage.slice(3));
    const deployment = { chainId: 31337, registryAddress: s.deployment.registry };
    const signedBody = { cid: cids[1], pkp_id: pkp, js_params: { m: "bench" } };
    const signedBytes = Buffer.from(JSON.stringify(signedBody));
    const presign = (count: number) =>
      Array.from({ length: count }, () =>
        signRequest(usageWallet, deployment, "POST", "/core/v1/svc_action", signedBytes),
      );
    const signedExec = (headerSets: Array<Record<string, string>>): HttpRequestSpec => ({
      url: `${s.url}/core/v1/svc_action`,
      body: signedBody,
      headerSets,
      expectStatus: 200,
      rejectHasError: true,
    });
    const SIGNED_PAIRS = quick ? 1 : 5;
    const SIGNED_RUN = quick ? 100 : 3_000;
    /** Pairs for the policy ratio (a difference of a few percent: more than the signed pairs). */
    const POLICY_PAIRS = quick ? 2 : 10;
    const warmSigned = presign(1_800);
    const signedSets =
      writesOnly || executionsOnly ? [] : Array.from({ length: SIGNED_PAIRS }, () => presign(SIGNED_RUN));
    const echoOp: HttpRequestSpec = {
      url: echoUrl,
      body: { cid: cids[0], pkp_id: pkp, js_params: { m: "bench" } },
      expectStatus: 200,
    };
    // Warm-up (workers, JIT, connections, and the load generator's own JIT).
    await gen.http(4, 100, exec(cids[1]));
    // The signed path gets as much warm-up as the bearer path has had by its 50-client run (the 1- and
    // 10-client rows), so that JIT warmth is not what the ratio measures.
    await gen.http(10, 1_800, signedExec(warmSigned));
    await gen.http(4, 200, echoOp);
    await gen.http(10, 600, execUnderPolicy);

    const loadAvg = () =>
      os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(" ");
    console.log(`\nload average at start: ${loadAvg()} (${os.availableParallelism()} CPUs)`);
    console.log(
      "clients: a separate Node process (bench/loadgen.ts, node:http keep-alive agent, driven over IPC), " +
        "the same for every baseline and measured row",
    );
    if (!writesOnly)
      console.log("\n## Executions over HTTP (2 sandbox workers, loopback, keep-alive client)\n");
    if (!writesOnly) console.log(header);
    let sig50: Stats | null = null;
    let echo50: Stats | null = null;
    let signedRatio: number | null = null;
    let policyRatio: number | null = null;
    let policyMedian: number | null = null;
    let policyCpu: number | null = null;
    for (const clients of writesOnly ? [] : [1, 10, 50]) {
      const n = quick ? 100 : clients === 1 ? 300 : 1_500;
      const base = await gen.http(clients, n, echoOp);
      const h = await gen.http(clients, n, exec(cids[0]));
      const sg = await gen.http(clients, n, exec(cids[1]));
      console.log(row(`express echo, ${clients} clients (baseline)`, base));
      console.log(row(`hello world, ${clients} clients`, h, base));
      console.log(row(`one signature, ${clients} clients`, sg, base));
      if (clients === 50) {
        sig50 = sg;
        echo50 = base;
        // The same action with the usage key never sent: each request signed (SIGIL-REQUEST-V1), the
        // relayer checking the signature. Pairs of runs (bearer, then signed), alternated so that drift
        // in the machine's load hits both forms alike; the ratio is of the mean rates. A run of 1,500
        // lasts under a second here and single runs vary by ±10%, hence several longer pairs.
        const bearerRuns: Stats[] = [];
        const signedRuns: Stats[] = [];
        for (const headerSets of signedSets) {
          bearerRuns.push(await gen.http(clients, SIGNED_RUN, exec(cids[1])));
          signedRuns.push(await gen.http(clients, SIGNED_RUN, signedExec(headerSets)));
        }
        bearerRuns.forEach((r, k) => {
          console.log(row(`one signature, ${clients} clients, bearer ${k + 1}`, r, base));
          console.log(row(`one signature, ${clients} clients, signed ${k + 1}`, signedRuns[k], base));
        });
        const mean = (runs: Stats[]) => runs.reduce((a, r) => a + r.rps, 0) / runs.length;
        if (signedSets.length > 0) {
          const pairRatios = signedRuns.map((r, k) => r.rps / bearerRuns[k].rps);
          signedRatio = mean(signedRuns) / mean(bearerRuns);
          console.log(
            `\nsigned requests vs bearer key (one signature, ${clients} clients; ${SIGNED_PAIRS} alternated pairs of ${SIGNED_RUN}): ` +
              `${(signedRatio * 100).toFixed(1)}% of the bearer rate (pairs from ${(Math.min(...pairRatios) * 100).toFixed(0)}% to ${(Math.max(...pairRatios) * 100).toFixed(0)}%)`,
          );
        }
        // The same action with a five-rule policy on its PKP's group, against none. The difference
        // sought is a few percent and single runs of a few thousand vary by about as much, so: more
        // pairs than above, each pair's order alternated (plain first, then policy first: drift within
        // a pair hits both forms alike over the whole), and two figures, the ratio of the mean rates
        // and the median of the pairs' ratios (which one disturbed pair cannot move).
        // Besides the rates: this process's CPU time per execution (the relayer, its workers and
        // key threads; the clients are another process), which the machine's load moves far less
        // than it moves a rate.
        const plainRuns: Stats[] = [];
        const policyRuns: Stats[] = [];
        const cpuUs = { plain: 0, policy: 0 };
        // Of which the main thread's (null where the platform does not say: threadCpu.ts).
        const mainUs: Record<"plain" | "policy", number | null> = { plain: 0, policy: 0 };
        const byKind = { plain: new Map<string, number>(), policy: new Map<string, number>() };
        // Each run's CPU per kind of thread, in order: the pairs' differences, and their median.
        const runKinds = {
          plain: [] as Array<Map<string, number>>,
          policy: [] as Array<Map<string, number>>,
        };
        const measured = async (form: "plain" | "policy") => {
          const kinds0 = cpuByThreadKind();
          const before = process.cpuUsage();
          const mainBefore = mainThreadCpuUs();
          const st = await gen.http(clients, SIGNED_RUN, form === "plain" ? exec(cids[1]) : execUnderPolicy);
          const used = process.cpuUsage(before);
          const mainAfter = mainThreadCpuUs();
          cpuUs[form] += used.user + used.system;
          const m = mainUs[form];
          mainUs[form] =
            m === null || mainBefore === null || mainAfter === null ? null : m + mainAfter - mainBefore;
          const kinds = cpuDelta(kinds0, cpuByThreadKind());
          runKinds[form].push(kinds);
          for (const [kind, ns] of kinds) byKind[form].set(kind, (byKind[form].get(kind) ?? 0) + ns);
          (form === "plain" ? plainRuns : policyRuns).push(st);
        };
        for (let k = 0; k < POLICY_PAIRS; k++) {
          for (const form of k % 2 === 0 ? (["plain", "policy"] as const) : (["policy", "plain"] as const))
            await measured(form);
        }
        plainRuns.forEach((r, k) => {
          console.log(row(`one signature, ${clients} clients, no policy ${k + 1}`, r, base));
          console.log(row(`one signature, ${clients} clients, policy ${k + 1}`, policyRuns[k], base));
        });
        policyRatio = mean(policyRuns) / mean(plainRuns);
        const policyPairs = policyRuns.map((r, k) => r.rps / plainRuns[k].rps);
        policyMedian = median(policyPairs);
        console.log(
          `\nfive-rule signing policy vs none (one signature, ${clients} clients; ${POLICY_PAIRS} pairs of ${SIGNED_RUN}, order alternated): ` +
            `${(policyRatio * 100).toFixed(1)}% of the rate without a policy (ratio of the means); median pair ${(policyMedian * 100).toFixed(1)}% ` +
            `(pairs from ${(Math.min(...policyPairs) * 100).toFixed(0)}% to ${(Math.max(...policyPairs) * 100).toFixed(0)}%)`,
        );
        const perRun = (us: number) => us / (POLICY_PAIRS * SIGNED_RUN);
        policyCpu = cpuUs.policy / cpuUs.plain;
        console.log(
          `CPU of this process per execution: ${f(perRun(cpuUs.plain))} µs without a policy, ${f(perRun(cpuUs.policy))} µs under it ` +
            `(${(policyCpu * 100).toFixed(1)}%)`,
        );
        if (mainUs.plain !== null && mainUs.policy !== null)
          console.log(
            `  of which the main thread: ${f(perRun(mainUs.plain))} µs without, ${f(perRun(mainUs.policy))} µs under it ` +
              `(${((mainUs.policy / mainUs.plain) * 100).toFixed(1)}%); the other threads: ` +
              `${f(perRun(cpuUs.plain - mainUs.plain))} µs without, ${f(perRun(cpuUs.policy - mainUs.policy))} µs under it ` +
              `(${(((cpuUs.policy - mainUs.policy) / (cpuUs.plain - mainUs.plain)) * 100).toFixed(1)}%)`,
          );
        // Per kind of thread (Linux; threadCpu.ts): where a policy's CPU goes.
        for (const kind of [...new Set([...byKind.plain.keys(), ...byKind.policy.keys()])].sort()) {
          const a = perRun((byKind.plain.get(kind) ?? 0) / 1000);
          const b = perRun((byKind.policy.get(kind) ?? 0) / 1000);
          const diffs = runKinds.policy.map(
            (m, k) => ((m.get(kind) ?? 0) - (runKinds.plain[k].get(kind) ?? 0)) / 1000 / SIGNED_RUN,
          );
          console.log(
            `  ${kind}: ${f(a)} µs without, ${f(b)} µs under it (${(b - a).toFixed(1)} µs more; median pair ${f(median(diffs))})`,
          );
        }
        console.log(`  load average after the pairs: ${loadAvg()}`);
      }
    }

    const policyGoal = () =>
      `- a five-rule signing policy ≥ 95% of the rate without one (one signature, 50 clients): ` +
      `${policyRatio === null ? "?" : (policyRatio * 100).toFixed(1)}% (median pair ${policyMedian === null ? "?" : (policyMedian * 100).toFixed(1)}%; ` +
      `CPU per execution ${policyCpu === null ? "?" : (policyCpu * 100).toFixed(1)}% of that without) → ` +
      `${policyRatio !== null && policyRatio >= 0.95 ? "met" : "NOT met"}`;
    if (executionsOnly) {
      // Issue 25's goals for executions over HTTP.
      const ratio = sig50 && echo50 ? sig50.rps / echo50.rps : NaN;
      console.log("\n## Goals (executions)\n");
      console.log(
        `- one signature at 50 clients ≥ 50% of the echo rate: ${(ratio * 100).toFixed(0)}% → ${ratio >= 0.5 ? "met" : "NOT met"}`,
      );
      console.log(
        `- its p95 < 40 ms: ${sig50 ? f(sig50.p95) : "?"} ms → ${sig50 !== null && sig50.p95 < 40 ? "met" : "NOT met"}`,
      );
      console.log(policyGoal());
      console.log(`\nload average at the end: ${loadAvg()}`);
      return;
    }

    // ---- writes -------------------------------------------------------------------------------------
    // Every write run gets a fresh chain (and relayer): anvil mines more slowly as its history grows
    // (measured: raw createPkp transactions from ~400 to ~30 per second over 4,000 blocks, plain transfers
    // from ~900 to ~150, whatever pruning options), and one transaction per write grows it eight times
    // faster than batches do, so on a shared chain the order of the runs would decide the ratio. Runs
    // go raw, relayer, relayer, raw; the ratio is of the totals (writes over wall time).
    const clients = 8;
    const perClient = quick ? 5 : 25;
    const order: Array<"raw" | "relayer"> = quick ? ["raw", "relayer"] : ["raw", "relayer", "relayer", "raw"];
    const runs: Array<{ kind: "raw" | "relayer"; stats: Stats }> = [];
    for (const kind of order) runs.push({ kind, stats: await writeRun(kind, gen, clients, perClient) });
    if (runs.some((r) => r.stats.n !== clients * perClient)) throw new Error("write count mismatch");
    /** Writes per second over all runs of a kind: total writes over total wall time. */
    const overall = (kind: "raw" | "relayer") => {
      const xs = runs.filter((r) => r.kind === kind).map((r) => r.stats);
      return xs.reduce((n, x) => n + x.n, 0) / xs.reduce((t, x) => t + x.n / x.rps, 0);
    };
    const rawRps = overall("raw");
    const relRps = overall("relayer");

    console.log(
      `\n## Writes to receipt (createPkp, ${clients} concurrent clients, 4 gas wallets; each run on a fresh ` +
        `automining anvil, in the order ${order.join(", ")})\n`,
    );
    console.log(header);
    const firstRaw = runs.find((r) => r.kind === "raw")!.stats;
    runs.forEach((r, k) =>
      console.log(
        r.kind === "raw"
          ? row(`raw pre-signed txs (baseline), run ${k + 1}`, r.stats)
          : row(`path A through the relayer, run ${k + 1}`, r.stats, firstRaw),
      ),
    );
    console.log(
      `\nall runs: raw ${f(rawRps)} tx/s, path A ${f(relRps)} writes/s → ${(relRps / rawRps).toFixed(2)}×`,
    );

    // The audit log's cost: log on vs off on two stacks built alike (bench/auditLog.ts).
    const audit = writesOnly ? null : await auditOverhead(gen, "sqlite", quick);
    if (audit) printAuditOverhead(audit);

    console.log("\n## Goals\n");
    const g1 = sig50 !== null && sig50.p95 < 50;
    const g2 = relRps >= rawRps;
    console.log(
      `- one-signature execution p95 at 50 clients < 50 ms: ${sig50 ? f(sig50.p95) : "?"} ms → ${g1 ? "met" : "NOT met"}`,
    );
    console.log(
      `- path-A writes ≥ 100% of the raw-transaction rate: ${((relRps / rawRps) * 100).toFixed(0)}% → ${g2 ? "met" : "NOT met"}`,
    );
    console.log(
      `- signed executions ≥ 90% of the bearer rate (one signature, 50 clients): ${signedRatio === null ? "?" : (signedRatio * 100).toFixed(1)}% → ${signedRatio !== null && signedRatio >= 0.9 ? "met" : "NOT met"}`,
    );
    console.log(policyGoal());
    if (audit)
      console.log(
        `- executions with the audit log ≥ 95% of the rate without (SQLite; bench:audit adds PostgreSQL): ${audit.ratio.toFixed(3)} → ${audit.ratio >= 0.95 ? "met" : "NOT met"}`,
      );
    console.log(`\nload average at the end: ${loadAvg()}`);
  } finally {
    await gen.stop();
    echoServer.close();
    agent.destroy();
    await s.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
