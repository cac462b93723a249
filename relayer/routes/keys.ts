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
import { BodyReader, paginate, parseAddress, parsePage } from "../http/validate";
import { keyItem } from "../present";
import { revokedKeys } from "../keyHistory";
import { endpoint } from "./endpoint";
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

/** The seven permission fields; any left out take their default (false / []): docs/background.md §4.1 rule 2. */
function readScopes(ctx: RelayerContext, b: BodyReader, auth: AuthContext): KeyScopes {
  // Read in the struct's order (vocabulary/scopes.ts), so the first bad field is the one reported.
  const scopes = Object.fromEntries(
    SCOPES.map((w) => [
      w.struct,
      w.perGroup ? b.groupIds(w.field, ctx.cfg.limits.maxArrayEntries) : b.bool(w.field),
    ]),
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
function readSpendCap(ctx: RelayerContext, b: BodyReader): number | null {
  const cap = b.spendCap("spend_cap_cents");
  if (cap !== null && !ctx.billing) {
    throw new ApiError("invalid_request", "`spend_cap_cents` needs billing, which is off on this service.", {
      details: { field: "spend_cap_cents" },
    });
  }
  return cap;
}

const postAddUsageApiKey = endpoint<RelayerContext>("POST", "/add_usage_api_key", {
  caller: "key",
  summary: "Create a usage key (value returned once as usage_api_key)",
  status: 201,
  body: s.keyCreate,
  answer: s.out(
    {
      usage_api_key: {
        oneOf: [s.str("The key (shown once)"), s.out({ sealed: s.str() }), { type: "null" }],
      },
      usage_api_key_withheld: { type: "boolean", const: true },
      ...s.usageKeyFields,
      tx_hash: s.txHash,
    },
    ["usage_api_key_withheld"],
  ),
  errors: [
    ...s.WRITE_ERRORS,
    "owner_only",
    "group_not_found",
    "invalid_group_id",
    "expiration_in_past",
    "too_many_entries",
    "string_too_long",
  ],
  secretFields: { names: ["usage_api_key"], mode: "encrypt" },
  async handle(ctx, req, res) {
    const auth = authOf(res);
    requireOwner(auth);
    const b = new BodyReader(req.body);
    const name = b.string("name", { max: ctx.cfg.limits.maxNameLength });
    const description = b.string("description", { max: ctx.cfg.limits.maxDescriptionLength });
    const expiration = b.expiration("expiration", nowSeconds());
    const scopes = readScopes(ctx, b, auth);
    const spendCap = readSpendCap(ctx, b);
    b.done();
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
        scopesArg(scopes),
      ]),
    );
    firstEvent(out, "KeyAdded");
    await ctx.billing?.setKeySpendCap(auth.account.id.toString(), gen.address, spendCap);
    const rec = (await ctx.cache.account(auth.account.id)).keys.get(gen.address);
    const item = rec
      ? await keyItem(rec, ctx.billing)
      : keyItem(
          {
            address: gen.address,
            keyHash: gen.keyHash,
            name,
            description,
            expiration,
            createdAt: null,
            scopes,
          },
          ctx.billing,
        );
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

const postUpdateUsageApiKey = endpoint<RelayerContext>("POST", "/update_usage_api_key", {
  caller: "key",
  summary: "Replace all permissions (fields left out reset to default)",
  body: s.obj({
    ...s.keyTarget,
    name: s.str(),
    description: s.str(),
    expiration: s.expiration,
    ...s.permissionFields,
  }),
  answer: s.keyAnswer,
  errors: [
    ...s.WRITE_ERRORS,
    "owner_only",
    "usage_key_not_found",
    "usage_key_expired",
    "invalid_usage_api_key",
    "group_not_found",
  ],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    requireOwner(auth);
    const b = new BodyReader(req.body);
    const key = resolveTargetKey(ctx, b, auth);
    const name = b.string("name", { max: ctx.cfg.limits.maxNameLength });
    const description = b.string("description", { max: ctx.cfg.limits.maxDescriptionLength });
    const expiration = b.expiration("expiration", nowSeconds());
    const scopes = readScopes(ctx, b, auth);
    // Full replace (docs/background.md §4.1 rule 2): a cap left out is reset to "no cap".
    const spendCap = readSpendCap(ctx, b);
    b.done();
    const out = await write(
      ctx,
      auth,
      "update_usage_api_key",
      registryInterface.encodeFunctionData("updateKey", [
        key.address,
        name,
        description,
        expiration,
        scopesArg(scopes),
      ]),
    );
    await ctx.billing?.setKeySpendCap(auth.account.id.toString(), key.address, spendCap);
    const rec = (await ctx.cache.account(auth.account.id)).keys.get(key.address);
    return {
      body: { ...(rec ? await keyItem(rec, ctx.billing) : { id: key.address }), tx_hash: out.txHash },
    };
  },
});

const postUpdateUsageApiKeyMetadata = endpoint<RelayerContext>("POST", "/update_usage_api_key_metadata", {
  caller: "key",
  summary: "Change name and description only",
  body: s.obj({ ...s.keyTarget, name: s.str(), description: s.str() }),
  answer: s.keyAnswer,
  errors: [...s.WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    requireOwner(auth);
    const b = new BodyReader(req.body);
    const key = resolveTargetKey(ctx, b, auth);
    // Metadata only: a field left out keeps its current value.
    const name = b.string("name", { max: ctx.cfg.limits.maxNameLength, def: key.name });
    const description = b.string("description", {
      max: ctx.cfg.limits.maxDescriptionLength,
      def: key.description,
    });
    b.done();
    const out = await write(
      ctx,
      auth,
      "update_usage_api_key_metadata",
      registryInterface.encodeFunctionData("updateKeyMetadata", [key.address, name, description]),
    );
    const rec = (await ctx.cache.account(auth.account.id)).keys.get(key.address);
    return {
      body: { ...(rec ? await keyItem(rec, ctx.billing) : { id: key.address }), tx_hash: out.txHash },
    };
  },
});

const postRemoveUsageApiKey = endpoint<RelayerContext>("POST", "/remove_usage_api_key", {
  caller: "key",
  summary: "Remove a usage key (refused from the next request on)",
  body: s.obj(s.keyTarget),
  answer: s.out({ id: s.address, removed: { type: "boolean", const: true }, tx_hash: s.txHash }),
  errors: [...s.WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    requireOwner(auth);
    const b = new BodyReader(req.body);
    const key = resolveTargetKey(ctx, b, auth);
    b.done();
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

/** The key an update/remove/rotation is about: by value (`usage_api_key`) or by `id`; exactly one. */
export function resolveTargetKey(ctx: RelayerContext, b: BodyReader, auth: AuthContext): KeyRecord {
  const value = b.raw("usage_api_key");
  const id = b.raw("id");
  if ((value === undefined || value === null) === (id === undefined || id === null)) {
    throw new ApiError(
      "invalid_request",
      "Send exactly one of `usage_api_key` (the key value) and `id` (the key's address).",
      {
        details: { field: "usage_api_key" },
      },
    );
  }
  let address: string;
  if (value !== undefined && value !== null) {
    if (typeof value !== "string")
      throw new ApiError("invalid_usage_api_key", "`usage_api_key` must be a string.", {
        details: { field: "usage_api_key" },
      });
    let parsed;
    try {
      parsed = ctx.enclave.parseApiKey(value);
    } catch (err) {
      if (isEnclaveError(err))
        throw new ApiError("invalid_usage_api_key", "`usage_api_key` is not a valid key.", {
          details: { field: "usage_api_key" },
        });
      throw err;
    }
    if (parsed.kind !== "usage") {
      throw new ApiError(
        "invalid_usage_api_key",
        "`usage_api_key` holds an account key; send the usage key (docs/background.md §4.1).",
        { details: { field: "usage_api_key" } },
      );
    }
    address = parsed.address;
  } else {
    address = parseAddress(id, "id");
  }
  const key = auth.account.keys.get(address);
  if (!key)
    throw new ApiError("usage_key_not_found", `No live usage key ${address} in this account.`, {
      details: { id: address },
    });
  return key;
}

/** KeyScopes as the registry's struct argument (addKey, updateKey, rotateKey). */
export function scopesArg(s: KeyScopes) {
  return structArgs(s);
}
