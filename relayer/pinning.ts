/**
 * Pinning content for an account (action code and signing-policy documents alike): the permission
 * (canPin), the billing gate, the pin quota (413 pin_quota_exceeded), the store, then the charge.
 * Nothing is stored or charged for a refused pin, and a pin the store could not write is released. A CID
 * the account has already pinned is stored again (idempotent) but neither counted nor charged again.
 */
import { computeCid } from "../enclave";
import type { AuthContext } from "./auth";
import type { RelayerContext } from "./context";
import { ApiError } from "./errors";
import { canPin } from "./policy";

export async function pinContent(
  ctx: RelayerContext,
  auth: AuthContext,
  bytes: Uint8Array,
): Promise<{ cid: string; charged_cents: number }> {
  if (!canPin(auth)) {
    throw new ApiError(
      "not_authorized_to_pin",
      "Only the account key, or a usage key that may manage actions or execute in some group, can pin code.",
    );
  }
  const cid = await computeCid(bytes);
  const accountId = auth.principal.accountId;
  if (!(await ctx.pins.has(accountId, cid)))
    await ctx.billing?.assertCanAffordPin(auth.principal, bytes.length);
  const fresh = await ctx.pins.reserve(accountId, cid, bytes.length);
  try {
    await ctx.contentStore.put(bytes);
  } catch (err) {
    if (fresh) await ctx.pins.release(accountId, cid);
    throw err;
  }
  const charged =
    fresh && ctx.billing ? (await ctx.billing.chargePin(auth.principal, bytes.length, cid)).charged_cents : 0;
  return { cid, charged_cents: charged };
}
