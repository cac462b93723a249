/**
 * Relayer benchmark (`npm run bench:relayer`). Everything real: anvil, the contracts, the relayer with its
 * SES executor, HTTP over loopback. Prints ratios against baselines measured in the same run:
 *
 *  1. Executions over HTTP (hello world, and one PKP signature) at 1, 10 and 50 concurrent clients:
 *     requests/s and p50/p95/p99, against a bare Express JSON echo endpoint in the same process, hit by the
 *     same client. Goal: p95 of the one-signature action at 50 clients < 50 ms (the reference system's own
 *     target is 2 s).
 *  2. Path-A writes (createPkp through the forwarder, each answered after its receipt) against raw
 *     pre-signed transactions of the same call sent straight to the registry by wallet owners, both with the
 *     same number of concurrent clients on the same automining chain. Goal: ≥ 50% of the raw rate.
 */
import * as http from "node:http";
import * as os from "node:os";
import type { AddressInfo } from "node:net";
import express from "express";
import { NonceManager, Wallet, ZeroAddress, parseEther } from "ethers";
import { AccountRegistry__factory } from "../typechain-types";
import { DEV_KEY } from "../test/helpers/anvil";
import { startStack } from "../test/helpers/stack";

interface Stats {
  n: number;
  rps: number;
  p50: number;
  p95: number;
  p99: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": String(data.length), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** `clients` loops, each running `op` back to back, until `total` operations are done. */
async function load(clients: number, total: number, op: () => Promise<void>): Promise<Stats> {
  const lat: number[] = [];
  let started = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (started < total) {
        started++;
        const t = performance.now();
        await op();
        lat.push(performance.now() - t);
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { n: lat.length, rps: lat.length / secs, p50: pct(lat, 50), p95: pct(lat, 95), p99: pct(lat, 99) };
}

const f = (x: number) => x.toFixed(1);
const row = (name: string, s: Stats, base?: Stats) =>
  `| ${name.padEnd(34)} | ${String(s.n).padStart(5)} | ${f(s.rps).padStart(8)} | ${f(s.p50).padStart(6)} | ${f(s.p95).padStart(6)} | ${f(s.p99).padStart(6)} |${base ? ` ${(s.rps / base.rps).toFixed(2)}× |` : "  1.00× |"}`;
const header =
  "| run                                |     n |    req/s | p50 ms | p95 ms | p99 ms | vs baseline |\n|---|---|---|---|---|---|---|";

async function main(): Promise<void> {
  const quick = process.env.BENCH_QUICK === "1";
  const s = await startStack({
    rateLimits: {
      perKeyPerMinute: 1e9,
      perAccountPerMinute: 1e9,
      newAccountPerIpPerHour: 1e9,
      concurrentExecutionsPerAccount: 1000,
    },
    executor: { poolSize: 2 },
    gasWallets: 4,
  });
  const echo = express();
  echo.post("/echo", express.json(), (req, res) => {
    res.json({ response: req.body });
  });
  const echoServer = http.createServer(echo);
  await new Promise<void>((r) => echoServer.listen(0, "127.0.0.1", () => r()));
  const echoUrl = `http://127.0.0.1:${(echoServer.address() as AddressInfo).port}/echo`;

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
    const usage = JSON.parse(
      (await post(`${s.url}/core/v1/add_usage_api_key`, { name: "bench", execute_in_groups: [0] }, auth))
        .body,
    ).usage_api_key as string;
    const uauth = { "x-api-key": usage };

    const exec = (cid: string) => async () => {
      const r = await post(
        `${s.url}/core/v1/svc_action`,
        { cid, pkp_id: pkp, js_params: { m: "bench" } },
        uauth,
      );
      if (r.status !== 200 || JSON.parse(r.body).has_error)
        throw new Error(`execution failed: ${r.status} ${r.body}`);
    };
    const echoOp = async () => {
      const r = await post(echoUrl, { cid: cids[0], pkp_id: pkp, js_params: { m: "bench" } });
      if (r.status !== 200) throw new Error("echo failed");
    };
    // Warm-up (workers, JIT, connections).
    await load(4, 100, exec(cids[1]));
    await load(4, 200, echoOp);

    const loadAvg = () =>
      os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(" ");
    console.log(`\nload average at start: ${loadAvg()} (${os.availableParallelism()} CPUs)`);
    console.log("\n## Executions over HTTP (2 sandbox workers, loopback, keep-alive client)\n");
    console.log(header);
    let sig50: Stats | null = null;
    for (const clients of [1, 10, 50]) {
      const n = quick ? 100 : clients === 1 ? 300 : 1_500;
      const base = await load(clients, n, echoOp);
      const h = await load(clients, n, exec(cids[0]));
      const sg = await load(clients, n, exec(cids[1]));
      console.log(row(`express echo, ${clients} clients (baseline)`, base));
      console.log(row(`hello world, ${clients} clients`, h, base));
      console.log(row(`one signature, ${clients} clients`, sg, base));
      if (clients === 50) sig50 = sg;
    }

    // ---- writes -------------------------------------------------------------------------------------
    const clients = 8;
    const perClient = quick ? 5 : 25;
    // Relayer: 8 accounts (8 principals), each client writes createPkp back to back.
    const keys: string[] = [];
    for (let i = 0; i < clients; i++)
      keys.push(JSON.parse((await post(`${s.url}/core/v1/new_account`, {})).body).api_key);
    // Raw: 8 wallet owners, each with its own account; the same call (createPkp), pre-signed in nonce order.
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
      for (let i = 0; i < perClient; i++) {
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
    const waitReceipt = async (hash: string) => {
      for (let delay = 2; ; delay = Math.min(delay * 2, 50)) {
        const r = await s.provider.send("eth_getTransactionReceipt", [hash]);
        if (r) {
          if (r.status !== "0x1") throw new Error("raw tx reverted");
          return;
        }
        await new Promise((res) => setTimeout(res, delay));
      }
    };
    const total = clients * perClient;
    const rawLat: number[] = [];
    let t0 = performance.now();
    await Promise.all(
      presigned.map(async (txs) => {
        for (const tx of txs) {
          const t = performance.now();
          await waitReceipt(await s.provider.send("eth_sendRawTransaction", [tx]));
          rawLat.push(performance.now() - t);
        }
      }),
    );
    const rawSecs = (performance.now() - t0) / 1000;
    rawLat.sort((a, b) => a - b);
    const raw: Stats = {
      n: total,
      rps: total / rawSecs,
      p50: pct(rawLat, 50),
      p95: pct(rawLat, 95),
      p99: pct(rawLat, 99),
    };

    const relLat: number[] = [];
    t0 = performance.now();
    await Promise.all(
      keys.map(async (k) => {
        for (let i = 0; i < perClient; i++) {
          const t = performance.now();
          const r = await post(`${s.url}/core/v1/pkps/create`, {}, { "x-api-key": k });
          if (r.status !== 201) throw new Error(`write failed: ${r.status} ${r.body}`);
          relLat.push(performance.now() - t);
        }
      }),
    );
    const relSecs = (performance.now() - t0) / 1000;
    relLat.sort((a, b) => a - b);
    const rel: Stats = {
      n: total,
      rps: total / relSecs,
      p50: pct(relLat, 50),
      p95: pct(relLat, 95),
      p99: pct(relLat, 99),
    };

    console.log(
      `\n## Writes to receipt (createPkp, ${clients} concurrent clients, automining anvil, 4 gas wallets)\n`,
    );
    console.log(header);
    console.log(row("raw pre-signed txs (baseline)", raw));
    console.log(row("path A through the relayer", rel, raw));

    console.log("\n## Goals\n");
    const g1 = sig50 !== null && sig50.p95 < 50;
    const g2 = rel.rps >= 0.5 * raw.rps;
    console.log(
      `- one-signature execution p95 at 50 clients < 50 ms: ${sig50 ? f(sig50.p95) : "?"} ms → ${g1 ? "met" : "NOT met"}`,
    );
    console.log(
      `- path-A writes ≥ 50% of the raw-transaction rate: ${((rel.rps / raw.rps) * 100).toFixed(0)}% → ${g2 ? "met" : "NOT met"}`,
    );
    console.log(`\nload average at the end: ${loadAvg()}`);
  } finally {
    echoServer.close();
    agent.destroy();
    await s.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
