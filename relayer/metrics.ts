/** Prometheus metrics (prom-client), on a registry per relayer instance so several can share a process. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface RelayerMetrics {
  registry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route">;
  chainWrites: Counter<"result">;
  executions: Counter<"has_error">;
  rpcFailures: Counter;
  eventsApplied: Counter;
  cacheBlock: Gauge;
}

export function createMetrics(collect: {
  cacheBlock: () => number;
  executor: () => { alive: number; busy: number; queued: number; restarts: number } | null;
}): RelayerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "sigil_relayer_" });
  const cacheBlock = new Gauge({
    name: "sigil_cache_last_processed_block",
    help: "Last registry block whose events the permission cache applied",
    registers: [registry],
    collect() {
      this.set(collect.cacheBlock());
    },
  });
  new Gauge({
    name: "sigil_executor_workers",
    help: "Executor workers by state",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const s = collect.executor();
      if (!s) return;
      this.set({ state: "alive" }, s.alive);
      this.set({ state: "busy" }, s.busy);
      this.set({ state: "queued" }, s.queued);
      this.set({ state: "restarts" }, s.restarts);
    },
  });
  return {
    registry,
    cacheBlock,
    httpRequests: new Counter({
      name: "sigil_http_requests_total",
      help: "HTTP requests",
      labelNames: ["method", "route", "status"],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: "sigil_http_request_duration_seconds",
      help: "HTTP request duration",
      labelNames: ["method", "route"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    chainWrites: new Counter({
      name: "sigil_chain_writes_total",
      help: "Path-A writes by result",
      labelNames: ["result"],
      registers: [registry],
    }),
    executions: new Counter({
      name: "sigil_executions_total",
      help: "Action executions",
      labelNames: ["has_error"],
      registers: [registry],
    }),
    rpcFailures: new Counter({
      name: "sigil_rpc_transient_failures_total",
      help: "Transient JSON-RPC failures",
      registers: [registry],
    }),
    eventsApplied: new Counter({
      name: "sigil_cache_events_applied_total",
      help: "Registry events applied to loaded projections",
      registers: [registry],
    }),
  };
}
