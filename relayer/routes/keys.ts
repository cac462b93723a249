/**
 * The five usage-key endpoints of docs/background.md §4.1. Owner-only: a usage key gets 403 owner_only, the account key
 * of a ChainSecured account 409 account_chain_secured. Update and remove take the key's value
 * (`usage_api_key`) or its `id` (an owner who no longer holds the value).
 */
import { isEnclaveError } from "../../enclave";
import { GROUP_SCOPES, SCOPES, structArgs } from "../../vocabulary/scopes";
import { authOf, type AuthContext } from "../auth";
import { requireOwner, requireOwnerRead } from "../policy";
import { registryInterface } from "../chain/abi";
import type { KeyRecord, KeyScopes } from "../permissions/projection";
import { firstEvent, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { paginate, parsePage } from "../http/validate";
import { keyItem } from "../present";
import { revokedKeys } from "../keyHistory";
import { endpoint, type Body, type BodyOf } from "./endpoint";
import * as s from "./schemas";

/** `include` of list_api_keys: absent or "live" (the live keys), or "all" (also expired and revoked ones). */
function readInclude(v: unknown): boolean {
  if (v === undefined || v === "" || v === "live") return false;
  if (v === "all") return true;
  throw new ApiError("invalid_request", '`include` must be "live" (the default) or "all".', {
    details: { field: "include", allowed: ["live", "all"] },
  });
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The seven permission fields, as read by their schemas; any left out took their default (false / []). */
function readScopes(body: Body, auth: AuthContext): KeyScopes {
  // A group named twice is granted once.
  const scopes = Object.fromEntries(
    SCOPES.map((w) => [w.struct, w.perGroup ? [...new Set(body[w.field] as number[])] : body[w.field]]),
  ) as KeyScopes;
  // Same rule as the registry (a scope can name only live groups or the wildcard), said precisely.
  for (const { field, struct } of GROUP_SCOPES) {
    for (const id of scopes[struct]) {
      if (id !== 0 && !auth.account.groups.has(id)) {
        throw new ApiError(
          "group_not_found",
          `\`${field}\` names group ${id}, which does not exist in this account.`,
          { details: { field, group_id: id } },
        );
      }
    }
  }
  return scopes;
}

/**
 * The optional per-key spend cap (off chain, in the billing ledger). It is applied only after the
 * registry write landed, so a refused write changes nothing. Without billing there is nothing to cap.
 */
function readSpendCap(ctx: RelayerContext, body: Body): number | null {
  const cap = body.spend_cap_cents as number | null;
  if (cap !== null && !ctx.billing) {
    throw new ApiError("invalid_request", "`spend_cap_cents` needs billing, which is off on this service.", {
      details: { field: "spend_cap_cents" },
    });
  }
  return cap;
}

/**
 * `usage_api_key`: the value of a usage key, read as the key's address (the value itself goes no
 * further). Its own check, since only the enclave can tell a key from a string.
 */
function usageKeyAddress(v: unknown, ctx: RelayerContext): string | undefined {
  if (v === undefined || v === null) return undefined;
  const refuse = (message: string) =>
    new ApiError("invalid_usage_api_key", message, { details: { field: "usage_api_key" } });
  if (typeof v !== "string") throw refuse("`usage_api_key` must be a string.");
  let parsed;
  try {
    parsed = ctx.enclave.parseApiKey(v);
  } catch (err) {
    if (isEnclaveError(err)) throw refuse("`usage_api_key` is not a valid key.");
    throw err;
  }
  if (parsed.kind !== "usage")
    throw refuse("`usage_api_key` holds an account key; send the usage key (docs/background.md §4.1).");
  return parsed.address;
}

/** The checks of a body naming a key (`s.keyTarget`). */
export const TARGET_CHECKS = { usage_api_key: usageKeyAddress };

/** The live key an update/remove/rotation is about (the body sent exactly one of its value and its id). */
export function targetKey(body: { usage_api_key?: string; id?: string }, auth: AuthContext): KeyRecord {
  const address = (body.usage_api_key ?? body.id) as string;
  const key = auth.account.keys.get(address);
  if (!key)
    throw new ApiError("usage_key_not_found", `No live usage key ${address} in this account.`, {
      details: { id: address },
    });
  return key;
}

/** The answer of an update (`s.keyAnswer`): the key as it is now, or its id if the cache is behind. */
async function keyAsNow(ctx: RelayerContext, auth: AuthContext, address: string, txHash: string) {
  const rec = (await ctx.cache.account(auth.account.id)).keys.get(address);
  return { ...(rec ? await keyItem(rec, ctx.billing) : { id: address }), tx_hash: txHash };
}

const postAddUsageApiKey = endpoint<RelayerContext>("POST", "/add_usage_api_key", {
  caller: "key",
  summary: "Create a usage key (value returned once as usage_api_key)",
  status: 201,
  body: s.keyCreate,
  answer: s.out(
    {
      ...s.newUsageKeyFields("The key (shown once)"),
      ...s.usageKeyFields,
      tx_hash: s.txHash,
    },
    ["usage_api_key_withheld"],
  ),
  errors: [...s.WRITE_ERRORS, "owner_only", "group_not_found"],
  secretFields: { names: ["usage_api_key"], mode: "encrypt" },
  async handle(ctx, _req, res, body: BodyOf<typeof s.keyCreate>) {
    const auth = authOf(res);
    requireOwner(auth);
    const { name, description } = body;
    const expiration = body.expiration ?? 0;
    const scopes = readScopes(body, auth);
    const spendCap = readSpendCap(ctx, body);
    const gen = ctx.enclave.generateUsageKey();
    const out = await write(
      ctx,
      auth,
      "add_usage_api_key",
      registryInterface.encodeFunctionData("addKey", [
        gen.address,
        gen.keyHash,
        name,
        description,
        expiration,
        structArgs(scopes),
      ]),
    );
    firstEvent(out, "KeyAdded");
    await ctx.billing?.setKeySpendCap(auth.account.id.toString(), gen.address, spendCap);
    // The key as the cache has it, or as written if the cache has not caught up yet.
    const rec = (await ctx.cache.account(auth.account.id)).keys.get(gen.address) ?? {
      address: gen.address,
      keyHash: gen.keyHash,
      name,
      description,
      expiration,
      createdAt: null,
      scopes,
    };
    const item = await keyItem(rec, ctx.billing);
    return { status: 201, body: { usage_api_key: gen.apiKey, ...item, tx_hash: out.txHash } };
  },
});

const getListApiKeys = endpoint<RelayerContext>("GET", "/list_api_keys", {
  caller: "key",
  summary:
    "List usage keys (never their values); include=all also lists expired and revoked keys, each with its state",
  params: [
    ...s.pagingParams,
    {
      name: "include",
      in: "query",
      schema: { type: "string", enum: ["live", "all"], default: "live" },
    },
  ],
  answer: s.page(s.usageKeyItem),
  errors: ["owner_only", "invalid_pagination", "invalid_request"],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    requireOwnerRead(auth);
    const query = req.query as Record<string, unknown>;
    const page = parsePage(query, ctx.cfg.limits.maxPageSize);
    const all = readInclude(query.include);
    const now = nowSeconds();
    const live = (k: KeyRecord) => k.expiration === 0 || now < k.expiration;
    // The registry's listKeys leaves expired keys out; so does this list, unless include=all, which
    // also lists expired keys and the revoked ones (from the registry's events), each with its state.
    const keys: { k: KeyRecord; state: "active" | "expired" | "revoked" }[] = [...auth.account.keys.values()]
      .filter((k) => all || live(k))
      .map((k) => ({ k, state: live(k) ? ("active" as const) : ("expired" as const) }));
    if (all) {
      const revoked = await revokedKeys(
        ctx.reader,
        ctx.reader.address,
        auth.account.id,
        ctx.cfg.deployBlock,
        ctx.cache.lastProcessedBlock,
      );
      for (const k of revoked) if (!auth.account.keys.has(k.address)) keys.push({ k, state: "revoked" });
    }
    keys.sort(
      (x, y) => (x.k.createdAt ?? 0) - (y.k.createdAt ?? 0) || x.k.address.localeCompare(y.k.address),
    );
    const p = paginate(keys, page);
    return {
      body: {
        ...p,
        items: await Promise.all(
          p.items.map(async ({ k, state }) => ({ ...(await keyItem(k, ctx.billing)), state })),
        ),
      },
    };
  },
});

const updateBody = s.targetingKey(
  s.obj({
    ...s.keyTarget,
    name: s.name,
    description: s.description,
    expiration: s.expirationIn,
    ...s.permissionFields,
  }),
);

const postUpdateUsageApiKey = endpoint<RelayerContext>("POST", "/update_usage_api_key", {
  caller: "key",
  summary: "Replace all permissions (fields left out reset to default)",
  body: updateBody,
  answer: s.keyAnswer,
  errors: [
    ...s.WRITE_ERRORS,
    "owner_only",
    "usage_key_not_found",
    "usage_key_expired",
    "invalid_usage_api_key",
    "group_not_found",
  ],
  checks: TARGET_CHECKS,
  async handle(ctx, _req, res, body: BodyOf<typeof updateBody>) {
    const auth = authOf(res);
    requireOwner(auth);
    const key = targetKey(body, auth);
    const { name, description } = body;
    const expiration = body.expiration ?? 0;
    const scopes = readScopes(body, auth);
    // Full replace (docs/background.md §4.1 rule 2): a cap left out is reset to "no cap".
    const spendCap = readSpendCap(ctx, body);
    const out = await write(
      ctx,
      auth,
      "update_usage_api_key",
      registryInterface.encodeFunctionData("updateKey", [
        key.address,
        name,
        description,
        expiration,
        structArgs(scopes),
      ]),
    );
    await ctx.billing?.setKeySpendCap(auth.account.id.toString(), key.address, spendCap);
    return { body: await keyAsNow(ctx, auth, key.address, out.txHash) };
  },
});

// Metadata only: a field left out keeps its current value.
const metadataBody = s.targetingKey(
  s.obj({
    ...s.keyTarget,
    name: s.bytes(s.BODY_LIMITS.maxNameLength),
    description: s.bytes(s.BODY_LIMITS.maxDescriptionLength),
  }),
);

const postUpdateUsageApiKeyMetadata = endpoint<RelayerContext>("POST", "/update_usage_api_key_metadata", {
  caller: "key",
  summary: "Change name and description only",
  body: metadataBody,
  checks: TARGET_CHECKS,
  answer: s.keyAnswer,
  errors: [...s.WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
  async handle(ctx, _req, res, body: BodyOf<typeof metadataBody>) {
    const auth = authOf(res);
    requireOwner(auth);
    const key = targetKey(body, auth);
    const name = body.name ?? key.name;
    const description = body.description ?? key.description;
    const out = await write(
      ctx,
      auth,
      "update_usage_api_key_metadata",
      registryInterface.encodeFunctionData("updateKeyMetadata", [key.address, name, description]),
    );
    return { body: await keyAsNow(ctx, auth, key.address, out.txHash) };
  },
});

const removeBody = s.targetingKey(s.obj(s.keyTarget));

const postRemoveUsageApiKey = endpoint<RelayerContext>("POST", "/remove_usage_api_key", {
  caller: "key",
  summary: "Remove a usage key (refused from the next request on)",
  body: removeBody,
  checks: TARGET_CHECKS,
  answer: s.out({ id: s.address, removed: { type: "boolean", const: true }, tx_hash: s.txHash }),
  errors: [...s.WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
  async handle(ctx, _req, res, body: BodyOf<typeof removeBody>) {
    const auth = authOf(res);
    requireOwner(auth);
    const key = targetKey(body, auth);
    // Revocation always goes through: never refused for credit (charged after, even into a debt).
    const out = await write(
      ctx,
      auth,
      "remove_usage_api_key",
      registryInterface.encodeFunctionData("removeKey", [key.address]),
      { revocation: true },
    );
    return { body: { id: key.address, removed: true, tx_hash: out.txHash } };
  },
});

export const KEY_ENDPOINTS = [
  postAddUsageApiKey,
  getListApiKeys,
  postUpdateUsageApiKey,
  postUpdateUsageApiKeyMetadata,
  postRemoveUsageApiKey,
];
