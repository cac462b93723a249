/**
 * Out-of-process load generator for the relayer benchmark. The bench forks this file once and drives it
 * over IPC, so the HTTP clients do not share the server's main thread (real clients are other
 * processes). One keep-alive `node:http` agent for every run; each run answers with the latency of every
 * request, measured here, and the wall time of the whole run.
 *
 * Two kinds of run:
 *  - "http": `clients` loops POST the same request (client i uses `requests[i % requests.length]`) back to
 *    back, either until `total` requests have started in all (shared counter) or `perClient` each.
 *    A request counts only if its status is `expectStatus` (and, with `rejectHasError`, the JSON answer
 *    has no truthy `has_error`); anything else fails the run.
 *  - "tally": like "http" with `total`, but any status counts: the reply tallies the statuses (a flood that
 *    expects most calls refused). It also stops starting requests once `deadlineMs` has passed.
 *  - "bareServer": starts a bare HTTP server in this process that answers every call 429 (a control).
 *  - "rawTx": one loop per list of pre-signed transactions; each is sent with `eth_sendRawTransaction`
 *    and its receipt polled (2 ms doubling to 50 ms) before the next; a reverted transaction fails the run.
 */
import * as http from "node:http";
import { keepAliveAgent, postBytes } from "./httpPost";

export interface HttpRequestSpec {
  url: string;
  body: unknown;
  headers?: Record<string, string>;
  /**
   * Per-request headers, the n-th request of the run taking the n-th set (signed requests: each needs its
   * own nonce and signature, made before the run so that the run measures the server, not the signing).
   */
  headerSets?: Array<Record<string, string>>;
  expectStatus: number;
  rejectHasError?: boolean;
}

export type LoadCommand =
  | {
      id: number;
      kind: "http";
      clients: number;
      requests: HttpRequestSpec[];
      total?: number;
      perClient?: number;
    }
  | {
      id: number;
      kind: "tally";
      clients: number;
      request: HttpRequestSpec;
      total: number;
      deadlineMs: number;
    }
  | { id: number; kind: "rawTx"; rpcUrl: string; txsPerClient: string[][] }
  | { id: number; kind: "bareServer" }
  | { id: number; kind: "exit" };

export type LoadReply =
  | {
      id: number;
      ok: true;
      latenciesMs: number[];
      wallMs: number;
      statuses?: Record<number, number>;
      /** This generator's CPU (user + system, µs) during a tally: what sending the flood cost. */
      cpuUs?: number;
      port?: number;
    }
  | { id: number; ok: false; error: string };

const agent = keepAliveAgent();
const post = (url: string, data: Buffer, headers?: Record<string, string>) =>
  postBytes(agent, url, data, headers);

async function runHttp(cmd: Extract<LoadCommand, { kind: "http" }>): Promise<number[]> {
  // Bodies are serialised once, up front, so the loop measures only the request.
  // Per-request header sets are merged with the common headers here too, not in the loop.
  const prepared = cmd.requests.map((r) => ({
    ...r,
    data: Buffer.from(JSON.stringify(r.body)),
    headers: r.headers ?? {},
    merged: r.headerSets?.map((set) => ({ ...r.headers, ...set })),
  }));
  const lat: number[] = [];
  let started = 0;
  await Promise.all(
    Array.from({ length: cmd.clients }, async (_, i) => {
      const r = prepared[i % prepared.length];
      for (let mine = 0; ; mine++) {
        if (cmd.perClient !== undefined ? mine >= cmd.perClient : started >= (cmd.total ?? 0)) return;
        const n = started++;
        const headers = r.merged ? r.merged[n % r.merged.length] : r.headers;
        const t = performance.now();
        const res = await post(r.url, r.data, headers);
        const ms = performance.now() - t;
        if (res.status !== r.expectStatus || (r.rejectHasError && JSON.parse(res.body).has_error))
          throw new Error(`request to ${r.url} failed: ${res.status} ${res.body.slice(0, 300)}`);
        lat.push(ms);
      }
    }),
  );
  return lat;
}

