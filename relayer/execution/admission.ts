/**
 * A run's admission: the reservation of its worst case (billing) and its execution lease (the
 * per-account cap), in that order, both or neither. On PostgreSQL with billing in the relayer's
 * database the lease rides in the reservation's round trip (one transaction: relayer/db/riding.ts);
 * otherwise they are two steps, and a refused lease releases the reservation. The refusals are the
 * same either way: billing's (402/403) before the cap's (429 too_many_concurrent_executions).
 */
import type { Principal } from "../auth";
import type { Reservation } from "../billing";
import type { RelayerContext } from "../context";

export interface Admission {
  /** Absent without billing. */
  reservation?: Reservation;
  /** Gives the lease back (once; the reservation is settled or released by the caller). */
  releaseLease: () => void;
  /** For a run that never ran: its reservation back (the lease is the caller's to release). */
  unreserve: () => Promise<void>;
}

export async function admitRun(
  ctx: Pick<RelayerContext, "billing" | "executionCap">,
  principal: Principal,
  timeLimitMs: number,
): Promise<Admission> {
  const lease = ctx.billing ? ctx.executionCap.leaseAlong?.(principal.accountId) : undefined;
  const reservation = await ctx.billing?.reserveExecution(principal, timeLimitMs, lease);
  const unreserve = async () => {
    if (reservation) await ctx.billing?.releaseExecution(reservation);
  };
  if (lease?.release) return { reservation, releaseLease: lease.release, unreserve };
  try {
    return { reservation, releaseLease: await ctx.executionCap.enter(principal.accountId), unreserve };
  } catch (err) {
    await unreserve();
    throw err;
  }
}
