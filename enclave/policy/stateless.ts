/**
 * Which policies can be enforced by evaluate.js alone, from the operation and the clock: every rule
 * states only conditions on what is signed and when. A policy with any other kind of condition (a
 * window counted across runs and instances, or any condition added later) needs the enclave's policy
 * gate and its shared state, so the run's own PKP is then checked on the enclave side only.
 *
 * An allow-list of the fields evaluate.js reads, not a deny-list: a new kind of condition is stateful
 * until it is listed here.
 */
import type { GroupPolicy } from "./evaluate";
import type { Policy, PolicyRule } from "./schema";

const STATELESS_RULE_FIELDS: ReadonlySet<string> = new Set<keyof PolicyRule>([
  "name",
  "effect",
  "operation",
  "time",
  "chainIds",
  "to",
  "contractCreation",
  "value",
  "selectors",
  "erc20",
  "domain",
  "primaryTypes",
  "permit",
  "prefix",
  "solana",
  "bitcoin",
]);

const STATELESS_POLICY_FIELDS: ReadonlySet<string> = new Set<keyof Policy>([
  "version",
  "description",
  "rules",
]);

/** Stateless or not, per shared (frozen, content-addressed: freeze.js) document, decided once. */
const decided = new WeakMap<Policy, boolean>();

function statelessPolicy(p: Policy): boolean {
  const known = decided.get(p);
  if (known !== undefined) return known;
  const stateless = readStateless(p);
  if (Object.isFrozen(p) && Object.isFrozen(p.rules)) decided.set(p, stateless);
  return stateless;
}

function readStateless(p: Policy): boolean {
  return (
    Object.keys(p).every((k) => STATELESS_POLICY_FIELDS.has(k)) &&
    p.rules.every((r) => Object.keys(r).every((k) => STATELESS_RULE_FIELDS.has(k)))
  );
}

/** Whether every granting group's policy (none counts as stateless) is decided by evaluate.js alone. */
export function statelessGrants(grants: readonly GroupPolicy[]): boolean {
  return grants.every((g) => g.policy === null || statelessPolicy(g.policy));
}
