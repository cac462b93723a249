/**
 * The benchmarks' side of the load generator (bench/loadgen.ts): forks it once and drives it over IPC,
 * one command at a time, and turns its latencies into requests/s and percentiles. Shared by
 * bench/relayer.bench.ts and bench/cluster.bench.ts, so every row of both is measured the same way.
 */
import { fork, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import type { HttpRequestSpec, LoadCommand, LoadReply } from "./loadgen";

export interface Stats {
  n: number;
  rps: number;
  p50: number;
  p95: number;
  p99: number;
  /** Every latency, sorted (ms): lets a benchmark pool several rounds' samples for one percentile. */
  sortedMs?: readonly number[];
}

/** The p-th percentile of sorted samples (nearest rank, as every row of the benchmarks reads it). */
export function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function stats(lat: number[], wallMs: number): Stats {
  lat.sort((a, b) => a - b);
  return {
    n: lat.length,
    rps: lat.length / (wallMs / 1000),
    p50: pct(lat, 50),
    p95: pct(lat, 95),
    p99: pct(lat, 99),
    sortedMs: lat,
  };
}

/** The forked load generator: one child, one command at a time. */
export class LoadGenerator {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (r: LoadReply) => void; reject: (e: Error) => void }
  >();
  private constructor(private readonly child: ChildProcess) {
    child.on("message", (r: LoadReply) => {
      const p = this.pending.get(r.id);
      this.pending.delete(r.id);
      p?.resolve(r);
    });
    child.on("exit", (code) => {
      for (const p of this.pending.values()) p.reject(new Error(`load generator exited (${code})`));
      this.pending.clear();
    });
  }

  /** The child's process id (a benchmark may lower its priority). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  static start(): LoadGenerator {
    // ts-node in the child too (transpile only, as `npm run bench:relayer` does).
    const child = fork(path.join(__dirname, "loadgen.ts"), [], {
      execArgv: ["-r", "ts-node/register/transpile-only"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    return new LoadGenerator(child);
  }

  private async run(cmd: Record<string, unknown>): Promise<Stats> {
    const reply = await this.send(cmd);
    return stats(reply.latenciesMs, reply.wallMs);
  }

  private async send(cmd: Record<string, unknown>): Promise<Extract<LoadReply, { ok: true }>> {
    const id = this.nextId++;
    const reply = await new Promise<LoadReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...cmd, id } as LoadCommand);
    });
    if (!reply.ok) throw new Error(`load generator: ${reply.error}`);
    return reply;
  }

  /**
   * `clients` loops until `total` requests have started or `deadlineMs` passed, whatever each answers:
   * the latencies and a count of each status (a flood most of whose calls are refused).
   */
  async tally(
    clients: number,
    total: number,
    request: HttpRequestSpec,
    deadlineMs: number,
  ): Promise<{ stats: Stats; statuses: Record<number, number>; cpuUs: number }> {
    const reply = await this.send({ kind: "tally", clients, total, request, deadlineMs });
    return {
      stats: stats(reply.latenciesMs, reply.wallMs),
      statuses: reply.statuses ?? {},
      cpuUs: reply.cpuUs ?? 0,
    };
  }

  /** `clients` loops POSTing back to back until `total` requests are done. */
  http(clients: number, total: number, request: HttpRequestSpec): Promise<Stats> {
    return this.run({ kind: "http", clients, total, requests: [request] });
  }

  /** `clients` loops until `total` requests are done, client i sending `requests[i % requests.length]`. */
  httpSpread(clients: number, total: number, requests: HttpRequestSpec[]): Promise<Stats> {
    return this.run({ kind: "http", clients, total, requests });
  }

  /** Starts the generator's bare HTTP server (every call answered 429) and answers its port. */
  async bareServer(): Promise<number> {
    return (await this.send({ kind: "bareServer" })).port!;
  }

  /** One loop per request spec, `perClient` requests each. */
  httpPerClient(requests: HttpRequestSpec[], perClient: number): Promise<Stats> {
    return this.run({ kind: "http", clients: requests.length, perClient, requests });
  }

  /** One loop per list: send each pre-signed transaction and wait for its receipt. */
  rawTx(rpcUrl: string, txsPerClient: string[][]): Promise<Stats> {
    return this.run({ kind: "rawTx", rpcUrl, txsPerClient });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || !this.child.connected) return;
    const exited = new Promise<void>((r) => this.child.once("exit", () => r()));
    this.child.send({ id: 0, kind: "exit" } as LoadCommand);
    await Promise.race([exited, new Promise((r) => setTimeout(r, 2000))]);
    if (this.child.exitCode === null) this.child.kill();
  }
}
