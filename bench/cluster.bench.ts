/**
 * Cluster benchmark (`npm run bench:cluster`): executions/s and path-A writes/s through 1, 2 and 3
 * instance processes of one cluster (scripts/cluster/cluster.ts: one PostgreSQL, one anvil, real
 * processes), printed as ratios to one instance measured in the same run. The clients are the relayer
 * benchmark's load generator (bench/loadgen.ts, a separate process): client i talks to instance
 * i mod n (round-robin over the instances, as a load balancer would spread them).
 *
 * - Executions: the one-signature action of bench/relayer.bench.ts (a usage key, by CID), 12 clients.
 *   Also the CPU time the instance processes spent per execution (utime + stime from /proc, the SES
 *   workers included), which is what sizing needs: on a machine whose cores are all busy, instances
 *   share the same CPUs and their sum cannot grow.
 * - Writes: createPkp through the forwarder (each answered after its receipt), 12 clients each with
 *   their own account (so no two instances write for one account at once).
 *
 * All three instances run in every row (idle ones only poll the chain); a row with n instances sends
 * to the first n. Honest about the machine: the CPU count and load average are printed.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { startCluster, type Cluster } from "../scripts/cluster/cluster";
import { keepAliveAgent, postBytes } from "./httpPost";
import type { HttpRequestSpec } from "./loadgen";
import { LoadGenerator, type Stats } from "./loadgenClient";

const agent = keepAliveAgent();
async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await postBytes(agent, url, Buffer.from(JSON.stringify(body)), headers);
  return { status: r.status, body: JSON.parse(r.body) as Record<string, unknown> };
}
async function get(url: string, headers: Record<string, string>) {
  const r = await fetch(url, { headers });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

/** Waits until every instance knows an account (they learn of it from the chain within a poll). */
async function seenEverywhere(c: Cluster, key: string): Promise<void> {
  for (const x of c.instances)
    for (let i = 0; ; i++) {
      if ((await get(`${x.url}/core/v1/account`, { "x-api-key": key })).status === 200) break;
      if (i > 200) throw new Error(`${x.id} never saw the account`);
      await new Promise((r) => setTimeout(r, 50));
    }
}

const f = (x: number) => x.toFixed(1);
const header =
  "| run                       |     n |   req/s | p50 ms | p95 ms | CPU ms/req | vs 1 instance |\n|---|---|---|---|---|---|---|";
const row = (name: string, s: Stats, cpuMsPerReq: number, base: Stats) =>
  `| ${name.padEnd(25)} | ${String(s.n).padStart(5)} | ${f(s.rps).padStart(7)} | ${f(s.p50).padStart(6)} | ${f(s.p95).padStart(6)} | ${cpuMsPerReq.toFixed(2).padStart(10)} | ${(s.rps / base.rps).toFixed(2)}× |`;

