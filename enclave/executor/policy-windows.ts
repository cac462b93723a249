/**
 * The window part of the signing-policy check (docs/policies.md, "Windows"), kept apart from the gate so
 * that the gate's other checks can move without it: after the policies allowed an operation, the
 * window of the rule that allowed it (if any) is reserved in the shared counters, before any signature
 * exists; a full window turns the decision into a refusal that names the rule and the count or total
 * that would exceed it. The reservation is released if the signature then is not produced.
 *
 * The counters are the relayer's (relayer/policyWindows.ts): exact across instances and runs. A policy
 * with a window is therefore always checked here, on the main thread, never by a worker on its own.
 */
import {
  windowClaim,
  type GroupPolicy,
  type OperationFacts,
  type PolicyDecision,
  type WindowClaim,
} from "../policy";
import type { WindowExcess } from "../policy";

/** A reservation taken: give it back when the signature it was taken for is not produced. */
export type ReleaseWindow = () => Promise<void>;

/** The shared counters: one use of `claim`'s window, taken atomically, or the bound it would exceed. */
export interface PolicyWindowCounters {
  reserve(claim: WindowClaim): Promise<{ release: ReleaseWindow } | { excess: WindowExcess }>;
}

export const NOTHING_TO_RELEASE: ReleaseWindow = async () => undefined;

/**
 * The decision after the window of its rule was taken (unchanged when the rule has no window), and what
 * releases the use taken. Without counters a window cannot be kept: refused rather than not counted.
 */
export async function reserveWindow(
  counters: PolicyWindowCounters | undefined,
  grants: readonly GroupPolicy[],
  decision: PolicyDecision,
  facts: OperationFacts,
  pkpId: string,
): Promise<{ decision: PolicyDecision; release: ReleaseWindow }> {
  const claim = windowClaim(grants, decision, facts, pkpId);
  if (claim === null) return { decision, release: NOTHING_TO_RELEASE };
  const taken: { release: ReleaseWindow } | { excess: WindowExcess } =
    counters === undefined
      ? {
          excess: { field: "window.maxCount", value: "1", reason: "the window's counters are not available" },
        }
      : await counters.reserve(claim);
  if ("release" in taken) return { decision, release: taken.release };
  const { field, value, reason } = taken.excess;
  return {
    decision: {
      ...decision,
      allowed: false,
      field,
      value,
      reason: `window of rule "${claim.rule}": ${reason}`,
    },
    release: NOTHING_TO_RELEASE,
  };
}
