/**
 * The gas wallets' balances, read periodically (not per /metrics scrape or /health call: that would
 * cost one RPC per wallet per scrape, and a balance only moves when a wallet sends or is funded), and
 * the low-balance warning.
 *
 * "Low" is below a threshold: the operator's (SIGIL_GAS_LOW_BALANCE_WEI), or by default what
 * LOW_BALANCE_WRITES typical writes cost at the current fee (fees.ts: maxFeePerGas, or the legacy gas
 * price), so the warning follows the chain's price instead of a number that suits one chain only.
 * A wallet going low is logged once, at the crossing (and once again when it is funded back above the
 * threshold), never on every poll. The readings also tell the wallet pool when a wallet that could not
 * pay has been funded (walletPool.ts recordBalance).
 */
import type { JsonRpcProvider } from "ethers";
import type { Logger } from "pino";
import type { FeeOracle } from "../fees";
import type { WalletPool } from "./walletPool";

/** How many writes the default threshold pays for. */
export const LOW_BALANCE_WRITES = 1000n;
/**
 * Gas of a typical path-A transaction: one forward request through `execute` (a registry write such
 * as createPkp, ~120k, plus the forwarder's work). Batches pay less per write.
 */
export const GAS_PER_WRITE = 200_000n;
/** Default time between two readings. */
export const DEFAULT_BALANCE_POLL_MS = 30_000;

export interface GasWalletStatus {
  address: string;
  /** Last balance read (wei), null before the first successful read. */
  balanceWei: bigint | null;
  low: boolean;
  /** Its last send failed for insufficient funds; skipped for new transactions while others can pay. */
  dry: boolean;
}

export interface BalanceMonitorOptions {
  provider: JsonRpcProvider;
  pool: WalletPool;
  fees: FeeOracle;
  /** Fixed threshold (wei); undefined = LOW_BALANCE_WRITES × GAS_PER_WRITE at the current fee. */
  lowBalanceWei?: bigint;
  pollMs?: number;
  logger: Pick<Logger, "warn" | "info">;
  /** Named in the warnings: several instances may log to one place. */
  instanceId?: string;
  onTransient?: (err: unknown) => void;
}

export class BalanceMonitor {
  private timer: ReturnType<typeof setInterval> | null = null;
  private running: Promise<void> | null = null;
  private threshold: bigint | null = null;
  /** Addresses below the threshold at the last reading (the warning fires on entering this set). */
  private readonly low = new Set<string>();

  constructor(private readonly o: BalanceMonitorOptions) {
    this.threshold = o.lowBalanceWei ?? null;
  }

  /** Reads once now, then every pollMs (the timer does not keep the process alive). */
  start(): void {
    if (this.timer) return;
    void this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.o.pollMs ?? DEFAULT_BALANCE_POLL_MS);
    this.timer.unref?.();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One reading of every wallet (concurrent calls share it). Never throws: a failed read keeps the last. */
  refresh(): Promise<void> {
    this.running ??= this.read().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /** The threshold in force (null until the fee was read once, when it follows the fee). */
  thresholdWei(): bigint | null {
    return this.threshold;
  }

  /** Each gas wallet's last balance reading, and whether it is low or cannot pay. */
  statuses(): GasWalletStatus[] {
    return this.o.pool.all().map((w) => ({
      address: w.address,
      balanceWei: w.balanceWei,
      low: this.low.has(w.address),
      dry: w.dry,
    }));
  }

  /** Every wallet is low or cannot pay: writes will soon fail (or already do) with 503 gas_wallet_unfunded. */
  allLow(): boolean {
    const all = this.statuses();
    return all.length > 0 && all.every((s) => s.low || s.dry);
  }

  private async read(): Promise<void> {
    let threshold: bigint;
    try {
      threshold =
        this.o.lowBalanceWei ?? LOW_BALANCE_WRITES * GAS_PER_WRITE * priceOf(await this.o.fees.current());
    } catch (err) {
      this.o.onTransient?.(err);
      if (this.threshold === null) return;
      threshold = this.threshold;
    }
    this.threshold = threshold;
    await Promise.all(
      this.o.pool.all().map(async (w) => {
        let balance: bigint;
        try {
          balance = BigInt((await this.o.provider.send("eth_getBalance", [w.address, "latest"])) as string);
        } catch (err) {
          this.o.onTransient?.(err);
          return;
        }
        this.o.pool.recordBalance(w, balance, threshold);
        this.noteCrossing(w.address, balance, threshold);
      }),
    );
  }

  private noteCrossing(address: string, balance: bigint, threshold: bigint): void {
    const fields = {
      gas_wallet: address,
      balance_wei: balance.toString(),
      threshold_wei: threshold.toString(),
      ...(this.o.instanceId ? { instance_id: this.o.instanceId } : {}),
    };
    if (balance < threshold && !this.low.has(address)) {
      this.low.add(address);
      this.o.logger.warn(
        fields,
        "gas wallet balance low: fund it, or writes will fail with 503 gas_wallet_unfunded",
      );
    } else if (balance >= threshold && this.low.has(address)) {
      this.low.delete(address);
      this.o.logger.info(fields, "gas wallet funded above the low-balance threshold again");
    }
  }
}

function priceOf(fees: Awaited<ReturnType<FeeOracle["current"]>>): bigint {
  return fees.type === 2 ? fees.maxFeePerGas : fees.gasPrice;
}
