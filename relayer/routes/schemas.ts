/**
 * Schemas several endpoint declarations share (ids, usage keys, PKPs, groups, webhooks, pages) and the
 * error codes every write or body can answer. The OpenAPI document's components live in openapi.ts.
 */
import { SCOPES } from "../../vocabulary/scopes";
import type { ErrorCode } from "../errors";
import { EVENT_TYPES } from "../webhooks/eventTypes";
import type { Schema } from "./endpoint";

export const str = (description?: string): Schema => ({
  type: "string",
  ...(description ? { description } : {}),
});
export const int = (description?: string): Schema => ({
  type: "integer",
  ...(description ? { description } : {}),
});
export const bool = (description?: string): Schema => ({
  type: "boolean",
  ...(description ? { description } : {}),
});
export const arr = (items: Schema, description?: string): Schema => ({
  type: "array",
  items,
  ...(description ? { description } : {}),
});
export const obj = (properties: Record<string, Schema>, required: string[] = []): Schema => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
});
/** A response object: every field is always present unless named in `optional`; nothing else may be. */
export const out = (properties: Record<string, Schema>, optional: string[] = []): Schema =>
  obj(
    properties,
    Object.keys(properties).filter((k) => !optional.includes(k)),
  );
export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
export const nullable = (s: Schema): Schema => ({ oneOf: [s, { type: "null" }] });

export const groupIds = arr(
  { type: "integer", minimum: 0 },
  "Group ids; 0 is the wildcard for every group of the account.",
);
export const pkpId = {
  type: "string",
  pattern: "^0x[0-9a-f]{64}$",
  description: "PKP id: 0x + 64 lower-case hex digits",
};
export const address = {
  type: "string",
  pattern: "^0x[0-9a-fA-F]{40}$",
  description: "EIP-55 checksummed address",
};
/** The seven scopes' fields (request names or listed names), in struct order: vocabulary/scopes.ts. */
export const scopeFields = (name: "field" | "listed"): Record<string, Schema> =>
  Object.fromEntries(SCOPES.map((w) => [w[name], w.perGroup ? groupIds : bool()]));
export const permissionFields: Record<string, Schema> = {
  ...scopeFields("field"),
  spend_cap_cents: nullable({
    type: "integer",
    minimum: 0,
    description: "Per-key spend cap in cents (billing); null or absent = no cap. Update replaces it.",
  }),
};
export const expiration = nullable({ type: "integer", description: "Unix seconds; null = never" });

export const usageKeyFields: Record<string, Schema> = {
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
export const usageKeyItem = out({
  ...usageKeyFields,
  state: { type: "string", enum: ["active", "expired", "revoked"] },
});

export function page(item: Schema): Schema {
  return out({ items: arr(item), page_number: int(), page_size: int(), total: int() });
}
export const pkpFields: Record<string, Schema> = {
  pkp_id: pkpId,
  address,
  public_key: str("Uncompressed secp256k1 public key, 0x04…"),
  solana_address: str("Solana address: base58 of the PKP's Ed25519 public key"),
  taproot_address: str(
    "Bitcoin mainnet Taproot (P2TR, bc1p…) address of the PKP's tweaked key, no script tree",
  ),
  ed25519_public_key: str("Ed25519 public key, 0x + 64 hex"),
  schnorr_public_key: str("BIP-340 x-only public key (untweaked), 0x + 64 hex"),
  name: str(),
  description: str(),
};
export const groupFields: Record<string, Schema> = {
  group_id: int(),
  name: str(),
  description: str(),
  pkps: arr(pkpId),
  actions: arr(str("CID")),
  policy_cid: nullable(str("CID of the group's signing policy (docs/policies.md); null: none")),
};
export const txHash = { type: "string", pattern: "^0x[0-9a-f]{64}$", description: "The path-A transaction" };

export const pagingParams = [
  { name: "page_number", in: "query", schema: { type: "integer", minimum: 0, default: 0 } },
  { name: "page_size", in: "query", schema: { type: "integer", minimum: 1, maximum: 100, default: 20 } },
];
export const idParam = (name: string, schema: Schema) => ({ name, in: "path", required: true, schema });
/** What any POST can be refused for before its route runs (body parser, Idempotency-Key). */
export const BODY_ERRORS: ErrorCode[] = [
  "invalid_json",
  "payload_too_large",
  "unsupported_media_type",
  "invalid_idempotency_key",
  "idempotency_key_reused",
  // A duplicate still waiting for the first request (on any instance sharing the database) after 30 s.
  "idempotency_key_in_flight",
];
export const WRITE_ERRORS: ErrorCode[] = [
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

export const mode = { type: "string", enum: ["api", "chain_secured"] };
/** An ERC-2771 ForwardRequest (uint256 values as decimal strings, so no precision is lost in JSON). */
export const forwardRequestFields: Record<string, Schema> = {
  from: address,
  to: address,
  value: { type: "string", pattern: "^[0-9]+$" },
  gas: { type: "string", pattern: "^[0-9]+$" },
  nonce: { type: "string", pattern: "^[0-9]+$" },
  deadline: int("Unix seconds (uint48)"),
  data: { type: "string", pattern: "^0x([0-9a-fA-F]{2})*$" },
};
/** update_usage_api_key(_metadata): the key as it is now (just its id if the cache has not caught up). */
export const keyAnswer = out(
  { ...usageKeyFields, tx_hash: txHash },
  Object.keys(usageKeyFields).filter((k) => k !== "id"),
);
/** groups/{id}/actions and /pkps: the group as it is now, and one transaction per non-empty list. */
export const membersAnswer = out(
  { ...groupFields, tx_hashes: arr(txHash) },
  Object.keys(groupFields).filter((k) => k !== "group_id"),
);

/** Webhook endpoints (docs/webhooks.md). */
export const eventTypes = arr(
  { type: "string", enum: [...EVENT_TYPES, "*"] },
  'Event types, or ["*"] alone for every type',
);
export const webhookFields: Record<string, Schema> = {
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
export const webhookSecret = {
  type: "string",
  pattern: "^whsec_[A-Za-z0-9_-]{43}$",
  description:
    "The signing secret, shown once (an Idempotency-Key replay shows it again to the same caller only)",
};
export const deliveryItem = out({
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
export const webhookId = idParam("id", { type: "string" });
export const keyCreate = obj({ name: str(), description: str(), expiration, ...permissionFields });
export const keyTarget = { usage_api_key: str("The usage key value (not the account key)"), id: address };
