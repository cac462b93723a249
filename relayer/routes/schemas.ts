/**
 * Schemas several endpoint declarations share (ids, usage keys, PKPs, groups, webhooks, pages) and the
 * error codes every write or body can answer. The OpenAPI document's components live in openapi.ts.
 */
import { SCOPES } from "../../vocabulary/scopes";
import type { ErrorCode } from "../errors";
import { EVENT_TYPES } from "../webhooks/eventTypes";
import type { ObjectOf, Schema, Typed } from "./endpoint";

export type { Typed };

/** What one request may carry (the registry refuses longer names and descriptions too). */
export const BODY_LIMITS = {
  /** Largest inline `code` (design §6.4, docs/background.md). */
  inlineCodeBytes: 256 * 1024,
  /** Largest `js_params`, serialized. */
  jsParamsBytes: 64 * 1024,
  maxNameLength: 256,
  maxDescriptionLength: 1024,
  /** Entries in one scope array, and members added or removed in one call. */
  maxArrayEntries: 64,
} as const;

const described = (description?: string) => (description ? { description } : {});

export const str = (description?: string): Typed<string> => ({ type: "string", ...described(description) });
export const int = (description?: string): Typed<number> => ({ type: "integer", ...described(description) });
export const bool = (description?: string): Typed<boolean> => ({
  type: "boolean",
  ...described(description),
});
export const arr = <I>(items: Typed<I, boolean>, description?: string): Typed<I[]> => ({
  type: "array",
  items,
  ...described(description),
});
export const obj = <P extends Record<string, Schema>, R extends string = never>(
  properties: P,
  required: R[] = [],
): Typed<ObjectOf<P, R>, true> => ({
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

/** A request string of at most `maxBytes` UTF-8 bytes (string_too_long). */
export const bytes = (maxBytes: number, description?: string): Typed<string> => ({
  type: "string",
  "x-sigil-max-bytes": maxBytes,
  ...described(description),
});
/** Request text of at most `maxBytes` UTF-8 bytes, "" when left out. */
export const text = (maxBytes: number, description?: string): Typed<string, true> =>
  withDefault(bytes(maxBytes, description), "");
export const name = text(BODY_LIMITS.maxNameLength);
export const description = text(BODY_LIMITS.maxDescriptionLength);
/** A request flag, false when left out. */
export const flag = (): Typed<boolean, true> => ({ type: "boolean", default: false });
/** A request list of at most `maxItems` (the house's limit unless given), [] when left out. */
export const list = <I>(
  items: Typed<I, boolean>,
  maxItems: number = BODY_LIMITS.maxArrayEntries,
  description?: string,
): Typed<I[], true> => ({ type: "array", items, maxItems, default: [], ...described(description) });
/** A request field that may be left out, with what it is then. */
export function withDefault<V>(s: Typed<V, boolean>, value: V): Typed<V, true> {
  return { ...s, default: value } as Typed<V, true>;
}
/** A body of which exactly one of `fields` must be sent (null counts as not sent). */
export const exactlyOne = <S extends Schema>(fields: string[], body: S): S => ({
  ...body,
  "x-sigil-exactly-one": fields,
});
export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
export const nullable = <V>(s: Typed<V, boolean>): Typed<V | null> => ({ oneOf: [s, { type: "null" }] });

const GROUP_IDS = "Group ids; 0 is the wildcard for every group of the account.";
export const groupIds = arr({ type: "integer", minimum: 0 } as Typed<number>, GROUP_IDS);
/** A scope's groups in a request (invalid_group_id); duplicates are the handler's to drop. */
const groupIdsIn = list(
  { type: "integer", minimum: 0, format: "group-id" } as Typed<number>,
  BODY_LIMITS.maxArrayEntries,
  GROUP_IDS,
);
export const pkpId: Typed<string> = {
  type: "string",
  pattern: "^0x[0-9a-f]{64}$",
  description: "PKP id: 0x + 64 lower-case hex digits",
};
/** A PKP named in a request: its id (any case) or its address, which the handler resolves. */
export const pkpRef: Typed<string> = {
  type: "string",
  pattern: "^0x([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$",
  format: "pkp-ref",
  description: "PKP id (0x + 64 hex digits) or the PKP's address",
};
export const address: Typed<string> = {
  type: "string",
  pattern: "^0x[0-9a-fA-F]{40}$",
  description: "EIP-55 checksummed address",
};
/** An address in a request (checksum checked, zero refused: invalid_address). */
export const addressIn: Typed<string> = { ...address, format: "address" };
/** An IPFS CID in a request (invalid_cid). */
export const cid = (description = "CID"): Typed<string> => ({ type: "string", format: "cid", description });
/** The seven scopes' fields (request names or listed names), in struct order: vocabulary/scopes.ts. */
export const scopeFields = (names: "field" | "listed"): Record<string, Schema> =>
  Object.fromEntries(
    SCOPES.map((w) => [
      w[names],
      names === "listed" ? (w.perGroup ? groupIds : bool()) : w.perGroup ? groupIdsIn : flag(),
    ]),
  );
export const permissionFields: Record<string, Schema> = {
  ...scopeFields("field"),
  spend_cap_cents: withDefault(
    nullable({
      type: "integer",
      minimum: 0,
      description: "Per-key spend cap in cents (billing); null or absent = no cap. Update replaces it.",
    } as Typed<number>),
    null,
  ),
};
export const expiration = nullable({ type: "integer", description: "Unix seconds; null = never" });
/** A new expiration: unix seconds in the future (expiration_in_past), or null / 0 / absent for never. */
export const expirationIn = withDefault(
  nullable({
    type: "integer",
    format: "expiration",
    description: "Unix seconds; null = never",
  } as Typed<number>),
  null,
);

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
/**
 * A new usage key's value, answered once: in clear, sealed under the caller's key on an Idempotency-Key
 * replay, or null with `usage_api_key_withheld` when it cannot be shown again.
 */
export function newUsageKeyFields(description: string): Record<string, Schema> {
  return {
    usage_api_key: { oneOf: [str(description), out({ sealed: str() }), { type: "null" }] },
    usage_api_key_withheld: { type: "boolean", const: true },
  };
}
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
/** Billing's declarations still name it; the operation adds it to any endpoint with a body. */
export { BODY_ERRORS } from "./endpoint";
/** What any write to the registry can be refused for (its body's codes are added from its schema). */
export const WRITE_ERRORS: ErrorCode[] = [
  "chain_unavailable",
  "gas_wallet_unfunded",
  "write_reverted",
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
export const keyCreate = obj({ name, description, expiration: expirationIn, ...permissionFields });
/** The key a request is about: by value or by id, exactly one (`x-sigil-exactly-one` on the body). */
export const keyTarget = {
  usage_api_key: str("The usage key value (not the account key)"),
  id: addressIn,
};
/** A body naming a key by value or by id: exactly one of the two. */
export const targetingKey = <S extends Schema>(body: S): S => exactlyOne(["usage_api_key", "id"], body);
