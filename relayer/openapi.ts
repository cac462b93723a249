/**
 * The OpenAPI 3.1 document served at /core/v1/openapi.json. Written by hand next to the routes (a test
 * checks that every route in app.ts's ROUTES table is documented here, and every error code is listed).
 */
import type { RelayerContext } from "./context";
import { ERROR_CATALOGUE } from "./errorCatalogue";

type Schema = Record<string, unknown>;

const str = (description?: string): Schema => ({ type: "string", ...(description ? { description } : {}) });
const int = (description?: string): Schema => ({ type: "integer", ...(description ? { description } : {}) });
const bool = (description?: string): Schema => ({ type: "boolean", ...(description ? { description } : {}) });
const arr = (items: Schema, description?: string): Schema => ({
  type: "array",
  items,
  ...(description ? { description } : {}),
});
const obj = (properties: Record<string, Schema>, required: string[] = []): Schema => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
});
const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const nullable = (s: Schema): Schema => ({ oneOf: [s, { type: "null" }] });

const groupIds = arr(
  { type: "integer", minimum: 0 },
  "Group ids; 0 is the wildcard for every group of the account.",
);
const pkpId = {
  type: "string",
  pattern: "^0x[0-9a-f]{64}$",
  description: "PKP id: 0x + 64 lower-case hex digits",
};
const address = { type: "string", pattern: "^0x[0-9a-fA-F]{40}$", description: "EIP-55 checksummed address" };
const permissionFields: Record<string, Schema> = {
  can_create_groups: bool(),
  can_delete_groups: bool(),
  can_create_pkps: bool(),
  manage_ipfs_ids_in_groups: groupIds,
  add_pkp_to_groups: groupIds,
  remove_pkp_from_groups: groupIds,
  execute_in_groups: groupIds,
  spend_cap_cents: nullable({
    type: "integer",
    minimum: 0,
    description: "Per-key spend cap in cents (billing); null or absent = no cap. Update replaces it.",
  }),
};
const expiration = nullable({ type: "integer", description: "Unix seconds; null = never" });

const usageKeyItem = obj({
  id: address,
  api_key_hash: nullable(str("keccak256 of the key string")),
  name: str(),
  description: str(),
  expiration,
  balance: nullable(
    int("Remaining spend allowance in cents (cap − spent) when billing is on and the key has a spend cap"),
  ),
  spent_cents: nullable(int()),
  spend_cap_cents: nullable(int()),
  can_create_groups: bool(),
  can_delete_groups: bool(),
  can_create_pkps: bool(),
  can_manage_ipfs_ids_in_groups: groupIds,
  can_add_pkp_to_groups: groupIds,
  can_remove_pkp_from_groups: groupIds,
  can_execute_in_groups: groupIds,
  created_at: nullable(int("Unix seconds (block time of registration)")),
});

function page(item: Schema): Schema {
  return obj({ items: arr(item), page_number: int(), page_size: int(), total: int() }, [
    "items",
    "page_number",
    "page_size",
    "total",
  ]);
}

const pagingParams = [
  { name: "page_number", in: "query", schema: { type: "integer", minimum: 0, default: 0 } },
  { name: "page_size", in: "query", schema: { type: "integer", minimum: 1, maximum: 100, default: 20 } },
];
const idParam = (name: string, schema: Schema) => ({ name, in: "path", required: true, schema });

interface Op {
  summary: string;
  auth?: "any" | "account" | "none";
  body?: Schema;
  ok: Schema;
  status?: number;
  params?: unknown[];
  errors: string[];
}

function op(o: Op) {
  const responses: Record<string, unknown> = {
    [String(o.status ?? 200)]: { description: "OK", content: { "application/json": { schema: o.ok } } },
  };
  const byStatus = new Map<number, string[]>();
  const common =
    o.auth === "none"
      ? []
      : ["missing_api_key", "invalid_api_key", "unknown_api_key", "api_key_expired", "rate_limited"];
  // The HTTP guard (http/guard.ts) answers these on every operation, before any route runs.
  const guard = ["json_too_deep", "header_too_long", "invalid_query", "invalid_idempotency_key"];
  for (const code of [...new Set([...common, ...guard, ...o.errors]), "internal_error"]) {
    const e = ERROR_CATALOGUE[code];
    if (!e) continue;
    byStatus.set(e.status, [...(byStatus.get(e.status) ?? []), code]);
  }
  for (const [status, codes] of byStatus) {
    responses[String(status)] = {
      description: codes.join(", "),
      content: { "application/json": { schema: ref("Error") } },
    };
  }
  return {
    summary: o.summary,
    ...(o.auth === "none" ? { security: [] } : {}),
    ...(o.params ? { parameters: o.params } : {}),
    ...(o.body
      ? { requestBody: { required: true, content: { "application/json": { schema: o.body } } } }
      : {}),
    responses,
  };
}

