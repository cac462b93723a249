/**
 * Simulation of a registry call *as the forwarder would make it* (from the forwarder, with the
 * principal appended to the calldata, ERC-2771). The forwarder swallows the registry's revert reason (it
 * reverts with FailedCall), so this is how a refusal is decoded into a typed error without spending gas,
 * and how much gas the forward request must carry is learnt.
 */
import type { JsonRpcProvider } from "ethers";
import { mapRevert } from "../registryErrors";
import { isTransient, revertData, withRetry } from "../rpc";
import { isMethodUnsupported } from "./nodeErrors";
import type { WriteRequest } from "./types";

/** Gas a forward request carries for a call that simulated at `innerGas` (a margin for state changes). */
export function requestGasFor(innerGas: bigint): bigint {
  return (innerGas * 5n) / 4n + 10_000n;
}

export interface SimulatorOptions {
  provider: JsonRpcProvider;
  registry: string;
  forwarder: string;
  /**
   * "auto" uses eth_simulateV1 where the node has it (one execution; it reports the gas used and the
   * revert data) and eth_estimateGas otherwise; "estimateGas" always estimates.
   */
  mode?: "auto" | "estimateGas";
  onTransient?: (err: unknown) => void;
}

export class Simulator {
  /**
   * Simulate with eth_simulateV1 (one execution, and it reports the gas used) rather than eth_estimateGas
   * (a search over several executions); off for good once the node does not support it.
   */
  private simulateV1: boolean;

  constructor(private readonly o: SimulatorOptions) {
    this.simulateV1 = o.mode !== "estimateGas";
  }

  /** Whether eth_simulateV1 is still in use (false after a node answered without it). */
  usesSimulateV1(): boolean {
    return this.simulateV1;
  }

  /** Returns the registry call's gas, or throws the decoded refusal. */
  async simulate(req: WriteRequest): Promise<bigint> {
    const call = {
      from: this.o.forwarder,
      to: this.o.registry,
      data: req.data + req.principal.slice(2).toLowerCase(),
    };
    const refusal = (data: string | undefined) =>
      mapRevert(data, { principal: req.principal, kind: req.kind });
    if (this.simulateV1) {
      const answer = await withRetry(
        async () => {
          try {
            return await this.o.provider.send("eth_simulateV1", [
              { blockStateCalls: [{ calls: [call] }] },
              "latest",
            ]);
          } catch (err) {
            if (isTransient(err)) throw err;
            if (isMethodUnsupported(err)) return null;
            throw err;
          }
        },
        3,
        this.o.onTransient,
      );
      const result = simulatedCall(answer);
      if (result !== null) {
        if (result.ok) return result.gasUsed;
        throw refusal(result.revertData);
      }
      // Not supported, or an answer we do not understand: estimate the ordinary way from now on.
      this.simulateV1 = false;
    }
    const hex = await withRetry(
      async () => {
        try {
          return (await this.o.provider.send("eth_estimateGas", [call])) as string;
        } catch (err) {
          if (isTransient(err)) throw err;
          throw refusal(revertData(err));
        }
      },
      3,
      this.o.onTransient,
    );
    return BigInt(hex);
  }
}

/**
 * The one call of an eth_simulateV1 answer: its gas used, or its revert data. The gas used is what
 * eth_estimateGas finds for these calls (the registry makes no external calls); refunds only make it
 * smaller than the gas the call needs while running, by at most a fifth (EIP-3529), which the request
 * gas margin (requestGasFor) covers. Null for an answer of another shape (the caller falls back to
 * eth_estimateGas).
 */
export function simulatedCall(
  answer: unknown,
): { ok: true; gasUsed: bigint } | { ok: false; revertData: string | undefined } | null {
  if (!Array.isArray(answer) || answer.length !== 1) return null;
  const calls = (answer[0] as { calls?: unknown } | null)?.calls;
  if (!Array.isArray(calls) || calls.length !== 1) return null;
  const c = calls[0] as {
    status?: unknown;
    gasUsed?: unknown;
    returnData?: unknown;
    error?: { data?: unknown };
  };
  const hex = (v: unknown) => typeof v === "string" && /^0x[0-9a-fA-F]*$/.test(v);
  if (c.status === "0x1" && hex(c.gasUsed)) return { ok: true, gasUsed: BigInt(c.gasUsed as string) };
  if (c.status === "0x0") {
    // Revert data is error.data in the specification; some nodes (anvil) put it in returnData.
    const data = hex(c.error?.data)
      ? (c.error!.data as string)
      : hex(c.returnData)
        ? (c.returnData as string)
        : undefined;
    return { ok: false, revertData: data !== undefined && data.length >= 10 ? data : undefined };
  }
  return null;
}
