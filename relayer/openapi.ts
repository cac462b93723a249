/**
 * The OpenAPI 3.1 document served at /core/v1/openapi.json. Written by hand next to the routes (a test
 * checks that every route in app.ts's ROUTES table is documented here, and every error code is listed).
 */
import { SCOPES } from "../vocabulary/scopes";
import type { RelayerContext } from "./context";
import { BILLING_ERROR_CATALOGUE } from "./billing/errorCatalogue";
import { ERROR_CATALOGUE } from "./errorCatalogue";
import { EVENT_TYPES } from "./webhooks/eventTypes";

/** Every code an answer can carry: the relayer's and billing's (billing gates writes and executions). */
const ALL_ERRORS: Record<string, { status: number }> = { ...ERROR_CATALOGUE, ...BILLING_ERROR_CATALOGUE };

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
/** A response object: every field is always present unless named in `optional`; nothing else may be. */
const out = (properties: Record<string, Schema>, optional: string[] = []): Schema =>
  obj(
    properties,
    Object.keys(properties).filter((k) => !optional.includes(k)),
  );
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
/** The seven scopes' fields (request names or listed names), in struct order: vocabulary/scopes.ts. */
const scopeFields = (name: "field" | "listed"): Record<string, Schema> =>
  Object.fromEntries(SCOPES.map((w) => [w[name], w.perGroup ? groupIds : bool()]));
const permissionFields: Record<string, Schema> = {
  ...scopeFields("field"),
  spend_cap_cents: nullable({
    type: "integer",
    minimum: 0,
    description: "Per-key spend cap in cents (billing); null or absent = no cap. Update replaces it.",
  }),
};
const expiration = nullable({ type: "integer", description: "Unix seconds; null = never" });

const usageKeyFields: Record<string, Schema> = {
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
  ...scopeFields("listed"),
  created_at: nullable(int("Unix seconds (block time of registration)")),
};
const usageKeyItem = out({
  ...usageKeyFields,
  state: { type: "string", enum: ["active", "expired", "revoked"] },
});

function page(item: Schema): Schema {
  return out({ items: arr(item), page_number: int(), page_size: int(), total: int() });
}
const pkpFields: Record<string, Schema> = {
  pkp_id: pkpId,
  address,
  public_key: str("Uncompressed secp256k1 public key, 0x04…"),
  name: str(),
  description: str(),
};
const groupFields: Record<string, Schema> = {
  group_id: int(),
  name: str(),
  description: str(),
  pkps: arr(pkpId),
  actions: arr(str("CID")),
};
const txHash = { type: "string", pattern: "^0x[0-9a-f]{64}$", description: "The path-A transaction" };

/** An audit-log entry (relayer/audit/entries.ts): `data` has one shape per kind (docs/audit-log.md). */
const auditEntry = out({
  account: str(),
  seq: int("Gap-free, from 1, per account"),
  prev_hash: str("SHA-256 (0x hex) of the previous entry; zeros for the first"),
  hash: str("SHA-256 (0x hex) of this entry's canonical JSON"),
  kind: { type: "string", enum: ["execution", "write", "chain_write", "refusal", "billing"] },
  time_ms: int(),
  time: str("ISO 8601"),
  data: { type: "object" },
});
const AUDIT_QUERY = [
  {
    name: "from",
    in: "query",
    schema: { type: "string" },
    description: "ms since 1970 or ISO 8601 (inclusive)",
  },
  {
    name: "to",
    in: "query",
    schema: { type: "string" },
    description: "ms since 1970 or ISO 8601 (exclusive)",
  },
  {
    name: "type",
    in: "query",
    schema: { type: "string", enum: ["execution", "write", "chain_write", "refusal", "billing"] },
  },
  { name: "usage_key", in: "query", schema: { type: "string" }, description: "The acting key's address" },
  { name: "cid", in: "query", schema: { type: "string" } },
  { name: "pkp", in: "query", schema: { type: "string" }, description: "A PKP id" },
  { name: "outcome", in: "query", schema: { type: "string", enum: ["ok", "error", "refused"] } },
  { name: "cursor", in: "query", schema: { type: "string" } },
  { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 500, default: 50 } },
];

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
      : [
          "missing_api_key",
          "invalid_api_key",
          "unknown_api_key",
          "api_key_expired",
          "rate_limited",
          "signature_malformed",
          "signature_body_mismatch",
          "signature_expired",
          "signature_invalid",
          "signature_replayed",
          // A wallet sign-in's session (relayer/http/siwe.ts) is checked on every request it signs.
          "siwe_invalid",
          "siwe_wrong_domain",
          "siwe_wrong_chain",
          "siwe_expired",
          "siwe_not_owner",
          "siwe_owner_is_contract",
          "siwe_read_only",
          "siwe_session_revoked",
          // Authentication reads the permission cache, which needs the chain until it has synced.
          "chain_unavailable",
        ];
  // The HTTP guard (http/guard.ts) answers these on every operation, before any route runs; with
  // PostgreSQL the per-IP limit, which also runs before every route, reads the shared database.
  const guard = [
    "json_too_deep",
    "header_too_long",
    "invalid_query",
    "invalid_idempotency_key",
    "database_unavailable",
  ];
  for (const code of [...new Set([...common, ...guard, ...o.errors]), "internal_error"]) {
    const e = ALL_ERRORS[code];
    if (!e) throw new Error(`openapi: ${code} is in no error catalogue`);
    const codes = byStatus.get(e.status) ?? [];
    if (!codes.includes(code)) byStatus.set(e.status, [...codes, code]);
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

/** An operation that also answers `status` with `schema` (besides its success status and errors). */
function alsoAnswers(o: ReturnType<typeof op>, status: number, description: string, schema: Schema) {
  return {
    ...o,
    responses: {
      ...o.responses,
      [String(status)]: { description, content: { "application/json": { schema } } },
    },
  };
}

/** An operation whose success answer is JSON Lines (application/x-ndjson), not one JSON document. */
function jsonLines(o: ReturnType<typeof op>) {
  return {
    ...o,
    responses: {
      ...o.responses,
      "200": { description: "JSON Lines", content: { "application/x-ndjson": { schema: str() } } },
    },
  };
}

/** What any POST can be refused for before its route runs (body parser, Idempotency-Key). */
const BODY_ERRORS = [
  "invalid_json",
  "payload_too_large",
  "unsupported_media_type",
  "invalid_idempotency_key",
  "idempotency_key_reused",
  // A duplicate still waiting for the first request (on any instance sharing the database) after 30 s.
  "idempotency_key_in_flight",
];
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
  // A duplicate still waiting for the first request (on any instance sharing the database) after 30 s.
  "idempotency_key_in_flight",
  "invalid_idempotency_key",
  "account_chain_secured",
  "forward_request_required",
  "insufficient_credits",
  "spend_cap_reached",
];

