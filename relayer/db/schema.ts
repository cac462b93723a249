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
    /** The action (its CID) an execution charge paid for; NULL for every other entry (migration 4). */
    action_cid: string | null;
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
    /** Which attempt holds the claim (a random token per attempt); '' in rows from before version 10. */
    owner: string;
    /** When the holder last said it is alive; a claim not refreshed for a lease is taken over. */
    heartbeat_ms: number;
    /** JSON array of the signed forward requests the attempt recorded before sending them; '' for none. */
    writes: string;
  };
  /** Shared token buckets (PostgreSQL only): one row per (limit, caller). */
  rate_buckets: { bucket: string; tokens: number; updated_ms: number };
  /** Shared per-account concurrency cap (PostgreSQL only): one row per running execution, with a lease. */
  execution_leases: { lease_id: string; account_id: string; expires_ms: number };
  /** Outgoing webhooks (relayer/webhooks/): one row per registered endpoint; the secret sealed. */
  webhook_endpoints: {
    endpoint_id: string;
    account_id: string;
    url: string;
    /** JSON array of event types, or ["*"]. */
    event_types: string;
    description: string;
    /** 1 or 0. */
    enabled: number;
    secret_sealed: string;
    previous_secret_sealed: string | null;
    previous_secret_expires_ms: number | null;
    disabled_reason: string | null;
    disabled_ms: number | null;
    created_ms: number;
    updated_ms: number;
  };
  /** Events to deliver, each once (the id is derived from where it came from). `payload` is the exact body sent. */
  webhook_outbox_events: {
    event_id: string;
    account_id: string;
    type: string;
    payload: string;
    created_ms: number;
  };
  webhook_deliveries: {
    delivery_id: string;
    endpoint_id: string;
    event_id: string;
    account_id: string;
    status: "pending" | "succeeded" | "failed";
    attempts: number;
    next_attempt_ms: number;
    first_failure_ms: number | null;
    lease_owner: string | null;
    lease_expires_ms: number;
    last_status: number | null;
    last_error: string | null;
    last_attempt_ms: number | null;
    created_ms: number;
  };
  webhook_cursors: { name: string; position: number };
  webhook_cids: { cid_hash: string; cid: string };
  /** Pinned code per account (relayer/pins.ts): one row per (account, CID), its bytes counted once. */
  pins: { account_id: string; cid: string; bytes: number; created_ms: number };
  /** Cross-instance write mark (PostgreSQL only): per chain and registry, the newest block a write landed in. */
  write_marks: { scope: string; block: number };
  /** Shared signed-request nonces (PostgreSQL only), until `expires_s` (unix seconds). */
  signed_nonces: { key_address: string; nonce: string; expires_s: number };
  /** Spent wallet sign-in nonces (migration 9), until the message's expiry `expires_s` (unix seconds). */
  siwe_nonces: { owner: string; nonce: string; expires_s: number };
  /** Signed-out wallet sessions by session key (migration 9), until the session's expiry (unix seconds). */
  siwe_revocations: { session_key: string; expires_s: number; revoked_ms: number };
  /** The off-chain profile of each account (migration 12): personal data stays off chain. */
  account_profile: { account_id: string; description: string; email: string | null; created_ms: number };
  /**
   * The uses inside each signing-policy window (migration 15; relayer/policyWindows.ts): `uses` is a
   * JSON array of [reservation id, taken at ms, amount as a decimal string] (jsonb on PostgreSQL).
   */
  policy_windows: { window_key: string; uses: unknown; updated_ms: number };
  /** Triggers (migration 16; relayer/triggers/store.ts): JSON text for the specs of one kind. */
  triggers: {
    trigger_id: string;
    account_id: string;
    name: string;
    kind: string;
    enabled: number;
    paused: string | null;
    cid: string;
    pkp_ids: string;
    js_params: string;
    run_as: string;
    schedule: string | null;
    hook_id: string | null;
    hmac: string | null;
    hmac_secret_sealed: string | null;
    chain_event: string | null;
    runs_per_minute: number;
    max_queued_runs: number;
    concurrency: string;
    max_attempts: number;
    backoff_ms: number;
    last_fired_ms: number | null;
    created_ms: number;
    updated_ms: number;
  };
  /** One row per firing of a trigger (migration 16), UNIQUE (trigger_id, firing_id). */
  trigger_runs: {
    run_id: string;
    trigger_id: string;
    account_id: string;
    firing_id: string;
    status: string;
    skip_reason: string | null;
    attempt: number;
    next_attempt_ms: number;
    lease_owner: string | null;
    lease_expires_ms: number | null;
    input: string;
    input_summary: string;
    response: string | null;
    error_code: string | null;
    error_message: string | null;
    logs: string | null;
    charged_cents: number;
    fired_ms: number;
    created_ms: number;
    started_ms: number | null;
    finished_ms: number | null;
    instance: string | null;
  };
  /**
   * How far each chain-event trigger's logs were read (migration 17; relayer/triggers/chainEvents/
   * cursors.ts): the last block handed over, its hash (null when not known), and the spec it was read for.
   */
  trigger_chain_cursors: {
    trigger_id: string;
    chain_id: number;
    spec_key: string;
    block: number;
    block_hash: string | null;
    updated_ms: number;
  };
  /** The bytes of every pinned CID (migration 13), whoever pinned it: what the CID hashes. */
  pinned_code: { cid: string; code: Uint8Array; created_ms: number };
  /**
   * Worst-case prices of executions in flight (migration 11), held against balance and cap until the
   * run's charge replaces the row, or until `expires_ms` (the run's deadline plus slack) if its
   * instance died (relayer/billing/reservations.ts).
   */
  billing_reservations: {
    reservation_id: string;
    account_id: string;
    key_address: string;
    cents: number;
    expires_ms: number;
    created_ms: number;
  };
}
