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

/** One write waiting for the next eth_simulateV1 call. */
interface Waiting {
  call: { from: string; to: string; data: string };
  resolve: (answer: SimulatedCall | null) => void;
  reject: (err: unknown) => void;
}

export type SimulatedCall = { ok: true; gasUsed: bigint } | { ok: false; revertData: string | undefined };
/** A call's outcome in a group: its result, null (eth_estimateGas instead), or the node's error for it. */
type GroupAnswer = SimulatedCall | null | { failed: unknown };

/** Most calls in one eth_simulateV1 (a batch of sends holds at most DEFAULT_MAX_BATCH requests). */
export const MAX_SIMULATED_CALLS = 32;

export class Simulator {
  /**
   * Simulate with eth_simulateV1 (one execution, and it reports the gas used) rather than eth_estimateGas
   * (a search over several executions); off for good once the node does not support it.
   */
  private simulateV1: boolean;
  /** Writes waiting for the next eth_simulateV1 call, and whether one is in flight or scheduled. */
  private waiting: Waiting[] = [];
  private flushing = false;

  constructor(private readonly o: SimulatorOptions) {
    this.simulateV1 = o.mode !== "estimateGas";
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
      const result = await this.simulateTogether(call);
      if (result !== null) {
        if (result.ok) return result.gasUsed;
        throw refusal(result.revertData);
      }
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

  /**
   * The call's eth_simulateV1 result, simulated together with every other write waiting at the same
   * time: one RPC per batch of writes instead of one per write (the node's time and the main thread's
   * per-RPC work were most of a path-A write's cost besides the send). No timer: the first write of an
   * idle simulator waits only for the end of the current event-loop turn (writes whose HTTP requests
   * were parsed in the same turn join it); writes that arrive while a call is in flight go together in
   * the next one. Null when the node does not support the method (eth_estimateGas from then on).
   */
  private simulateTogether(call: Waiting["call"]): Promise<SimulatedCall | null> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ call, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.waiting.length > 0) {
      const group = this.waiting.splice(0, MAX_SIMULATED_CALLS);
      let answers: GroupAnswer[];
      try {
        answers = await this.simulateGroup(group.map((w) => w.call));
      } catch (err) {
        for (const w of group) w.reject(err);
        continue;
      }
      group.forEach((w, i) => {
        const a = answers[i];
        if (a !== null && "failed" in a) w.reject(a.failed);
        else w.resolve(a);
      });
    }
    this.flushing = false;
  }

  /**
   * The calls in one block of one eth_simulateV1, in order. Each call is its own transaction there, so
   * a call sees the state the earlier ones left (as the requests of one batch transaction do, in the
   * same order): two writes that conflict (both claiming one name) simulate as they would land, the
   * second refused. A call that reverts changes nothing for the next ones. An answer of another shape
   * for a group falls back to one call per write; a node without the method, to eth_estimateGas.
   */
  private async simulateGroup(calls: Array<Waiting["call"]>): Promise<GroupAnswer[]> {
    if (!this.simulateV1) return calls.map(() => null);
    const answer = await withRetry(
      async () => {
        try {
          return await this.o.provider.send("eth_simulateV1", [{ blockStateCalls: [{ calls }] }, "latest"]);
        } catch (err) {
          if (isTransient(err)) throw err;
          if (isMethodUnsupported(err)) return null;
          // A node-level error for a group (not a revert, which is per call): each call on its own.
          if (calls.length > 1) return undefined;
          throw err;
        }
      },
      3,
      this.o.onTransient,
    );
    const results = answer === undefined ? null : simulatedCalls(answer, calls.length);
    if (results !== null) return results;
    if (answer === undefined || (answer !== null && calls.length > 1)) {
      const one: GroupAnswer[] = [];
      for (const call of calls) {
        try {
          one.push((await this.simulateGroup([call]))[0]);
        } catch (failed) {
          one.push({ failed });
        }
      }
      return one;
    }
    // Not supported, or an answer we do not understand: estimate the ordinary way from now on.
    this.simulateV1 = false;
    return calls.map(() => null);
  }
}

/**
 * The `n` calls of an eth_simulateV1 answer of one block, in order; null for an answer of another
 * shape (or any call of it unreadable).
 */
export function simulatedCalls(answer: unknown, n: number): SimulatedCall[] | null {
  if (!Array.isArray(answer) || answer.length !== 1) return null;
  const calls = (answer[0] as { calls?: unknown } | null)?.calls;
  if (!Array.isArray(calls) || calls.length !== n) return null;
  const out: SimulatedCall[] = [];
  for (const c of calls) {
    const one = simulatedCall([{ calls: [c] }]);
    if (one === null) return null;
    out.push(one);
  }
  return out;
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
