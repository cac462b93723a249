/**
 * Webhooks benchmark (`npm run bench:webhooks`). Everything real: anvil, the contracts, the relayer,
 * receivers over loopback. Prints ratios against baselines measured in the same run:
 *
 *  1. Path-A write latency (createPkp, sequential) with webhooks subscribed to every event, against
 *     the same writes of an account without endpoints, interleaved round by round on one stack: once
 *     with a receiver answering 200, once with a receiver that never answers (deliveries stuck at their
 *     timeout). Goal: ratio ≈ 1 (deliveries are off the request path).
 *  2. Delivery throughput: events per second from the chain to a 200 receiver (scan, store, claim,
 *     sign, POST, record), against the same number of signed POSTs sent straight to that receiver by
 *     the same process, 8 at a time (the deliverer's concurrency).
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { createHash } from "node:crypto";
import { startStack, type Stack } from "../testkit/stack";
import { signatureHeader } from "../relayer/webhooks/signature";

const ROUNDS = 6;
const WRITES_PER_ROUND = 10;

async function receiver(
  mode: "ok" | "hang",
): Promise<{ url: string; count: () => number; close: () => Promise<void> }> {
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      n++;
      if (mode === "ok") res.end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    count: () => n,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function account(s: Stack): Promise<string> {
  return (await s.api("POST", "/core/v1/new_account", { body: { account_name: "bench" } })).body.api_key;
}

async function timedWrites(s: Stack, key: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const r = await s.api("POST", "/core/v1/pkps/create", { key, body: {} });
    if (r.status !== 201) throw new Error(`write failed: ${r.status}`);
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function latency(mode: "ok" | "hang"): Promise<void> {
  const s = await startStack({ webhooks: { allowAddresses: ["127.0.0.0/8"], timeoutMs: 10_000 } });
  const r = await receiver(mode);
  try {
    const plain = await account(s);
    const watched = await account(s);
    const reg = await s.api("POST", "/core/v1/webhooks", {
      key: watched,
      body: { url: r.url, event_types: ["*"] },
    });
    if (reg.status !== 201) throw new Error(JSON.stringify(reg.body));
    await timedWrites(s, plain, 5); // warm-up
    const base: number[] = [];
    const hooked: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      base.push(...(await timedWrites(s, plain, WRITES_PER_ROUND)));
      hooked.push(...(await timedWrites(s, watched, WRITES_PER_ROUND)));
    }
    console.log(
      `write latency, receiver ${mode === "ok" ? "answering 200" : "never answering"}: ` +
        `median ${median(hooked).toFixed(1)} ms with webhooks vs ${median(base).toFixed(1)} ms without ` +
        `→ ratio ${(median(hooked) / median(base)).toFixed(2)} (${hooked.length} writes each; ${r.count()} deliveries reached the receiver)`,
    );
  } finally {
    await r.close();
    await s.close();
  }
}

async function throughput(): Promise<void> {
  const N = 200;
  const s = await startStack({ webhooks: { allowAddresses: ["127.0.0.0/8"], deliveryPollMs: 50 } });
  const r = await receiver("ok");
  try {
    const key = await account(s);
    // N events in few transactions: a group with many members is one write, many logs.
    const pkps: string[] = [];
    for (let i = 0; i < 8; i++)
      pkps.push((await s.api("POST", "/core/v1/pkps/create", { key, body: {} })).body.pkp_id);
    const reg = await s.api("POST", "/core/v1/webhooks", {
      key,
      body: { url: r.url, event_types: ["group.pkps_changed", "group.created"] },
    });
    if (reg.status !== 201) throw new Error(JSON.stringify(reg.body));
    const t0 = Date.now();
    const groups = Math.ceil(N / (pkps.length + 1));
    for (let g = 0; g < groups; g++)
      await s.api("POST", "/core/v1/groups", { key, body: { name: `g${g}`, pkps } });
    const expected = groups * (pkps.length + 1);
    while (r.count() < expected) await new Promise((res) => setTimeout(res, 10));
    const viaService = expected / ((Date.now() - t0) / 1000);

    // Baseline: the same number of signed POSTs straight to the receiver, 8 at a time.
    const body = JSON.stringify({ id: "evt_x", type: "group.created", data: {} });
    const agent = new http.Agent({ keepAlive: false });
    const one = () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request(r.url, {
          method: "POST",
          agent,
          headers: {
            "content-type": "application/json",
            "sigil-signature": signatureHeader(["whsec_bench"], Math.floor(Date.now() / 1000), body),
            "sigil-event-id": createHash("sha256").update(String(Math.random())).digest("hex"),
          },
        });
        req.on("response", (res) => {
          res.resume();
          res.on("end", () => resolve());
        });
        req.on("error", reject);
        req.end(body);
      });
    const t1 = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next++ < expected) await one();
      }),
    );
    const direct = expected / ((Date.now() - t1) / 1000);
    console.log(
      `delivery throughput (writes included): ${viaService.toFixed(0)} events/s through the service vs ` +
        `${direct.toFixed(0)} POSTs/s sent directly → ratio ${(viaService / direct).toFixed(3)} (${expected} events)`,
    );
  } finally {
    await r.close();
    await s.close();
  }
}

async function main(): Promise<void> {
  await latency("ok");
  await latency("hang");
  await throughput();
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
