/** Types of evaluate.js (plain JavaScript: the action worker's trusted side loads it too). */
import type { OperationFacts } from "./operation";
import type { OperationKind, Policy, PolicyRule } from "./schema";

/** The outcome of checking one operation: what the audit log records, and what a refusal says. */
export interface PolicyDecision {
  allowed: boolean;
  /** The deciding rule's name, or "(default deny)" / "(no policy)" when no rule decided. */
  rule: string;
  operation: OperationKind;
  /** The group whose policy decided (when several groups were checked). */
  group?: string;
  /** What a signature is made over (transactions, typed data, messages, raw digests). */
  digest?: string;
  /** The condition that failed, e.g. "to" or "erc20.amount" (refusals only). */
  field?: string;
  /** The value that failed that condition, as text (refusals only). */
  value?: string;
  /** One sentence for people. */
  reason: string;
}

export declare const DEFAULT_DENY = "(default deny)";
export declare const NO_POLICY = "(no policy)";

/** A rule's verdict on an operation: it matches, or the first condition that does not hold. */
type Match = { ok: true } | { ok: false; field: string; value: string; reason: string };

/** Whether one rule matches the operation (its kind is assumed to be the operation's). */
export declare function ruleMatches(r: PolicyRule, op: OperationFacts, now: Date): Match;

/** One policy's decision on one operation. */
export declare function evaluatePolicy(policy: Policy, op: OperationFacts, now?: Date): PolicyDecision;

/** The policy (or null: none) of one group that grants the run. */
export interface GroupPolicy {
  group: string;
  policy: Policy | null;
  /**
   * The policy's CID when it is the stored document of that CID (frozen and shared: freeze.js), so that
   * a worker is sent it once and then only its CID (worker/policy-cache.js); absent: sent each time.
   */
  cid?: string;
}

/**
 * The decision for a run granted by `grants`: allowed when one granting group allows it (a group with
 * no policy allows everything). A refusal reports the first group's refusal, and names that group.
 */
export declare function evaluateGrants(
  grants: readonly GroupPolicy[],
  op: OperationFacts,
  now?: Date,
): PolicyDecision;

/**
 * Which grant allows the operation (`rule` NO_POLICY for a group without a policy), or null when none
 * does: evaluateGrants' decision without its wording. `now` omitted: the clock is read only if a rule
 * has a `time` condition.
 */
export declare function allowingGrant(
  grants: readonly GroupPolicy[],
  op: OperationFacts,
  now?: Date,
): { group: string; rule: string } | null;

/**
 * The decision evaluateGrants gives when group `group`'s rule `rule` (or NO_POLICY) allowed an
 * operation of kind `operation` over `digest` (undefined: one without a digest).
 */
export declare function allowedDecision(
  rule: string,
  group: string,
  operation: OperationKind,
  digest: string | undefined,
): PolicyDecision;

/** The message of a `policy_denied` error: the rule, the group and the value that failed. */
export declare function refusalMessage(d: PolicyDecision): string;
