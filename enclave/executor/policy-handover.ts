/**
 * What a worker is sent of the policies it checks the run's own PKP against (policy-gate.ts, handOver;
 * worker/run-key.js): a stored policy document is content-addressed, so each worker is sent a CID's
 * document once, with the first run that needs it, and afterwards the CID alone; the worker keeps the
 * documents it was sent (worker/policy-cache.js). A run's policies are still read afresh for that run
 * (a change reaches its next run, and the epoch reaches a run in flight): only the unchanged bytes of
 * a document are not copied again. A grant without a CID (a stand-in for an unreadable document, or a
 * policy given directly) is sent whole every time.
 *
 * One per worker, on the main thread, in the order run messages are posted to that worker: the worker
 * reads them in that order, so it holds exactly what this records. Bounded: past MAX_SENT documents it
 * starts over, and the next message tells the worker to forget what it holds.
 */
import type { GroupPolicy } from "../policy";

export const MAX_SENT = 256;

/** A grant as a run message carries it: a document with or without its CID, or a CID sent before. */
export type WireGrant =
  { group: string; policy: GroupPolicy["policy"]; cid?: string } | { group: string; cid: string };

export class SentPolicies {
  private readonly sent = new Set<string>();

  /**
   * The grants of one run message to this worker, and whether the worker must first forget every
   * document it holds. Call only for a message that is then posted.
   */
  wire(grants: readonly GroupPolicy[] | null): { policies: WireGrant[] | null; forgetPolicies: boolean } {
    if (grants === null) return { policies: null, forgetPolicies: false };
    // Usually every CID was sent before: then no set is made (this runs for every run under a policy).
    let fresh: Set<string> | null = null;
    for (const g of grants)
      if (g.cid !== undefined && !this.sent.has(g.cid)) (fresh ??= new Set()).add(g.cid);
    let forgetPolicies = false;
    if (fresh !== null && this.sent.size + fresh.size > MAX_SENT) {
      this.sent.clear();
      forgetPolicies = true;
    }
    const policies = grants.map((g): WireGrant => {
      if (g.cid === undefined || g.policy === null) return { group: g.group, policy: g.policy };
      if (this.sent.has(g.cid)) return { group: g.group, cid: g.cid };
      this.sent.add(g.cid);
      return { group: g.group, policy: g.policy, cid: g.cid };
    });
    return { policies, forgetPolicies };
  }
}