async function main(): Promise<void> {
  const quick = process.env.BENCH_QUICK === "1";
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-bench-cluster-"));
  const c = await startCluster({
    dataDir: dir,
    instances: 3,
    basePort: 0,
    anvilPort: 0,
    env: {
      SIGIL_LOG_LEVEL: "warn",
      SIGIL_EXECUTOR_POOL_SIZE: "2",
      SIGIL_SIGNUP_CREDIT_CENTS: "1000000",
      SIGIL_RATE_LIMIT_PER_KEY_PER_MINUTE: "1000000",
      SIGIL_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE: "1000000",
      SIGIL_RATE_LIMIT_NEW_ACCOUNTS_PER_IP_PER_HOUR: "1000000",
      SIGIL_RATE_LIMIT_PER_IP_PER_MINUTE: "10000000",
      SIGIL_MAX_CONCURRENT_EXECUTIONS_PER_ACCOUNT: "1000",
    },
  });
  const gen = LoadGenerator.start();
  try {
    const first = c.instances[0].url;
    const acct = (await post(`${first}/core/v1/new_account`, {})).body;
    const auth = { "x-api-key": acct.api_key as string };
    const pkp = (await post(`${first}/core/v1/pkps/create`, {}, auth)).body.pkp_id as string;
    const sign = `async function main(p) { return await Actions.signMessage({ pkpId: "${pkp}", message: p.m }); }`;
    await seenEverywhere(c, auth["x-api-key"]);
    // Pinned on every instance: each keeps its own content store (charged once: the pin is the account's).
    let cid = "";
    for (const x of c.instances)
      cid = (await post(`${x.url}/core/v1/actions`, { code: sign }, auth)).body.cid as string;
    await post(`${first}/core/v1/groups`, { name: "bench", pkps: [pkp], actions: [cid] }, auth);
    const usage = (
      await post(`${first}/core/v1/add_usage_api_key`, { name: "bench", execute_in_groups: [0] }, auth)
    ).body.usage_api_key as string;
    const exec = (url: string): HttpRequestSpec => ({
      url: `${url}/core/v1/svc_action`,
      body: { cid, pkp_id: pkp, js_params: { m: "bench" } },
      headers: { "x-api-key": usage },
      expectStatus: 200,
      rejectHasError: true,
    });
    // Every instance must see the group and the key before it is measured.
    for (const x of c.instances)
      for (let i = 0; ; i++) {
        const r = await post(`${x.url}/core/v1/svc_action`, exec(x.url).body, { "x-api-key": usage });
        if (r.status === 200) break;
        if (i > 200) throw new Error(`${x.id} never allowed the execution: ${JSON.stringify(r.body)}`);
        await new Promise((res) => setTimeout(res, 50));
      }

    const clients = 12;
    const execTotal = quick ? 240 : 1_200;
    const pids = c.instances.map((x) => x.pid);
    const measure = async (run: () => Promise<Stats>) => {
      const before = pids.map(cpuSeconds);
      const s = await run();
      const cpu = pids.map(cpuSeconds).reduce((a, v, i) => a + v - before[i], 0);
      return { s, cpuMsPerReq: (cpu * 1000) / s.n };
    };

    console.log(
      `\n${os.availableParallelism()} CPUs; load average at start: ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(" ")}`,
    );
    console.log(
      "clients: bench/loadgen.ts in its own process; client i → instance i mod n; instances are separate processes\n",
    );
    console.log(`## Executions (one-signature action, ${clients} clients, 2 SES workers per instance)\n`);
    console.log(header);
    await gen.httpSpread(
      clients,
      120,
      c.instances.map((x) => exec(x.url)),
    ); // warm-up: JIT, connections
    const execRows: Array<{ n: number; s: Stats; cpuMsPerReq: number }> = [];
    for (const n of [1, 2, 3, 1]) {
      const targets = c.instances.slice(0, n).map((x) => exec(x.url));
      const m = await measure(() => gen.httpSpread(clients, execTotal, targets));
      execRows.push({ n, ...m });
      console.log(
        row(
          `${n} instance${n === 1 ? "" : "s"}${execRows.length === 4 ? " (again)" : ""}`,
          m.s,
          m.cpuMsPerReq,
          execRows[0].s,
        ),
      );
    }

    console.log(
      `\n## Path-A writes (createPkp, ${clients} clients, one account each, answered after the receipt)\n`,
    );
    console.log(header);
    const keys: string[] = [];
    for (let i = 0; i < clients; i++)
      keys.push((await post(`${first}/core/v1/new_account`, {})).body.api_key as string);
    for (const k of keys) await seenEverywhere(c, k);
    const perClient = quick ? 3 : 8;
    const writeRows: Array<{ n: number; s: Stats; cpuMsPerReq: number }> = [];
    for (const n of [1, 2, 3]) {
      const specs = keys.map((k, i) => ({
        url: `${c.instances[i % n].url}/core/v1/pkps/create`,
        body: {},
        headers: { "x-api-key": k },
        expectStatus: 201,
      }));
      const m = await measure(() => gen.httpPerClient(specs, perClient));
      writeRows.push({ n, ...m });
      console.log(row(`${n} instance${n === 1 ? "" : "s"}`, m.s, m.cpuMsPerReq, writeRows[0].s));
    }
    console.log(
      `\nload average at the end: ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(" ")}`,
    );
  } finally {
    await gen.stop();
    agent.destroy();
    await c.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
