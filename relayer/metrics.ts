/** Prometheus metrics (prom-client), on a registry per relayer instance so several can share a process. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface RelayerMetrics {
  /** Public: anyone may scrape it (GET /metrics); it names no deployment detail (no gas wallet address). */
  registry: Registry;
  /**
   * Added to a scrape that carries the operator token, as GET /health adds its details:
   * `sigil_gas_wallet_info{wallet, address}` maps the public gauges' `wallet` index to its address.
   */
  operatorRegistry: Registry;
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route">;
  chainWrites: Counter<"result">;
  executions: Counter<"has_error">;
  rpcFailures: Counter;
  eventsApplied: Counter;
  writesCaughtUp: Counter;
  cacheBlock: Gauge;
}

export function createMetrics(collect: {
  cacheBlock: () => number;
  executor: () => { alive: number; busy: number; queued: number; restarts: number } | null;
  /**
   * The gas wallets' last balance readings (relayer/chain/send/balanceMonitor.ts reads them on its own
   * schedule: a scrape costs no RPC).
   */
  gasWallets?: () => {
    wallets: { address: string; balanceWei: bigint | null; low: boolean; dry: boolean }[];
    thresholdWei: bigint | null;
  };
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
  const operatorRegistry = new Registry();
  if (collect.gasWallets) addGasWalletGauges(registry, operatorRegistry, collect.gasWallets);
  return {
    registry,
    operatorRegistry,
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
    writesCaughtUp: new Counter({
      name: "sigil_billing_writes_caught_up_total",
      help: "Path-A writes charged by the billing catch-up (their charge had been lost, e.g. to a crash)",
      registers: [registry],
    }),
  };
}

/**
 * Per gas wallet: its balance, and flags for "below the low-balance threshold" and "its last send was
 * refused for insufficient funds". Balances are in wei as a float (exact to ~15 digits, plenty for an
 * alert); a wallet not read yet has no sample rather than a misleading zero.
 *
 * The wallets are labelled by `wallet`, their index (the order of GET /health's `gas_wallets`), never by
 * address: the addresses map the deployment and are for the operator only, as on /health. The operator's
 * scrape (with the operator token) also gets `sigil_gas_wallet_info{wallet, address} 1` to join on.
 */
function addGasWalletGauges(
  registry: Registry,
  operatorRegistry: Registry,
  read: NonNullable<Parameters<typeof createMetrics>[0]["gasWallets"]>,
): void {
  new Gauge({
    name: "sigil_gas_wallet_balance_wei",
    help: "Gas wallet balance at the last reading (wei)",
    labelNames: ["wallet"],
    registers: [registry],
    collect() {
      this.reset();
      read().wallets.forEach((w, i) => {
        if (w.balanceWei !== null) this.set({ wallet: String(i) }, Number(w.balanceWei));
      });
    },
  });
  new Gauge({
    name: "sigil_gas_wallet_low",
    help: "1 when the gas wallet's balance is below the low-balance threshold",
    labelNames: ["wallet"],
    registers: [registry],
    collect() {
      this.reset();
      read().wallets.forEach((w, i) => this.set({ wallet: String(i) }, w.low ? 1 : 0));
    },
  });
  new Gauge({
    name: "sigil_gas_wallet_unfunded",
    help: "1 when the gas wallet's last send was refused for insufficient funds (skipped for new sends)",
    labelNames: ["wallet"],
    registers: [registry],
    collect() {
      this.reset();
      read().wallets.forEach((w, i) => this.set({ wallet: String(i) }, w.dry ? 1 : 0));
    },
  });
  new Gauge({
    name: "sigil_gas_wallet_low_balance_threshold_wei",
    help: "Balance below which a gas wallet counts as low (wei)",
    registers: [registry],
    collect() {
      const t = read().thresholdWei;
      if (t !== null) this.set(Number(t));
    },
  });
  new Gauge({
    name: "sigil_gas_wallet_info",
    help: "The address of each gas wallet index (operator token only)",
    labelNames: ["wallet", "address"],
    registers: [operatorRegistry],
    collect() {
      this.reset();
      read().wallets.forEach((w, i) => this.set({ wallet: String(i), address: w.address }, 1));
    },
  });
}
