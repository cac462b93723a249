/**
 * The fees of the relayer's own path-A transactions.
 *
 * Why not "a multiple of eth_gasPrice": a node's fee suggestion is made from the tips paid in recent
 * blocks. On a chain where our transactions are most of the traffic, that is our own tips, so paying any
 * multiple above 1 of the suggestion raises the next suggestion by the same factor: the price doubled at
 * every refresh with the former ×2 (measured on anvil: 7,000 writes, ~300 ETH per gas wallet, a gas
 * price of ~763,000 gwei at a base fee of 10 wei). Even `2 * baseFee + tip` in a legacy transaction
 * drifts, because a legacy transaction's whole surplus over the base fee is its tip.
 *
 *  - EIP-1559 chains (the latest block has `baseFeePerGas`): type-2 transactions with
 *    `maxPriorityFeePerGas = tip` and `maxFeePerGas = 2 * baseFee + tip`. The effective tip is exactly
 *    `tip` whatever the base fee, so what we pay never feeds back into the suggestion beyond `tip`
 *    itself; the base fee can double before the transaction is stranded (it rises by at most 12.5% per
 *    block). `tip` is the node's `eth_maxPriorityFeePerGas`, clamped to the operator's maximum; a node
 *    without that method: `eth_gasPrice - baseFee` (what geth-style nodes suggest as the tip), clamped
 *    too. `baseFee` is the higher of the latest block's and the next block's (`eth_feeHistory`) base fee.
 *  - Chains without a base fee: legacy transactions at exactly `eth_gasPrice` (no multiplier: paying the
 *    suggestion keeps it where it is). A node that answers "underpriced" gets a bounded bump per retry of
 *    that one transaction (`bumpLegacy`), never a raised cached price.
 *
 * Fees are read at most every FEE_CACHE_MS; `invalidate()` forces a fresh read (after a fee-cap error).
 */
import type { JsonRpcProvider } from "ethers";
import { ApiError } from "../errors";
import { withRetry } from "./rpc";

