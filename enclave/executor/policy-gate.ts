/**
 * The signing-policy check of one run (docs/policies.md), on the enclave side: every signature, key
 * export, encryption and decryption the run asks for passes here after authorization and before any
 * key is used. The action cannot reach this object; it only sees a refusal as a `policy_denied` error.
 *
 * The policies are asked for afresh at every operation (the relayer's `policiesFor` reads them from its
 * permission cache), so a policy changed while a run is in flight applies to that run's next operation.
 * Each decision is kept, in order, for the run's result (`policy_decisions`), which the audit log records.
 */
import { EnclaveError } from "../errors";
import {
  allowedDecision,
  evaluateGrants,
  OPERATION_KINDS,
  refusalMessage,
  statelessGrants,
  type GroupPolicy,
  type OperationFacts,
  type OperationKind,
  type PolicyDecision,
} from "../policy";
import {
  NOTHING_TO_RELEASE,
  reserveWindow,
  type PolicyWindowCounters,
  type ReleaseWindow,
} from "./policy-windows";

/**
 * The policies of the groups that grant (caller, CID, pkpId), or null when no policy applies to that PKP
 * in this run (a granting group has none: as before policies existed).
 */
export type PoliciesFor = (
  pkpId: string,
) => Promise<readonly GroupPolicy[] | null> | readonly GroupPolicy[] | null;

const KINDS: ReadonlySet<string> = new Set(OPERATION_KINDS);
function isOperationKind(x: unknown): x is OperationKind {
  return typeof x === "string" && KINDS.has(x);
}

/** A decision as the run's result carries it: the PKP it was about, besides the engine's fields. */
export type RunPolicyDecision = PolicyDecision & { pkp: string };

export class PolicyGate {
  readonly decisions: RunPolicyDecision[] = [];

  constructor(
    private readonly policiesFor: PoliciesFor,
    private readonly now: () => Date = () => new Date(),
    /** The shared window counters (policy-windows.ts); absent: a rule with a window allows nothing. */
    private readonly windows?: PolicyWindowCounters,
  ) {}

  /**
   * Resolves when the operation may go ahead, with what gives back the window use it took (call it
   * when the signature is not produced); throws `policy_denied` naming the rule otherwise.
   */
  async check(pkpId: string, facts: OperationFacts): Promise<ReleaseWindow> {
    const grants = await this.policiesFor(pkpId);
    if (grants === null) return NOTHING_TO_RELEASE;
    const evaluated = evaluateGrants(grants, facts, this.now());
    // Windows: taken only for an allowed operation, after every other rule (policy-windows.ts).
    const { decision: windowed, release } = await reserveWindow(
      this.windows,
      grants,
      evaluated,
      facts,
      pkpId,
    );
    const decision = { ...windowed, pkp: pkpId };
    this.decisions.push(decision);
    if (!decision.allowed) throw new EnclaveError("policy_denied", refusalMessage(decision));
    return release;
  }

  /**
   * With which policies the run's own PKP may be handed to the worker (pool.ts, run keys): `policies`
   * null when none applies (as before policies existed); the policies themselves when every one is
   * stateless (the worker's trusted side then checks each signature with the same engine,
   * worker/run-key.js); null when the key must stay here, because a policy needs this gate's state.
   */
  async handOver(pkpId: string): Promise<{ policies: readonly GroupPolicy[] | null } | null> {
    const grants = await this.policiesFor(pkpId);
    if (grants === null) return { policies: null };
    return statelessGrants(grants) ? { policies: grants } : null;
  }

  /**
   * A decision the worker's trusted side made on a signature of the run's own PKP `pkp` that it made
   * itself (worker/run-key.js), as it travels: [group, rule, operation, digest]
   * (worker/policy-decisions.js). Checked, since the worker also runs hostile code; rebuilt with the
   * engine's allowedDecision, so it equals the decision the gate would have recorded.
   */
  noteWorkerDecision(wire: unknown, pkp: string): void {
    if (!Array.isArray(wire) || wire.length !== 4) return;
    const [group, rule, operation, digest] = wire as unknown[];
    if (typeof group !== "string" || typeof rule !== "string" || !isOperationKind(operation)) return;
    if (digest !== undefined && typeof digest !== "string") return;
    // The engine's fresh object, given its PKP (no copy: one per signature on the main thread).
    const decision = allowedDecision(rule, group, operation, digest) as RunPolicyDecision;
    decision.pkp = pkp;
    this.decisions.push(decision);
  }
}
