/**
 * What the audit log records (docs/audit-log.md, "Entry kinds"): one data shape per kind of event. Every
 * field is public to the account holder and none is a secret: no key value, no action parameter, no
 * response body (only its SHA-256), no request body. The shapes are plain JSON (strings, integers,
 * booleans, null, arrays, objects) so the canonical serialization that the chain hashes is unambiguous.
 */

export type AuditKind = "execution" | "write" | "chain_write" | "refusal" | "billing";

export const AUDIT_KINDS: readonly AuditKind[] = ["execution", "write", "chain_write", "refusal", "billing"];

/** Who acted: an account key, a usage key, an owner's wallet session, or an address seen on chain. */
export interface AuditPrincipal {
  kind: "account_key" | "usage_key" | "wallet_session" | "chain_sender";
  /** The key's address (its public id), the wallet owner's address, or the on-chain sender. */
  address: string;
}

/**
 * One key operation of a run: what it did with which PKP, and what it signed or why it was refused.
 * `rule`, `allowed`, `operation` (its kind), `digest` and `value` are the signing policy's decision as the
 * run reports it; a run without policy decisions reports the signatures it returned.
 */
export interface KeyOperation {
  operation: string;
  allowed: boolean;
  pkp?: string;
  rule?: string;
  digest?: string;
  value?: string;
}

export interface ExecutionData {
  request_id: string;
  principal: AuditPrincipal;
  cid: string;
  /** The PKP the request named, if any. */
  pkp_named: string | null;
  /** Every PKP a key operation of the run was authorized for (sorted, once each). */
  pkps_used: string[];
  key_operations: KeyOperation[];
  /** How many key operations the run made (signatures, encryptions, …), whether listed above or not. */
  key_operation_count: number;
  /** SHA-256 (0x hex) of the canonical JSON of the action's response: proves what was answered, reveals nothing. */
  response_sha256: string;
  has_error: boolean;
  error_code: string | null;
  duration_ms: number;
  charged_cents: number;
  instance: string;
  /** Set when a trigger (not a request) started the run. */
  trigger_id?: string;
}

/** One registry event of a write: its name, where it is in the transaction's receipt, and its arguments. */
export interface WriteEvent {
  name: string;
  log_index: number;
  /** The event's arguments as strings (numbers in decimal): ids, addresses, CID hashes, public on chain. */
  args: Record<string, string>;
}

/** A path-A write: the relayer signed and sent it for the caller (or relayed the caller's signed request). */
export interface WriteData {
  request_id: string;
  principal: AuditPrincipal;
  operation: string;
  tx_hash: string;
  block_number: number;
  events: WriteEvent[];
  charged_cents: number;
  instance: string;
}

/** A path-B write: a transaction the owner (wallet or Safe) sent to the registry itself, seen in its logs. */
export interface ChainWriteData {
  principal: AuditPrincipal;
  operation: string;
  tx_hash: string;
  block_number: number;
  events: WriteEvent[];
}

/**
 * A request refused for its credentials or their scope. `suppressed`: how many further refusals of the
 * account were not written separately because of the per-account rate limit before this one.
 */
export interface RefusalData {
  request_id: string;
  method: string;
  route: string;
  /** The first 10 characters (0x + 8 hex) of keccak256 of the key: enough to tell keys apart, never the key. */
  key_hash_prefix: string | null;
  principal: AuditPrincipal | null;
  code: string;
  suppressed: number;
}

/** A balance event the account holder must be able to account for. */
export interface BillingData {
  event: "credit" | "insufficient_credits" | "spend_cap_reached";
  request_id: string | null;
  principal: AuditPrincipal | null;
  amount_cents: number | null;
  reference: string | null;
}

export type AuditData = ExecutionData | WriteData | ChainWriteData | RefusalData | BillingData;

/** What a recorder hands the log: the kind, its data, and the columns the read endpoint filters on. */
export interface PendingEntry {
  account: string;
  kind: AuditKind;
  timeMs: number;
  data: AuditData;
  /** Filter columns (also inside `data`): the acting key's address, the CID, the PKPs, the outcome. */
  principal: string | null;
  cid: string | null;
  pkps: string[];
  outcome: "ok" | "error" | "refused";
}