const WRITE_ERRORS = [
  "invalid_request",
  "unknown_field",
  "invalid_json",
  "payload_too_large",
  "unsupported_media_type",
  "chain_unavailable",
  "gas_wallet_unfunded",
  "write_reverted",
  "idempotency_key_reused",
  "invalid_idempotency_key",
  "account_chain_secured",
];

export function buildOpenApi(ctx: Pick<RelayerContext, "chainId" | "cfg">) {
  const keyCreate = obj({ name: str(), description: str(), expiration, ...permissionFields });
  const keyTarget = { usage_api_key: str("The usage key value (not the account key)"), id: address };
  return {
    openapi: "3.1.0",
    info: {
      title: "Sigil /core/v1",
      version: "1.0.0",
      description:
        "Programmable key management: accounts, scoped usage keys, PKPs, groups, actions. Errors are " +
        '{"error": {"code", "message", "details"?}, "request_id"}; codes are listed in docs/errors.md. ' +
        "Every POST accepts an Idempotency-Key header (kept 24 h).",
    },
    servers: [{ url: "/" }],
    security: [{ apiKey: [] }, { bearer: [] }],
    paths: {
      "/core/v1/new_account": {
        post: op({
          summary: "Create an account (returns the account key, once)",
          auth: "none",
          status: 201,
          body: obj({ account_name: str(), account_description: str(), email: str() }),
          ok: obj({
            api_key: str(),
            account_id: int(),
            owner_address: address,
            master_key_address: address,
            mode: str(),
            name: str(),
            description: str(),
            tx_hash: str(),
          }),
          errors: [...WRITE_ERRORS, "rate_limited"],
        }),
      },
      "/core/v1/account": {
        get: op({
          summary: "Account info, mode (api | chain_secured) and pending owner",
          ok: obj({
            account_id: int(),
            name: str(),
            description: str(),
            email: nullable(str()),
            mode: str(),
            owner_address: address,
            pending_owner: nullable(address),
            master_key_address: nullable(address),
            group_count: int(),
            pkp_count: int(),
            usage_key_count: int(),
          }),
          errors: [],
        }),
      },
      "/core/v1/account/transfer_ownership": {
        post: op({
          summary: "Propose a new owner (account key, API mode)",
          body: obj({ new_owner: address }, ["new_owner"]),
          ok: obj({ pending_owner: address, tx_hash: str() }),
          errors: [...WRITE_ERRORS, "owner_only", "invalid_address", "address_in_use"],
        }),
      },
      "/core/v1/account/cancel_ownership_transfer": {
        post: op({
          summary: "Withdraw a pending transfer (account key, API mode)",
          ok: obj({ pending_owner: { type: "null" }, tx_hash: str() }),
          errors: [...WRITE_ERRORS, "owner_only", "no_pending_transfer"],
        }),
      },
      "/core/v1/add_usage_api_key": {
        post: op({
          summary: "Create a usage key (value returned once as usage_api_key)",
          status: 201,
          body: keyCreate,
          ok: { allOf: [usageKeyItem, obj({ usage_api_key: str(), tx_hash: str() })] },
          errors: [
            ...WRITE_ERRORS,
            "owner_only",
            "group_not_found",
            "invalid_group_id",
            "expiration_in_past",
            "too_many_entries",
            "string_too_long",
          ],
        }),
      },
      "/core/v1/list_api_keys": {
        get: op({
          summary: "List usage keys (never their values)",
          params: pagingParams,
          ok: page(usageKeyItem),
          errors: ["owner_only", "invalid_pagination"],
        }),
      },
      "/core/v1/update_usage_api_key": {
        post: op({
          summary: "Replace all permissions (fields left out reset to default)",
          body: obj({ ...keyTarget, name: str(), description: str(), expiration, ...permissionFields }),
          ok: usageKeyItem,
          errors: [
            ...WRITE_ERRORS,
            "owner_only",
            "usage_key_not_found",
            "usage_key_expired",
            "invalid_usage_api_key",
            "group_not_found",
          ],
        }),
      },
      "/core/v1/update_usage_api_key_metadata": {
        post: op({
          summary: "Change name and description only",
          body: obj({ ...keyTarget, name: str(), description: str() }),
          ok: usageKeyItem,
          errors: [...WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
        }),
      },
      "/core/v1/remove_usage_api_key": {
        post: op({
          summary: "Remove a usage key (refused from the next request on)",
          body: obj(keyTarget),
          ok: obj({ id: address, removed: bool(), tx_hash: str() }),
          errors: [...WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
        }),
      },
      "/core/v1/pkps/create": {
        post: op({
          summary: "Create a PKP (pkp:create)",
          status: 201,
          body: obj({ name: str(), description: str() }),
          ok: obj({
            pkp_id: pkpId,
            address,
            public_key: str(),
            name: str(),
            description: str(),
            tx_hash: str(),
          }),
          errors: [...WRITE_ERRORS, "missing_scope"],
        }),
      },
      "/core/v1/pkps": {
        get: op({
          summary: "List the account's PKPs",
          params: pagingParams,
          ok: page(ref("Pkp")),
          errors: ["invalid_pagination"],
        }),
      },
      "/core/v1/pkps/{id}": {
        get: op({
          summary: "A PKP's public key and address (no key needed)",
          auth: "none",
          params: [idParam("id", pkpId)],
          ok: ref("Pkp"),
          errors: ["invalid_pkp_id", "pkp_not_found", "chain_unavailable"],
        }),
      },
      "/core/v1/groups": {
        post: op({
          summary: "Create a group (group:create; initial members need the wildcard scopes)",
          status: 201,
          body: obj({ name: str(), description: str(), pkps: arr(pkpId), actions: arr(str("CID")) }),
          ok: obj({ group_id: int(), tx_hash: str() }),
          errors: [
            ...WRITE_ERRORS,
            "missing_scope",
            "invalid_pkp_id",
            "pkp_not_found",
            "invalid_cid",
            "too_many_groups",
          ],
        }),
        get: op({
          summary: "List groups",
          params: pagingParams,
          ok: page(
            obj({ group_id: int(), name: str(), description: str(), pkp_count: int(), action_count: int() }),
          ),
          errors: ["invalid_pagination"],
        }),
      },
      "/core/v1/groups/{id}": {
        get: op({
          summary: "A group with its members (PKP ids and CIDs)",
          params: [idParam("id", int())],
          ok: ref("Group"),
          errors: ["invalid_group_id", "group_not_found"],
        }),
        delete: op({
          summary: "Delete a group (group:delete)",
          params: [idParam("id", int())],
          ok: obj({ group_id: int(), deleted: bool(), tx_hash: str() }),
          errors: [...WRITE_ERRORS, "missing_scope", "invalid_group_id", "group_not_found"],
        }),
      },
      "/core/v1/groups/{id}/actions": {
        post: op({
          summary: "Add and remove action CIDs (group:manageActions)",
          params: [idParam("id", int())],
          body: obj({ add: arr(str("CID")), remove: arr(str("CID")) }),
          ok: ref("Group"),
          errors: [
            ...WRITE_ERRORS,
            "missing_scope",
            "invalid_cid",
            "group_not_found",
            "action_already_in_group",
            "action_not_in_group",
            "too_many_members",
          ],
        }),
      },
      "/core/v1/groups/{id}/pkps": {
        post: op({
          summary: "Add (group:addPkp) and remove (group:removePkp) PKPs",
          params: [idParam("id", int())],
          body: obj({ add: arr(pkpId), remove: arr(pkpId) }),
          ok: ref("Group"),
          errors: [
            ...WRITE_ERRORS,
            "missing_scope",
            "invalid_pkp_id",
            "pkp_not_found",
            "group_not_found",
            "pkp_already_in_group",
            "pkp_not_in_group",
            "too_many_members",
          ],
        }),
      },
      "/core/v1/actions": {
        post: op({
          summary:
            "Pin code in the content store (counted against the account's pin quota, billed once per CID)",
          status: 201,
          body: obj({ code: str() }, ["code"]),
          ok: obj({
            cid: str(),
            bytes: int(),
            charged_cents: int(),
            used_bytes: int(),
            quota_bytes: int(),
          }),
          errors: [
            "invalid_request",
            "code_too_large",
            "not_authorized_to_pin",
            "pin_quota_exceeded",
            "insufficient_credits",
            "spend_cap_reached",
          ],
        }),
      },
      "/core/v1/actions/cid": {
        post: op({
          summary: "Compute the CID of code without storing it",
          body: obj({ code: str() }, ["code"]),
          ok: obj({ cid: str() }),
          errors: ["invalid_request", "code_too_large"],
        }),
      },
      "/core/v1/actions/{cid}": {
        get: op({
          summary: "The code of a CID (a CID fetched from IPFS is pinned for the account)",
          params: [idParam("cid", str())],
          ok: obj({ cid: str(), code: str() }),
          errors: [
            "invalid_cid",
            "action_not_found",
            "action_fetch_failed",
            "code_too_large",
            "not_authorized_to_pin",
            "pin_quota_exceeded",
            "insufficient_credits",
            "spend_cap_reached",
          ],
        }),
      },
      "/core/v1/svc_action": {
        post: op({
          summary: "Execute an action (SPEC 4.3 authorization)",
          body: obj({
            code: str("Inline JavaScript"),
            cid: str(),
            pkp_id: pkpId,
            js_params: {},
            timeout_ms: {
              ...int(
                "Time limit of this run in ms, at most the service's (30000 unless configured; a refusal names it in details.max); a run stopped at it is charged ceil(timeout_ms / 1000) seconds",
              ),
              minimum: 1,
            },
          }),
          ok: obj({
            response: {},
            logs: str(),
            has_error: bool(),
            error: obj({ code: str(), message: str() }),
            signatures: { type: "object", description: "Named signatures of the older signEcdsa API" },
            cid: str(),
            execution_ms: { type: "number" },
            charged_cents: int(),
          }),
          errors: [
            "invalid_request",
            "invalid_cid",
            "invalid_pkp_id",
            "pkp_not_found",
            "code_too_large",
            "js_params_too_large",
            "not_authorized_to_execute",
            "account_chain_secured",
            "action_not_found",
            "action_fetch_failed",
            "not_authorized_to_pin",
            "pin_quota_exceeded",
            "too_many_concurrent_executions",
            "executor_busy",
          ],
        }),
      },
      "/core/v1/config": {
        get: op({
          summary: "Chain id, contract addresses, limits, prices",
          auth: "none",
          ok: obj({
            chain_id: int(),
            registry_address: address,
            forwarder_address: address,
            deploy_block: int(),
            limits: { type: "object" },
            rate_limits: { type: "object" },
            prices: nullable({ type: "object" }),
            billing_enabled: bool(),
          }),
          errors: [],
        }),
      },
      "/core/v1/openapi.json": {
        get: op({ summary: "This document", auth: "none", ok: { type: "object" }, errors: [] }),
      },
      "/health": {
        get: op({
          summary:
            "{status}: ok or degraded (503). With X-Operator-Token: chain, cache, executor pool and gas wallets",
          auth: "none",
          params: [
            {
              name: "X-Operator-Token",
              in: "header",
              required: false,
              schema: { type: "string" },
              description: "The operator token (SIGIL_OPERATOR_TOKEN): unlocks the detailed view",
            },
          ],
          ok: { type: "object" },
          errors: ["invalid_operator_token"],
        }),
      },
      "/metrics": {
        get: {
          summary: "Prometheus metrics",
          security: [],
          responses: { "200": { description: "text/plain exposition format" } },
        },
      },
    },
    components: {
      securitySchemes: {
        apiKey: { type: "apiKey", in: "header", name: "X-Api-Key" },
        bearer: { type: "http", scheme: "bearer" },
      },
      schemas: {
        Error: obj(
          {
            error: obj(
              {
                code: { type: "string", enum: Object.keys(ERROR_CATALOGUE) },
                message: str(),
                details: { type: "object" },
              },
              ["code", "message"],
            ),
            request_id: str(),
          },
          ["error", "request_id"],
        ),
        Pkp: obj({
          pkp_id: pkpId,
          address,
          public_key: str("Uncompressed secp256k1 public key, 0x04…"),
          name: str(),
          description: str(),
          account_id: int(),
        }),
        Group: obj({
          group_id: int(),
          name: str(),
          description: str(),
          pkps: arr(pkpId),
          actions: arr(str("CID")),
        }),
      },
    },
    "x-sigil": {
      chain_id: ctx.chainId,
      registry_address: ctx.cfg.registryAddress,
      forwarder_address: ctx.cfg.forwarderAddress,
    },
  };
}
