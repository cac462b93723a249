/**
 * The fee fields of a send the action left to the service: EIP-1559 (`maxFeePerGas` twice the next
 * block's base fee plus the tip, so the transaction stays includable through a few full blocks; the tip
 * from `eth_maxPriorityFeePerGas`, else the median tip of the last block) on chains whose blocks have a
 * base fee, `gasPrice` from `eth_gasPrice` on the others.
 */
import { RpcUnreachableError, type JsonRpcClient } from "./rpc";

export type Fees =
  { type: 2; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | { type: 0; gasPrice: bigint };

interface FeeHistory {
  baseFeePerGas?: (string | null)[];
  reward?: string[][];
}

/** A tip when the node suggests none (1 gwei: what geth and anvil suggest on an idle chain). */
const FALLBACK_TIP = 1_000_000_000n;

export async function suggestFees(rpc: JsonRpcClient, withinMs: number): Promise<Fees> {
  let history: FeeHistory | null = null;
  try {
    history = await rpc.call<FeeHistory>("eth_feeHistory", ["0x1", "latest", [50]], withinMs);
  } catch (e) {
    // The node answered an error: a chain without EIP-1559 (or an RPC without the method), legacy
    // below. No answer at all says nothing about the chain: the send fails (send_rpc_failed).
    if (e instanceof RpcUnreachableError) throw e;
    history = null;
  }
  const bases = history?.baseFeePerGas ?? [];
  const nextBase = bases.length > 0 ? bases[bases.length - 1] : null;
  if (typeof nextBase === "string" && BigInt(nextBase) > 0n) {
    let tip: bigint;
    try {
      tip = BigInt(await rpc.call<string>("eth_maxPriorityFeePerGas", [], withinMs));
    } catch (e) {
      if (e instanceof RpcUnreachableError) throw e;
      const r = history?.reward?.[0]?.[0];
      tip = typeof r === "string" ? BigInt(r) : FALLBACK_TIP;
    }
    return { type: 2, maxFeePerGas: 2n * BigInt(nextBase) + tip, maxPriorityFeePerGas: tip };
  }
  return { type: 0, gasPrice: BigInt(await rpc.call<string>("eth_gasPrice", [], withinMs)) };
}