/** `clients` loops POST the request until `total` have started or `deadlineMs` passed; every status counted. */
async function runTally(
  cmd: Extract<LoadCommand, { kind: "tally" }>,
): Promise<{ lat: number[]; statuses: Record<number, number> }> {
  const data = Buffer.from(JSON.stringify(cmd.request.body));
  const headers = cmd.request.headers ?? {};
  const lat: number[] = [];
  const statuses: Record<number, number> = {};
  const stopAt = performance.now() + cmd.deadlineMs;
  let started = 0;
  await Promise.all(
    Array.from({ length: cmd.clients }, async () => {
      while (started < cmd.total && performance.now() < stopAt) {
        started++;
        const t = performance.now();
        const res = await post(cmd.request.url, data, headers);
        lat.push(performance.now() - t);
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      }
    }),
  );
  return { lat, statuses };
}

let rpcId = 1;
async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const res = await post(
    url,
    Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: rpcId++, method, params })),
    {},
  );
  const j = JSON.parse(res.body);
  if (j.error) throw new Error(`${method}: ${JSON.stringify(j.error)}`);
  return j.result;
}

async function runRawTx(cmd: Extract<LoadCommand, { kind: "rawTx" }>): Promise<number[]> {
  const lat: number[] = [];
  await Promise.all(
    cmd.txsPerClient.map(async (txs) => {
      for (const tx of txs) {
        const t = performance.now();
        const hash = await rpc(cmd.rpcUrl, "eth_sendRawTransaction", [tx]);
        for (let delay = 2; ; delay = Math.min(delay * 2, 50)) {
          const r = (await rpc(cmd.rpcUrl, "eth_getTransactionReceipt", [hash])) as { status: string } | null;
          if (r) {
            if (r.status !== "0x1") throw new Error("raw tx reverted");
            break;
          }
          await new Promise((res) => setTimeout(res, delay));
        }
        lat.push(performance.now() - t);
      }
    }),
  );
  return lat;
}

/**
 * A bare HTTP server in this process, on 127.0.0.1, answering every POST 429 with a small JSON body:
 * a flood sent to it costs the machine what a flood costs (this generator, the kernel, a server that
 * refuses), but nothing of the relayer's. The triggers benchmark's control.
 */
let bare: http.Server | null = null;
async function startBareServer(): Promise<number> {
  if (!bare) {
    bare = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(429, { "content-type": "application/json", "retry-after": "5" });
        res.end('{"error":{"code":"trigger_queue_full"}}');
      });
    });
    await new Promise<void>((resolve) => bare!.listen(0, "127.0.0.1", resolve));
  }
  return (bare.address() as { port: number }).port;
}

process.on("message", async (cmd: LoadCommand) => {
  if (cmd.kind === "bareServer") {
    const port = await startBareServer();
    process.send!({ id: cmd.id, ok: true, latenciesMs: [], wallMs: 0, port } satisfies LoadReply);
    return;
  }
  if (cmd.kind === "exit") {
    bare?.close();
    agent.destroy();
    process.disconnect();
    return;
  }
  try {
    const t0 = performance.now();
    if (cmd.kind === "tally") {
      const cpu0 = process.cpuUsage();
      const { lat, statuses } = await runTally(cmd);
      const cpu = process.cpuUsage(cpu0);
      process.send!({
        id: cmd.id,
        ok: true,
        latenciesMs: lat,
        wallMs: performance.now() - t0,
        statuses,
        cpuUs: cpu.user + cpu.system,
      } satisfies LoadReply);
      return;
    }
    const latenciesMs = cmd.kind === "http" ? await runHttp(cmd) : await runRawTx(cmd);
    process.send!({ id: cmd.id, ok: true, latenciesMs, wallMs: performance.now() - t0 } satisfies LoadReply);
  } catch (err) {
    process.send!({ id: cmd.id, ok: false, error: String((err as Error).stack ?? err) } satisfies LoadReply);
  }
});
