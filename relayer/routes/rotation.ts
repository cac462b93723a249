/**
 * POST /core/v1/rotate_usage_api_key: replace a usage key by a new one in one call (docs/api.md, "Rotating
 * a key"). The new key gets exactly the old key's scopes, name, description and spend cap; the old key
 * expires `overlap_seconds` after the block that carries the rotation (or keeps its own expiration if that
 * is sooner), so clients have that long to switch over.
 *
 * Both changes are one registry call, `rotateKey`, in one forward request: the chain applies both or
 * neither, and checks the scopes it copies against the ones the old key holds (a stale copy is refused:
 * 409 rotation_scopes_changed). Owner only (policy.ts, requireRotator); charged as one write.
 */
import { structArgs } from "../../vocabulary/scopes";
import { authOf } from "../auth";
import { registryInterface } from "../chain/abi";
import { registryRefusal } from "../chain/registryErrors";
import { firstEvent, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { requireRotator } from "../policy";
import { keyItem } from "../present";
import { TARGET_CHECKS, targetKey } from "./keys";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

/** The registry's MAX_ROTATION_OVERLAP: 30 days (a test checks that the two agree). */
export const MAX_ROTATION_OVERLAP_SECONDS = 30 * 24 * 60 * 60;

/**
 * `overlap_seconds`: required, an integer from 0 to MAX_ROTATION_OVERLAP_SECONDS; its own check, since a
 * longer overlap has its own code (overlap_too_long).
 */
function readOverlap(v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new ApiError(
      "invalid_request",
      `\`overlap_seconds\` must be an integer from 0 to ${MAX_ROTATION_OVERLAP_SECONDS} (seconds the old key keeps working).`,
      { details: { field: "overlap_seconds" } },
    );
  }
  if (v > MAX_ROTATION_OVERLAP_SECONDS) {
    throw new ApiError(
      "overlap_too_long",
      `An overlap of ${v} seconds is longer than the maximum of ${MAX_ROTATION_OVERLAP_SECONDS}.`,
      { details: { field: "overlap_seconds", max: MAX_ROTATION_OVERLAP_SECONDS } },
    );
  }
  return v;
}

const rotateBody = s.targetingKey(
  s.obj(
    {
      ...s.keyTarget,
      overlap_seconds: {
        type: "integer",
        minimum: 0,
        maximum: MAX_ROTATION_OVERLAP_SECONDS,
        description: "Seconds the old key keeps working after the rotation lands (0 = stops at once)",
      } as s.Typed<number>,
      expiration: s.expirationIn,
    },
    ["overlap_seconds"],
  ),
);

const postRotateUsageApiKey = endpoint<RelayerContext>("POST", "/rotate_usage_api_key", {
  caller: "key",
  summary:
    "Replace a usage key: a new key with the same scopes, name, description and spend cap (value returned once); the old one expires after overlap_seconds",
  status: 201,
  body: rotateBody,
  checks: { ...TARGET_CHECKS, overlap_seconds: readOverlap },
  answer: s.out(
    {
      ...s.newUsageKeyFields("The new key (shown once)"),
      ...s.usageKeyFields,
      previous_key: s.out({
        id: s.address,
        expiration: s.int("Unix seconds (chain time) from which the old key is refused"),
      }),
      tx_hash: s.txHash,
    },
    ["usage_api_key_withheld"],
  ),
  errors: [
    ...s.WRITE_ERRORS,
    "owner_only",
    "usage_key_not_found",
    "usage_key_expired",
    "invalid_usage_api_key",
    "overlap_too_long",
    "rotation_scopes_changed",
    "address_in_use",
  ],
  secretFields: { names: ["usage_api_key"], mode: "encrypt" },
  async handle(ctx, _req, res, body: BodyOf<typeof rotateBody>) {
    const auth = authOf(res);
    requireRotator(auth);
    const old = targetKey(body, auth);
    const overlap = body.overlap_seconds;
    const now = Math.floor(Date.now() / 1000);
    const expiration = body.expiration ?? 0;
    // Same rule as the registry (which would refuse the write too): an expired key has nothing left
    // to hand over.
    if (old.expiration !== 0 && now >= old.expiration)
      throw registryRefusal.usageKeyExpired(old.address, old.expiration);
    const accountId = auth.account.id.toString();
    const gen = ctx.enclave.generateUsageKey();
    // The cap goes in before the key exists on chain, so the new key is never usable uncapped. If the
    // write then fails, the row names an address nobody holds: harmless.
    const cap = ctx.billing ? (await ctx.billing.keySpend(old.address)).cap_cents : null;
    if (cap !== null) await ctx.billing!.setKeySpendCap(accountId, gen.address, cap);
    const out = await write(
      ctx,
      auth,
      "rotate_usage_api_key",
      registryInterface.encodeFunctionData("rotateKey", [
        old.address,
        overlap,
        gen.address,
        gen.keyHash,
        old.name,
        old.description,
        expiration,
        structArgs(old.scopes),
      ]),
    );
    firstEvent(out, "KeyAdded");
    const oldUntil = Number(firstEvent(out, "KeyUpdated").args.expiration);
    const account = await ctx.cache.account(auth.account.id);
    const rec = account.keys.get(gen.address) ?? {
      address: gen.address,
      keyHash: gen.keyHash,
      name: old.name,
      description: old.description,
      expiration,
      createdAt: null,
      scopes: old.scopes,
    };
    return {
      status: 201,
      body: {
        usage_api_key: gen.apiKey,
        ...(await keyItem(rec, ctx.billing)),
        previous_key: { id: old.address, expiration: oldUntil },
        tx_hash: out.txHash,
      },
    };
  },
});

export const ROTATION_ENDPOINTS = [postRotateUsageApiKey];