export type Fees =
  { type: 2; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | { type: 0; gasPrice: bigint };

/** Highest tip paid when the operator sets none (SIGIL_MAX_PRIORITY_FEE_GWEI): 2 gwei. */
export const DEFAULT_MAX_PRIORITY_FEE_WEI = 2_000_000_000n;
/** How long one fee reading is used (the former gas-price cache; a block is ~2-12 s on most chains). */
export const FEE_CACHE_MS = 3_000;
/** Legacy price increase per "underpriced" retry of one transaction, in percent (replacements need +10%). */
export const LEGACY_BUMP_PERCENT = 25n;

/**
 * The fees to pay given what the node said. `baseFee` null = no EIP-1559 (legacy at `gasPrice`).
 * `suggestedTip` null = the node has no eth_maxPriorityFeePerGas (the tip is `gasPrice - baseFee`).
 */
export function chooseFees(reading: {
  baseFee: bigint | null;
  suggestedTip: bigint | null;
  gasPrice: bigint | null;
  maxPriorityFeePerGas: bigint;
}): Fees {
  const { baseFee, suggestedTip, gasPrice, maxPriorityFeePerGas } = reading;
  if (baseFee === null) {
    if (gasPrice === null) throw new Error("chooseFees: a legacy chain needs eth_gasPrice");
    return { type: 0, gasPrice };
  }
  let tip = suggestedTip ?? (gasPrice !== null && gasPrice > baseFee ? gasPrice - baseFee : 0n);
  if (tip > maxPriorityFeePerGas) tip = maxPriorityFeePerGas;
  if (tip < 0n) tip = 0n;
  return { type: 2, maxPriorityFeePerGas: tip, maxFeePerGas: 2n * baseFee + tip };
}

/** A legacy price raised for the `bumps`-th "underpriced" retry of one transaction (type 2 unchanged). */
export function bumpLegacy(fees: Fees, bumps: number): Fees {
  if (fees.type !== 0 || bumps <= 0) return fees;
  let gasPrice = fees.gasPrice;
  for (let i = 0; i < bumps; i++) gasPrice = (gasPrice * (100n + LEGACY_BUMP_PERCENT)) / 100n + 1n;
  return { type: 0, gasPrice };
}

export interface FeeOracleOptions {
  provider: JsonRpcProvider;
  /** The operator's cap on the tip (wei). */
  maxPriorityFeePerGas: bigint;
  onTransient?: (err: unknown) => void;
}

export class FeeOracle {
  private cached: { fees: Fees; atMs: number } | null = null;
  /** Off for good once the node refuses the method (not every node has it). */
  private askTip = true;
  private askFeeHistory = true;

  constructor(private readonly o: FeeOracleOptions) {}

  /** Forget the cached fees: the next `current()` reads the chain again. */
  invalidate(): void {
    this.cached = null;
  }

  async current(): Promise<Fees> {
    if (this.cached && Date.now() - this.cached.atMs < FEE_CACHE_MS) return this.cached.fees;
    const fees = await this.read();
    this.cached = { fees, atMs: Date.now() };
    return fees;
  }

  private rpc<T>(method: string, params: unknown[]): Promise<T> {
    return withRetry(() => this.o.provider.send(method, params) as Promise<T>, 3, this.o.onTransient);
  }

  private async read(): Promise<Fees> {
    const block = await this.rpc<{ baseFeePerGas?: unknown } | null>("eth_getBlockByNumber", [
      "latest",
      false,
    ]);
    const latestBaseFee = hexQuantity(block?.baseFeePerGas);
    if (latestBaseFee === null) {
      const gasPrice = BigInt(await this.rpc<string>("eth_gasPrice", []));
      return chooseFees({ baseFee: null, suggestedTip: null, gasPrice, maxPriorityFeePerGas: 0n });
    }
    const [nextBaseFee, suggestedTip] = await Promise.all([this.nextBaseFee(), this.suggestedTip()]);
    const baseFee = nextBaseFee !== null && nextBaseFee > latestBaseFee ? nextBaseFee : latestBaseFee;
    const gasPrice = suggestedTip === null ? BigInt(await this.rpc<string>("eth_gasPrice", [])) : null;
    return chooseFees({
      baseFee,
      suggestedTip,
      gasPrice,
      maxPriorityFeePerGas: this.o.maxPriorityFeePerGas,
    });
  }

  /** The node's tip suggestion, or null when it has no eth_maxPriorityFeePerGas (or answers nonsense). */
  private async suggestedTip(): Promise<bigint | null> {
    if (!this.askTip) return null;
    const tip = await this.optional<string>("eth_maxPriorityFeePerGas", []);
    const value = hexQuantity(tip);
    if (value === null) this.askTip = false;
    return value;
  }

  /** The next block's base fee (the last entry of eth_feeHistory), null where unavailable. */
  private async nextBaseFee(): Promise<bigint | null> {
    if (!this.askFeeHistory) return null;
    const h = await this.optional<{ baseFeePerGas?: unknown }>("eth_feeHistory", ["0x1", "latest", []]);
    const list = h?.baseFeePerGas;
    const value = Array.isArray(list) && list.length > 0 ? hexQuantity(list[list.length - 1]) : null;
    if (value === null) this.askFeeHistory = false;
    return value;
  }

  /**
   * A call whose refusal is not an error: a node that lacks the method (or refuses it for any other
   * non-transient reason) yields null. Transient failures still end in 503 through withRetry.
   */
  private async optional<T>(method: string, params: unknown[]): Promise<T | null> {
    try {
      return await this.rpc<T>(method, params);
    } catch (err) {
      if (err instanceof ApiError) throw err; // 503 chain_unavailable: the chain is unreachable
      return null;
    }
  }
}

function hexQuantity(v: unknown): bigint | null {
  return typeof v === "string" && /^0x[0-9a-fA-F]{1,64}$/.test(v) ? BigInt(v) : null;
}
