/**
 * Signing-policy documents as the relayer handles them (docs/policies.md): a document is checked
 * against the schema before it is pinned, and read back by CID from the content store, which verifies
 * the bytes against the CID, so the policy the enclave enforces is exactly the one the group names.
 * Content is immutable: a parsed document is kept by CID, frozen, and shared by every run of every
 * group that names it (what the engine derives from it is then derived once: enclave/policy/freeze.js).
 */
import { checkPolicy, deepFreeze, parsePolicy, type Policy } from "../enclave";
import type { RelayerContext } from "./context";
import { ApiError } from "./errors";

/** The bytes a policy is pinned as (and its CID computed from): its JSON, as sent. */
export function policyBytes(policy: Policy): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(policy));
}

/** A policy sent in a request body, checked: 400 invalid_policy listing every problem. */
export function readPolicy(doc: unknown, field = "policy"): Policy {
  const checked = checkPolicy(doc);
  if (!checked.ok)
    throw new ApiError("invalid_policy", `\`${field}\` is not a valid policy: ${checked.errors[0]}`, {
      details: { field, errors: checked.errors },
    });
  return checked.policy;
}

const parsed = new Map<string, Policy>();
const MAX_CACHED = 4096;

/**
 * The policy under `cid` if it was read before (the common case, per run: no promise and no await),
 * else undefined (then loadPolicy).
 */
export function parsedPolicy(cid: string): Policy | undefined {
  return parsed.get(cid);
}

/**
 * The policy stored under `cid` (the content store, else the IPFS gateways: a Safe may name a document
 * it published elsewhere; both verify the bytes against the CID), or null when neither has it. Content
 * that is not a valid policy is 400 invalid_policy (a group only names a CID: what it names is checked
 * here). Documents from the gateways are kept in memory only: storing them would bypass pin quotas.
 */
export async function loadPolicy(
  ctx: Pick<RelayerContext, "contentStore" | "gateway">,
  cid: string,
): Promise<Policy | null> {
  const hit = parsed.get(cid);
  if (hit !== undefined) return hit;
  let bytes = await ctx.contentStore.get(cid);
  if (bytes === null && ctx.gateway) bytes = await ctx.gateway.fetch(cid).catch(() => null);
  if (bytes === null) return null;
  const checked = parsePolicy(bytes);
  if (!checked.ok)
    throw new ApiError(
      "invalid_policy",
      `The content of ${cid} is not a valid policy: ${checked.errors[0]}`,
      {
        details: { cid, errors: checked.errors },
      },
    );
  const policy = deepFreeze(checked.policy);
  if (parsed.size >= MAX_CACHED) parsed.clear();
  parsed.set(cid, policy);
  return policy;
}