const mode = { type: "string", enum: ["api", "chain_secured"] };
/** An ERC-2771 ForwardRequest (uint256 values as decimal strings, so no precision is lost in JSON). */
const forwardRequestFields: Record<string, Schema> = {
  from: address,
  to: address,
  value: { type: "string", pattern: "^[0-9]+$" },
  gas: { type: "string", pattern: "^[0-9]+$" },
  nonce: { type: "string", pattern: "^[0-9]+$" },
  deadline: int("Unix seconds (uint48)"),
  data: { type: "string", pattern: "^0x([0-9a-fA-F]{2})*$" },
};
/** update_usage_api_key(_metadata): the key as it is now (just its id if the cache has not caught up). */
const keyAnswer = out(
  { ...usageKeyFields, tx_hash: txHash },
  Object.keys(usageKeyFields).filter((k) => k !== "id"),
);
/** groups/{id}/actions and /pkps: the group as it is now, and one transaction per non-empty list. */
const membersAnswer = out(
  { ...groupFields, tx_hashes: arr(txHash) },
  Object.keys(groupFields).filter((k) => k !== "group_id"),
);

/** Webhook endpoints (docs/webhooks.md). */
const eventTypes = arr(
  { type: "string", enum: [...EVENT_TYPES, "*"] },
  'Event types, or ["*"] alone for every type',
);
const webhookFields: Record<string, Schema> = {
  id: { type: "string", pattern: "^we_[0-9a-f]{24}$" },
  url: str(),
  event_types: eventTypes,
  description: str(),
  enabled: bool(),
  notice: nullable(str("`webhook.disabled: …` when failed deliveries disabled the endpoint")),
  disabled_at: nullable(int("Unix seconds")),
  previous_secret_expires_at: nullable(
    int("Unix seconds: until then the previous secret signs too (a second v1), after a rotation"),
  ),
  created: int("Unix seconds"),
  updated: int("Unix seconds"),
};
const webhookSecret = {
  type: "string",
  pattern: "^whsec_[A-Za-z0-9_-]{43}$",
  description:
    "The signing secret, shown once (an Idempotency-Key replay shows it again to the same caller only)",
};
const deliveryItem = out({
  id: { type: "string", pattern: "^whd_[0-9a-f]{24}$" },
  event_id: str(),
  event_type: str(),
  status: { type: "string", enum: ["pending", "succeeded", "failed"] },
  attempts: int(),
  next_attempt_at: nullable(int("Unix seconds (pending deliveries)")),
  last_attempt_at: nullable(int("Unix seconds")),
  last_status: nullable(int("HTTP status of the last attempt")),
  last_error: nullable(str()),
  created: int("Unix seconds"),
});
const webhookId = idParam("id", { type: "string" });

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
        '{"error": {"code", "message", "details"?, "fix", "docs_url"}, "request_id"}; codes are listed in docs/errors.md. ' +
        "Every POST accepts an Idempotency-Key header (kept 24 h).",
    },
    servers: [{ url: "/" }],
    security: [{ apiKey: [] }, { bearer: [] }, { signedRequest: [] }],
    paths: {
      "/core/v1/new_account": {
        post: op({
          summary: "Create an account (returns the account key, once)",
          auth: "none",
          status: 201,
          body: obj({ account_name: str(), account_description: str(), email: str() }),
          ok: out(
            {
              api_key: nullable(str("The account key (shown once: null in a replayed answer)")),
              api_key_withheld: { type: "boolean", const: true, description: "Present in a replayed answer" },
              account_id: int(),
              owner_address: address,
              master_key_address: address,
              mode: mode,
              name: str(),
              description: str(),
              tx_hash: txHash,
            },
            ["api_key_withheld"],
          ),
          errors: [...WRITE_ERRORS, "rate_limited"],
        }),
      },
      "/core/v1/account": {
        get: op({
          summary: "Account info, mode (api | chain_secured) and pending owner",
          ok: out(
            {
              account_id: int(),
              name: str(),
              description: str(),
              email: nullable(str("Only for the account key")),
              mode,
              owner_address: address,
              pending_owner: nullable(address),
              master_key_address: nullable(address),
              group_count: int(),
              pkp_count: int(),
              usage_key_count: int(),
              caller: out({ kind: { type: "string", enum: ["account", "usage"] }, id: address }),
            },
            ["email"],
          ),
          errors: [],
        }),
      },
      "/core/v1/account/transfer_ownership": {
        post: op({
          summary: "Propose a new owner (account key, API mode)",
          body: obj({ new_owner: address }, ["new_owner"]),
          ok: out({
            account_id: int(),
            owner_address: address,
            pending_owner: address,
            tx_hash: txHash,
            next_step: str(),
          }),
          errors: [...WRITE_ERRORS, "owner_only", "invalid_address", "address_in_use"],
        }),
      },
      "/core/v1/account/cancel_ownership_transfer": {
        post: op({
          summary: "Withdraw a pending transfer (account key, API mode)",
          ok: out({ account_id: int(), pending_owner: { type: "null" }, tx_hash: txHash }),
          errors: [...WRITE_ERRORS, "owner_only", "no_pending_transfer"],
        }),
      },
      "/core/v1/add_usage_api_key": {
        post: op({
          summary: "Create a usage key (value returned once as usage_api_key)",
          status: 201,
          body: keyCreate,
          ok: out(
            {
              usage_api_key: {
                oneOf: [str("The key (shown once)"), out({ sealed: str() }), { type: "null" }],
              },
              usage_api_key_withheld: { type: "boolean", const: true },
              ...usageKeyFields,
              tx_hash: txHash,
            },
            ["usage_api_key_withheld"],
          ),
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
          summary:
            "List usage keys (never their values); include=all also lists expired and revoked keys, each with its state",
          params: [
            ...pagingParams,
            {
              name: "include",
              in: "query",
              schema: { type: "string", enum: ["live", "all"], default: "live" },
            },
          ],
          ok: page(usageKeyItem),
          errors: ["owner_only", "invalid_pagination", "invalid_request"],
        }),
      },
      "/core/v1/update_usage_api_key": {
        post: op({
          summary: "Replace all permissions (fields left out reset to default)",
          body: obj({ ...keyTarget, name: str(), description: str(), expiration, ...permissionFields }),
          ok: keyAnswer,
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
          ok: keyAnswer,
          errors: [...WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
        }),
      },
      "/core/v1/remove_usage_api_key": {
        post: op({
          summary: "Remove a usage key (refused from the next request on)",
          body: obj(keyTarget),
          ok: out({ id: address, removed: { type: "boolean", const: true }, tx_hash: txHash }),
          errors: [...WRITE_ERRORS, "owner_only", "usage_key_not_found", "invalid_usage_api_key"],
        }),
      },
      "/core/v1/rotate_usage_api_key": {
        post: op({
          summary:
            "Replace a usage key: a new key with the same scopes, name, description and spend cap (value returned once); the old one expires after overlap_seconds",
          status: 201,
          body: obj(
            {
              ...keyTarget,
              overlap_seconds: {
                type: "integer",
                minimum: 0,
                maximum: 2592000,
                description: "Seconds the old key keeps working after the rotation lands (0 = stops at once)",
              },
              expiration,
            },
            ["overlap_seconds"],
          ),
          ok: out(
            {
              usage_api_key: {
                oneOf: [str("The new key (shown once)"), out({ sealed: str() }), { type: "null" }],
              },
              usage_api_key_withheld: { type: "boolean", const: true },
              ...usageKeyFields,
              previous_key: out({
                id: address,
                expiration: int("Unix seconds (chain time) from which the old key is refused"),
              }),
              tx_hash: txHash,
            },
            ["usage_api_key_withheld"],
          ),
          errors: [
            ...WRITE_ERRORS,
            "owner_only",
            "usage_key_not_found",
            "usage_key_expired",
            "invalid_usage_api_key",
            "invalid_address",
            "expiration_in_past",
            "overlap_too_long",
            "rotation_scopes_changed",
            "address_in_use",
          ],
        }),
      },
      "/core/v1/pkps/create": {
        post: op({
          summary: "Create a PKP (pkp:create)",
          status: 201,
          body: obj({ name: str(), description: str() }),
          ok: out({ ...pkpFields, tx_hash: txHash }),
          errors: [...WRITE_ERRORS, "missing_scope"],
        }),
      },
      "/core/v1/pkps": {
        get: op({
          summary: "List the account's PKPs",
          params: pagingParams,
          ok: page(out(pkpFields)),
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
          ok: out({ ...groupFields, tx_hash: txHash }),
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
            out({ group_id: int(), name: str(), description: str(), pkp_count: int(), action_count: int() }),
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
          ok: out({ group_id: int(), deleted: { type: "boolean", const: true }, tx_hash: txHash }),
          errors: [...WRITE_ERRORS, "missing_scope", "invalid_group_id", "group_not_found"],
        }),
      },
      "/core/v1/groups/{id}/actions": {
        post: op({
          summary: "Add and remove action CIDs (group:manageActions)",
          params: [idParam("id", int())],
          body: obj({ add: arr(str("CID")), remove: arr(str("CID")) }),
          ok: membersAnswer,
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
          ok: membersAnswer,
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
          ok: out({
            cid: str(),
            bytes: int(),
            charged_cents: int(),
            used_bytes: int(),
            quota_bytes: int(),
          }),
          errors: [
            ...BODY_ERRORS,
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
          ok: out({ cid: str() }),
          errors: [...BODY_ERRORS, "invalid_request", "code_too_large"],
        }),
      },
      "/core/v1/actions/pinned": {
        get: op({
          summary: "The account's pinned actions, newest first (account key, or a usage key that may pin)",
          params: pagingParams,
          ok: page(
            out({
              cid: str(),
              bytes: int(),
              pinned_at: str("When the account first pinned this CID (ISO 8601, UTC)"),
            }),
          ),
          errors: ["invalid_pagination", "not_authorized_to_pin"],
        }),
      },
      "/core/v1/actions/{cid}": {
        get: op({
          summary: "The code of a CID (a CID fetched from IPFS is pinned for the account)",
          params: [idParam("cid", str())],
          ok: out({ cid: str(), code: str() }),
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
          summary: "Execute an action (some group the key may execute in lists the CID and the PKP)",
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
          ok: ref("ExecutionResult"),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "unknown_field",
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
            "insufficient_credits",
            "spend_cap_reached",
          ],
        }),
      },
      "/core/v1/forward/prepare": {
        post: op({
          summary:
            "A forward request for a registry call, ready for a usage key to sign (nonce, gas from a simulation, deadline, EIP-712 domain)",
          body: obj({ data: str("Registry calldata (0x hex)") }, ["data"]),
          ok: out({
            operation: str("The registry function called"),
            request: ref("ForwardRequestFields"),
            domain: out({ name: str(), version: str(), chain_id: int(), verifying_contract: address }),
            types: out({ ForwardRequest: arr(out({ name: str(), type: str() })) }),
          }),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "unknown_field",
            "forward_call_not_allowed",
            "missing_scope",
            "group_not_found",
            "pkp_not_found",
            "pkp_already_in_group",
            "pkp_not_in_group",
            "action_already_in_group",
            "action_not_in_group",
            "too_many_members",
            "too_many_groups",
            "write_reverted",
          ],
        }),
      },
      "/core/v1/forward": {
        post: op({
          summary:
            "Submit a forward request the usage key signed itself (no key sent: the signature is the credential)",
          auth: "none",
          body: obj(
            {
              ...forwardRequestFields,
              signature: str("EIP-712 signature, 0x + 65 bytes"),
            },
            ["from", "to", "value", "gas", "nonce", "deadline", "data", "signature"],
          ),
          ok: out({
            tx_hash: txHash,
            block_number: int(),
            operation: str(),
            pkp_id: nullable(pkpId),
            group_id: nullable(int()),
          }),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "unknown_field",
            "forward_call_not_allowed",
            "forward_request_expired",
            "forward_signature_invalid",
            "unknown_api_key",
            "api_key_expired",
            "rate_limited",
            "forward_nonce_mismatch",
            "missing_scope",
            "group_not_found",
            "pkp_not_found",
            "pkp_already_in_group",
            "pkp_not_in_group",
            "action_already_in_group",
            "action_not_in_group",
            "too_many_members",
            "too_many_groups",
            "write_reverted",
            "chain_unavailable",
            "gas_wallet_unfunded",
            "insufficient_credits",
            "spend_cap_reached",
          ],
        }),
      },
      "/core/v1/billing/stripe_config": {
        get: op({
          summary: "The payment processor's publishable key (null with the simulated processor) and its kind",
          auth: "none",
          ok: out({
            publishable_key: nullable(str()),
            mode: { type: "string", enum: ["stripe", "simulated"] },
          }),
          errors: [],
        }),
      },
      "/core/v1/billing/packages": {
        get: op({
          summary: "Credit packages (1 credit = 1 cent), the minimum payment and the prices",
          auth: "none",
          ok: out({
            items: arr(
              out({ id: str(), name: str(), amount_cents: int(), credits: int(), price_display: str() }),
            ),
            minimum_payment_cents: int(),
            prices: out({
              write_cents: int(),
              execution_cents_per_second: int(),
              pin_cents_per_100kb: int(),
              read_cents: int(),
            }),
          }),
          errors: [],
        }),
      },
      "/core/v1/billing/create_payment_intent": {
        post: op({
          summary: "Start a payment of amount_cents (at least 500): card or crypto, confirmed on the client",
          body: obj({ amount_cents: int() }, ["amount_cents"]),
          ok: out({
            client_secret: nullable(str()),
            payment_intent_id: str(),
            amount_cents: int(),
            status: str("The processor's PaymentIntent status"),
          }),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "owner_only",
            "amount_below_minimum",
            "amount_above_maximum",
            "payment_processor_unavailable",
            "payment_processor_error",
          ],
        }),
      },
      "/core/v1/billing/confirm_payment": {
        post: alsoAnswers(
          op({
            summary: "Credit a settled payment exactly once (200), or say it is still processing (202)",
            body: obj({ payment_intent_id: str() }, ["payment_intent_id"]),
            ok: ref("ConfirmPayment"),
            errors: [
              ...BODY_ERRORS,
              "invalid_request",
              "owner_only",
              "payment_intent_not_found",
              "payment_failed",
              "payment_canceled",
              "payment_not_completed",
              "payment_processor_unavailable",
              "payment_processor_error",
            ],
          }),
          // A crypto payment still settling on chain: nothing credited yet, confirm again later.
          202,
          "processing",
          ref("ConfirmPayment"),
        ),
      },
      "/core/v1/billing/cancel_payment": {
        post: op({
          summary: "Abandon an unpaid payment intent",
          body: obj({ payment_intent_id: str() }, ["payment_intent_id"]),
          ok: out({ payment_intent_id: str(), status: str() }),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "owner_only",
            "payment_intent_not_found",
            "payment_not_cancelable",
            "payment_processor_unavailable",
            "payment_processor_error",
          ],
        }),
      },
      "/core/v1/billing/history": {
        get: op({
          summary: "The account's ledger entries, newest first",
          params: pagingParams,
          ok: page(
            out({
              id: int(),
              type: { type: "string", enum: ["credit", "debit"] },
              amount_cents: int(),
              balance_after_cents: int(),
              operation: str(),
              reference: str(),
              key_address: nullable(str()),
              action_cid: nullable(
                str(
                  "The action an execution charge paid for (inline code: the CID computed for it); null for other entries",
                ),
              ),
              created_at: int("Unix seconds"),
            }),
          ),
          errors: ["invalid_request", "invalid_pagination", "owner_only"],
        }),
      },
      "/core/v1/billing/webhook": {
        post: op({
          summary: "Stripe's webhook (signed with Stripe-Signature over the raw body)",
          auth: "none",
          body: { type: "object" },
          ok: out({ received: bool(), event_id: str(), outcome: str() }),
          errors: [...BODY_ERRORS, "invalid_webhook_signature", "webhook_not_configured"],
        }),
      },
      "/core/v1/billing/simulated/intents/{id}/{action}": {
        post: op({
          summary:
            "Simulated processor only (dev): move a payment intent as a card or wallet would (succeed, fail, process, cancel)",
          params: [
            idParam("id", str()),
            idParam("action", { type: "string", enum: ["succeed", "fail", "process", "cancel"] }),
          ],
          ok: out({ payment_intent_id: str(), status: str(), last_error: nullable(str()) }),
          errors: [
            "owner_only",
            "invalid_simulated_action",
            "payment_intent_not_found",
            "invalid_simulated_transition",
          ],
        }),
      },
      "/core/v1/billing/balance": {
        get: op({
          summary: "The account's credit balance (billing enabled; account key)",
          ok: out({
            balance_cents: int(),
            balance_display: str(),
            reserved_cents: int(
              "Held by runs in flight (each reserves its time limit's price until it ends); balance_cents − reserved_cents can be spent",
            ),
          }),
          errors: ["owner_only"],
        }),
      },
      "/core/v1/webhooks": {
        post: op({
          summary: "Register a webhook endpoint (account key); the answer holds its signing secret, once",
          auth: "account",
          status: 201,
          body: obj({ url: str("https:// URL"), event_types: eventTypes, description: str() }, [
            "url",
            "event_types",
          ]),
          ok: out({ ...webhookFields, secret: webhookSecret }),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "unknown_field",
            "string_too_long",
            "owner_only",
            "webhook_url_invalid",
            "webhook_url_refused",
            "invalid_event_type",
            "too_many_webhooks",
          ],
        }),
        get: op({
          summary: "List the account's webhook endpoints",
          auth: "account",
          params: pagingParams,
          ok: page(ref("WebhookEndpoint")),
          errors: ["owner_only", "invalid_pagination"],
        }),
      },
      "/core/v1/webhooks/{id}": {
        get: op({
          summary: "A webhook endpoint",
          auth: "account",
          params: [webhookId],
          ok: ref("WebhookEndpoint"),
          errors: ["owner_only", "webhook_not_found"],
        }),
        post: op({
          summary: "Update a webhook endpoint (url, event_types, description, enabled)",
          auth: "account",
          params: [webhookId],
          body: obj({ url: str(), event_types: eventTypes, description: str(), enabled: bool() }),
          ok: ref("WebhookEndpoint"),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "unknown_field",
            "string_too_long",
            "owner_only",
            "webhook_not_found",
            "webhook_url_invalid",
            "webhook_url_refused",
            "invalid_event_type",
          ],
        }),
        delete: op({
          summary: "Delete a webhook endpoint and its delivery log",
          auth: "account",
          params: [webhookId],
          ok: out({ id: str(), deleted: { type: "boolean", const: true } }),
          // A DELETE may carry a body too: the guard and the body parser judge it like any other.
          errors: [
            "owner_only",
            "webhook_not_found",
            "invalid_json",
            "payload_too_large",
            "unsupported_media_type",
          ],
        }),
      },
      "/core/v1/webhooks/{id}/rotate_secret": {
        post: op({
          summary:
            "A new signing secret, returned once; the previous one keeps signing for expire_previous_in_seconds (default 86400, 0 = stop now)",
          auth: "account",
          params: [webhookId],
          body: obj({ expire_previous_in_seconds: { type: "integer", minimum: 0, maximum: 604800 } }),
          ok: out({
            id: str(),
            secret: webhookSecret,
            previous_secret_expires_at: nullable(int("Unix seconds")),
          }),
          errors: [...BODY_ERRORS, "invalid_request", "unknown_field", "owner_only", "webhook_not_found"],
        }),
      },
      "/core/v1/webhooks/{id}/deliveries": {
        get: op({
          summary: "The endpoint's deliveries, newest first",
          auth: "account",
          params: [webhookId, ...pagingParams],
          ok: page(deliveryItem),
          errors: ["owner_only", "invalid_pagination", "webhook_not_found"],
        }),
      },
      "/core/v1/webhooks/{id}/deliveries/{delivery}/resend": {
        post: op({
          summary: "Send a delivery again as soon as possible (same event id, same body)",
          auth: "account",
          status: 202,
          params: [webhookId, idParam("delivery", { type: "string" })],
          ok: deliveryItem,
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "unknown_field",
            "owner_only",
            "webhook_not_found",
            "webhook_delivery_not_found",
            "webhook_disabled",
            "webhook_delivery_in_progress",
          ],
        }),
      },
      "/core/v1/audit": {
        get: op({
          summary:
            "The account's audit log, newest first (account key; docs/audit-log.md): filters and a cursor",
          auth: "account",
          params: AUDIT_QUERY,
          ok: out({
            items: arr(auditEntry),
            next_cursor: nullable(str("Pass as `cursor` for the next (older) page; null on the last")),
          }),
          errors: ["owner_only", "invalid_request"],
        }),
      },
      "/core/v1/audit/export": {
        get: jsonLines(
          op({
            summary:
              "The verifiable export (JSON Lines: a header, the entries, the signed checkpoints); check it offline with the SDK's verifyAuditExport or `sigil audit verify`",
            auth: "account",
            params: AUDIT_QUERY.filter((p) => p.name === "from" || p.name === "to"),
            ok: str(),
            errors: ["owner_only", "invalid_request"],
          }),
        ),
      },
      "/core/v1/config": {
        get: op({
          summary: "Chain id, contract addresses, limits, prices",
          auth: "none",
          ok: out({
            chain_id: int(),
            registry_address: address,
            forwarder_address: address,
            deploy_block: int(),
            limits: out({
              inline_code_bytes: int(),
              ipfs_code_bytes: int(),
              js_params_bytes: int(),
              max_body_bytes: int(),
              max_page_size: int(),
              max_name_bytes: int(),
              max_array_entries: int(),
              poll_interval_ms: int(),
            }),
            rate_limits: out({
              per_key_per_minute: int(),
              per_account_per_minute: int(),
              new_account_per_ip_per_hour: int(),
              concurrent_executions_per_account: int(),
              per_ip_per_minute: int(),
            }),
            prices: nullable(
              out({
                write_cents: int(),
                execution_cents_per_second: int(),
                pin_cents_per_100kb: int(),
                minimum_payment_cents: int(),
              }),
            ),
            billing_enabled: bool(),
          }),
          errors: [],
        }),
      },
      "/core/v1/attestation": {
        get: op({
          summary:
            "What this deployment runs and which key speaks for it, signed by that key (docs/enclave.md, Attestation)",
          auth: "none",
          params: [
            {
              name: "nonce",
              in: "query",
              required: false,
              schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
              description: "Echoed in the signed document (freshness)",
            },
          ],
          ok: out(
            {
              format: { type: "string", const: "sigil-attestation/v1" },
              tee: { type: "string", enum: ["none", "tdx", "nitro"] },
              measurement: { type: "string", pattern: "^0x[0-9a-f]{64}$" },
              identity: out({ address, public_key: { type: "string", pattern: "^0x04[0-9a-f]{128}$" } }),
              chain_id: int(),
              registry_address: address,
              forwarder_address: address,
              service_version: str(),
              timestamp: int("Unix seconds"),
              nonce: nullable(str()),
              quote: nullable({
                type: "string",
                pattern: "^0x([0-9a-f]{2})+$",
                description:
                  'tee "tdx": the TD quote (hex) whose report data is SHA-512 of the other fields but quote, event_log and signature; null with tee "none"',
              }),
              event_log: str(
                "tee \"tdx\" only: the CVM's event log (JSON text), which replays to the quote's RTMRs",
              ),
              compose_hash: {
                type: "string",
                pattern: "^0x[0-9a-f]{64}$",
                description: 'tee "tdx" only: SHA-256 of the dstack app-compose.json this CVM runs',
              },
              app_id: str('tee "tdx" only: the dstack app id the KMS derives the root key for'),
              signature: { type: "string", pattern: "^0x[0-9a-f]{130}$" },
            },
            ["event_log", "compose_hash", "app_id"],
          ),
          errors: ["invalid_request"],
        }),
      },
      "/core/v1/auth/siwe": {
        post: op({
          summary:
            "Sign in with Ethereum (EIP-4361) as the EOA owner of a ChainSecured account: checks the message (domain = one of this service's public URLs, never the Host header; chain, expiry within an hour, a session-key resource) and spends its nonce. Later requests are signed by that session key and carry Sigil-Siwe (base64 of the message) and Sigil-Siwe-Signature; they may only read.",
          auth: "none",
          body: {
            type: "object",
            additionalProperties: false,
            required: ["message", "signature"],
            properties: {
              message: str("The EIP-4361 message the owner's wallet signed (personal_sign)"),
              signature: str("The wallet's 65-byte signature, 0x hex"),
            },
          },
          ok: out({
            account_id: int(),
            owner_address: address,
            mode: str(),
            session_key: address,
            expires_at: int(),
            access: { type: "string", enum: ["read"] },
          }),
          errors: [
            ...BODY_ERRORS,
            "invalid_request",
            "unknown_field",
            "string_too_long",
            "siwe_invalid",
            "siwe_wrong_domain",
            "siwe_wrong_chain",
            "siwe_expired",
            "siwe_not_owner",
            "siwe_owner_is_contract",
            "siwe_nonce_replayed",
            "rate_limited",
            "chain_unavailable",
          ],
        }),
      },
      "/core/v1/auth/siwe/sign_out": {
        post: op({
          summary:
            "Ends the wallet session that signs this request (signed by its session key, with Sigil-Siwe and Sigil-Siwe-Signature): every instance refuses it from then on (siwe_session_revoked), until it would have expired. status: signed_out, already_signed_out (a second sign-out) or expired (nothing left to end). The body is empty or {}.",
          body: { type: "object", additionalProperties: false, properties: {} },
          ok: out({
            status: { type: "string", enum: ["signed_out", "already_signed_out", "expired"] },
            account_id: int(),
            session_key: address,
            expires_at: int("Unix seconds: when the session would have expired"),
          }),
          errors: [...BODY_ERRORS, "invalid_request", "unknown_field", "database_unavailable"],
        }),
      },
      "/core/v1/openapi.json": {
        get: op({ summary: "This document", auth: "none", ok: { type: "object" }, errors: [] }),
      },
      "/health": {
        get: alsoAnswers(
          op({
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
            ok: ref("Health"),
            errors: ["invalid_operator_token"],
          }),
          // Degraded is 503 with the same document (load balancers read the status alone).
          503,
          "degraded",
          ref("Health"),
        ),
      },
      "/metrics": {
        get: {
          summary:
            "Prometheus metrics. Gas wallets by index; with the operator token, also sigil_gas_wallet_info{wallet, address}",
          security: [],
          parameters: [
            {
              name: "X-Operator-Token",
              in: "header",
              required: false,
              schema: { type: "string" },
              description:
                "The operator token (SIGIL_OPERATOR_TOKEN; or Authorization: Bearer <token>): adds the gas wallet addresses",
            },
          ],
          responses: {
            "200": { description: "text/plain exposition format" },
            "400": {
              description:
                "json_too_deep, header_too_long, invalid_query (the HTTP guard answers before any route)",
              content: { "application/json": { schema: ref("Error") } },
            },
            "401": {
              description: "invalid_operator_token",
              content: { "application/json": { schema: ref("Error") } },
            },
          },
        },
      },
    },
    components: {
      securitySchemes: {
        apiKey: { type: "apiKey", in: "header", name: "X-Api-Key" },
        bearer: { type: "http", scheme: "bearer" },
        signedRequest: {
          type: "apiKey",
          in: "header",
          name: "Sigil-Signature",
          description:
            "A usage key that is never sent: Sigil-Key, Sigil-Timestamp, Sigil-Nonce, Sigil-Content-Sha256 and Sigil-Signature (EIP-191 over SIGIL-REQUEST-V1, chain id, registry, method, path and query, body SHA-256, timestamp, nonce; docs/api.md, Signed requests). The owner of a ChainSecured account signed in with a wallet signs the same way with a session key, adding Sigil-Siwe and Sigil-Siwe-Signature (POST /core/v1/auth/siwe); such requests may only read.",
        },
      },
      schemas: {
        Error: obj(
          {
            error: obj(
              {
                code: { type: "string", enum: Object.keys(ALL_ERRORS) },
                message: str(),
                details: { type: "object" },
                fix: str("How to fix it (docs/errors.md's fix for this code)"),
                docs_url: str("Where the code is explained: its entry in docs/errors.md"),
              },
              ["code", "message", "docs_url"],
            ),
            request_id: str(),
          },
          ["error", "request_id"],
        ),
        Pkp: out({ ...pkpFields, account_id: int() }),
        Group: out(groupFields),
        WebhookEndpoint: out(webhookFields),
        ForwardRequestFields: out(forwardRequestFields),
        ConfirmPayment: out({
          payment_intent_id: str(),
          status: { type: "string", enum: ["succeeded", "processing"] },
          credited_cents: int(),
          newly_credited: bool(),
          balance_cents: int(),
          balance_display: str(),
        }),
        ExecutionResult: out(
          {
            response: { description: "What the action's main returned (any JSON value)" },
            logs: str("console output of the run"),
            has_error: bool(),
            error: out({ code: str(), message: str() }),
            cid: str(),
            execution_ms: { type: "number" },
            charged_cents: int(),
            signatures: {
              type: "object",
              description: "Named signatures of the older signEcdsa API (only when an action made some)",
            },
          },
          ["error", "signatures"],
        ),
        Health: out(
          {
            status: { type: "string", enum: ["ok", "degraded"] },
            last_processed_block: int(
              "The last block whose registry events this service has applied: a path-B change in block N is honoured once this is >= N",
            ),
            chain: out({
              reachable: bool(),
              chain_id: int(),
              head_block: nullable(int()),
              error: nullable(str()),
            }),
            cache: out({
              last_processed_block: int(),
              lag_blocks: nullable(int()),
              last_poll_ok_ms_ago: nullable(int()),
              loaded_accounts: int(),
            }),
            executor: out({ poolSize: int(), alive: int(), busy: int(), queued: int(), restarts: int() }),
            gas_wallets: arr(address),
            gas_wallet_balances: out({
              low_balance_threshold_wei: nullable(str("Wei, decimal; null before the first reading")),
              wallets: arr(
                out({
                  address,
                  balance_wei: nullable(
                    str("Wei, decimal, at the last periodic reading; null before the first"),
                  ),
                  low: bool(),
                  unfunded: bool(),
                }),
              ),
            }),
            degraded_reasons: arr({
              type: "string",
              enum: ["chain_unreachable", "executor_down", "gas_wallets_low"],
            }),
          },
          // Anyone sees only `status`; the rest is the operator's view (X-Operator-Token).
          ["chain", "cache", "executor", "gas_wallets", "gas_wallet_balances", "degraded_reasons"],
        ),
      },
    },
    "x-sigil": {
      chain_id: ctx.chainId,
      registry_address: ctx.cfg.registryAddress,
      forwarder_address: ctx.cfg.forwarderAddress,
    },
  };
}
