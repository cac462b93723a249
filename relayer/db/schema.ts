/**
 * The tables of the data layer, as kysely sees them. One schema for both engines (SQLite and
 * PostgreSQL): times are integers (milliseconds unless a column says otherwise), money is integer
 * cents, booleans are never stored. Created by relayer/db/migrations.ts.
 */
import type { Generated } from "kysely";

export interface Schema {
  schema_version: { version: number };
  ledger_meta: { ledger_id: string };
  accounts: { account_id: string; balance_cents: number; created_at: number };
  ledger_entries: {
    id: Generated<number>;
    account_id: string;
    kind: "credit" | "debit";
    amount_cents: number;
    balance_after_cents: number;
    reference: string;
    key_address: string | null;
    operation: string;
    created_at: number;
  };
  payment_intents: {
    payment_intent_id: string;
    account_id: string;
    amount_cents: number;
    currency: string;
    status: string;
    last_error: string | null;
    /** Unix seconds of the newest observation applied (stale events never roll the status back). */
    status_event_at: number;
    credited_cents: number | null;
    credited_at: number | null;
    created_at: number;
    updated_at: number;
  };
  webhook_events: { event_id: string; type: string; outcome: string; received_at: number };
  key_spend: { key_address: string; account_id: string; spent_cents: number; cap_cents: number | null };
  sim_intents: {
    id: string;
    client_secret: string;
    amount_cents: number;
    currency: string;
    status: string;
    metadata: string;
    last_error: string | null;
    created_at: number;
  };
  sim_idempotency: { idempotency_key: string; request_hash: string; intent_id: string };
  /**
   * Idempotency-Key records. `status` 0 marks a claim: the request is running on some instance
   * (`body` is then empty); a finished 2xx answer replaces it.
   */
  idempotency: {
    scope: string;
    key: string;
    fingerprint: string;
    status: number;
    body: string;
    created_ms: number;
  };
  /** Shared token buckets (PostgreSQL only): one row per (limit, caller). */
  rate_buckets: { bucket: string; tokens: number; updated_ms: number };
  /** Shared per-account concurrency cap (PostgreSQL only): one row per running execution, with a lease. */
  execution_leases: { lease_id: string; account_id: string; expires_ms: number };
  /** Cross-instance write mark (PostgreSQL only): per chain and registry, the newest block a write landed in. */
  write_marks: { scope: string; block: number };
  /** Shared signed-request nonces (PostgreSQL only), until `expires_s` (unix seconds). */
  signed_nonces: { key_address: string; nonce: string; expires_s: number };
}
