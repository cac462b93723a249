/**
 * The code of a CID for a run: this relayer's memory of verified code, then the content store, then the
 * IPFS gateways (always verified against the CID). Shared by svc_action, GET /actions/:cid and
 * triggered runs.
 */
import { isEnclaveError } from "../../enclave";
import type { AuthContext } from "../auth";
import type { RelayerContext } from "../context";
import { ApiError } from "../errors";
import { pinContent } from "../pinning";
import { canPin } from "../policy";

/**
 * Verified code by CID, one memory per relayer. Content is immutable, so once verified it never needs
 * re-reading or re-hashing.
 */
class VerifiedCode {
  private readonly byCid = new Map<string, string>();
  private bytes = 0;
  get(cid: string): string | undefined {
    return this.byCid.get(cid);
  }
  remember(cid: string, code: string): void {
    if (this.bytes > 64 * 1024 * 1024) {
      this.byCid.clear();
      this.bytes = 0;
    }
    this.byCid.set(cid, code);
    this.bytes += code.length;
  }
}
const verifiedCode = new WeakMap<RelayerContext, VerifiedCode>();

/** Pins `bytes` for the caller's account (relayer/pinning.ts: permission, billing, quota, store, charge). */
const pin = (ctx: RelayerContext, auth: AuthContext, bytes: Uint8Array) => pinContent(ctx, auth, bytes);

/**
 * Code of a CID: memory, then the content store, then the gateways (always verified against the CID).
 * Code fetched from the gateways is pinned for the caller's account (pin() above: same permission,
 * quota and price as POST /actions), so fetching by CID cannot fill the disk for free.
 */
export async function loadCode(ctx: RelayerContext, cid: string, auth: AuthContext): Promise<string> {
  let verified = verifiedCode.get(ctx);
  if (!verified) verifiedCode.set(ctx, (verified = new VerifiedCode()));
  const hit = verified.get(cid);
  if (hit !== undefined) return hit;
  const code = await loadVerified(ctx, cid, auth);
  verified.remember(cid, code);
  return code;
}

async function loadVerified(ctx: RelayerContext, cid: string, auth: AuthContext): Promise<string> {
  let bytes: Uint8Array | null = null;
  try {
    bytes = await ctx.contentStore.get(cid);
  } catch (err) {
    if (!isEnclaveError(err)) throw err;
    ctx.logger.warn({ cid, code: err.code }, "content store entry does not match its CID");
  }
  if (!bytes && ctx.gateway) {
    // Before any gateway traffic: a caller who may not pin cannot make the relayer fetch and store.
    if (!canPin(auth)) {
      throw new ApiError(
        "not_authorized_to_pin",
        `${cid} is not stored here; fetching it from IPFS pins it for the account, which this key may not do.`,
        { details: { cid } },
      );
    }
    try {
      bytes = await ctx.gateway.fetch(cid);
    } catch (err) {
      if (isEnclaveError(err) && err.code === "content_not_found") bytes = null;
      else if (isEnclaveError(err)) {
        throw new ApiError(
          "action_fetch_failed",
          `The IPFS gateways could not deliver ${cid} (${err.code}).`,
          { details: { cid, reason: err.code } },
        );
      } else throw err;
    }
    if (bytes) {
      if (bytes.length > ctx.cfg.limits.ipfsCodeBytes)
        throw new ApiError(
          "code_too_large",
          `The code of ${cid} is larger than ${ctx.cfg.limits.ipfsCodeBytes} bytes.`,
        );
      // Refusals (permission, quota, credits) are the caller's answer. A store that cannot write is
      // not: the verified code is still served, unstored and uncounted (pin() released it), as before
      // pins were counted.
      await pin(ctx, auth, bytes).catch((err: unknown) => {
        if (err instanceof ApiError) throw err;
        ctx.logger.warn({ cid, err: String(err) }, "could not store code fetched from the gateways");
      });
    }
  }
  if (!bytes)
    throw new ApiError(
      "action_not_found",
      `No code is known for ${cid}; pin it with POST /actions or send it inline.`,
      { details: { cid } },
    );
  return Buffer.from(bytes).toString("utf8");
}
