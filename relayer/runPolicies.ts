/**
 * The executor's `policiesFor` for one run (docs/policies.md): the signing policies of the groups that
 * grant the run (relayer/policy.ts, grantingGroups), read from the permission cache as it is at each
 * key operation, so a policy set or cleared while the run is in flight applies to its next signature
 * (the cache also invalidates the run's handed-over key when the account changes). Documents come from
 * the content store (or the IPFS gateways), verified against their CID, parsed once per CID and shared
 * (relayer/policyDocuments.ts): per run only the group lookup is done again.
 */
import { OPERATION_KINDS, type GroupPolicy, type Policy } from "../enclave";
import type { PoliciesFor } from "../enclave";
import type { AuthContext } from "./auth";
import type { RelayerContext } from "./context";
import { cidHash } from "./permissions/projection";
import { grantingGroups } from "./policy";
import { loadPolicy, parsedPolicy } from "./policyDocuments";

/**
 * What a group whose policy document cannot be read or is not a valid policy allows: nothing (a policy
 * the service cannot read must not fall back to allowing everything).
 */
function unavailable(cid: string): Policy {
  return {
    version: 1,
    rules: OPERATION_KINDS.map((operation) => ({
      name: `(policy ${cid} unavailable)`,
      effect: "deny" as const,
      operation,
    })),
  };
}

export function policiesForRun(ctx: RelayerContext, auth: AuthContext, cid: string): PoliciesFor {
  const hash = cidHash(cid);
  return async (pkpId) => {
    const current = await ctx.auth.reauthenticate(auth);
    const groups = grantingGroups(current, hash, pkpId.toLowerCase());
    // No granting group with a policy: nothing to check (a group without a policy allows everything).
    if (groups.length === 0 || groups.some((g) => g.policy === null)) return null;
    const grants: GroupPolicy[] = [];
    for (const g of groups) {
      const policyCid = g.policy!;
      let policy: Policy | null | undefined = parsedPolicy(policyCid);
      try {
        policy ??= await loadPolicy(ctx, policyCid);
      } catch (err) {
        ctx.logger.warn({ group: g.id, cid: policyCid, err: String(err) }, "group policy unreadable");
        policy = null;
      }
      // The stored document (frozen, shared by CID) goes with its CID; a stand-in without one.
      grants.push(
        policy === null
          ? { group: String(g.id), policy: unavailable(policyCid) }
          : { group: String(g.id), policy, cid: policyCid },
      );
    }
    return grants;
  };
}
