import type { Database } from "better-sqlite3";
import { createHash, randomBytes } from "node:crypto";
import {
  type CreateIntentRequest,
  type IntentStatus,
  type PaymentProcessor,
  type ProcessorEvent,
  type ProcessorIntent,
  ProcessorError,
} from "./processor";

export type SimulatedAction = "succeed" | "fail" | "process" | "cancel";

/** Which statuses each dev-only action may start from, mirroring what Stripe allows. */
const ALLOWED_FROM: Record<SimulatedAction, readonly IntentStatus[]> = {
  succeed: ["requires_payment_method", "processing"],
  process: ["requires_payment_method"],
  fail: ["requires_payment_method", "processing"],
  cancel: ["requires_payment_method", "processing"],
};

interface SimRow {
  id: string;
  client_secret: string;
  amount_cents: number;
  currency: string;
  status: IntentStatus;
  metadata: string;
  last_error: string | null;
}

/**
 * A local stand-in for Stripe's test mode, for the embedded default and development: intents are
 * created with the same shape and lifecycle, and a developer moves them on (succeed, leave
 * processing, fail, cancel) through the dev-only endpoint POST /core/v1/billing/simulated/intents/:id/:action,
 * which exists only while this processor is active. No money moves. Its intents live in the billing
 * SQLite file (tables sim_intents, sim_idempotency), so they survive restarts.
 */
export class SimulatedProcessor implements PaymentProcessor {
  readonly kind = "simulated" as const;
  private db: Database | null = null;

  publishableKey(): string {
    return "pk_sim_local_not_a_real_key";
  }

  attach(db: Database): void {
    this.db = db;
  }

  async createIntent(req: CreateIntentRequest): Promise<ProcessorIntent> {
    const db = this.requireDb();
    const requestHash = createHash("sha256")
      .update(JSON.stringify([req.amountCents, req.currency, req.metadata]))
      .digest("hex");
    const create = db.transaction((): ProcessorIntent => {
      // Same semantics as Stripe's Idempotency-Key: a replay returns the first result, a reuse
      // with different parameters is refused.
      const seen = db
        .prepare("SELECT request_hash, intent_id FROM sim_idempotency WHERE idempotency_key = ?")
        .get(req.idempotencyKey) as { request_hash: string; intent_id: string } | undefined;
      if (seen) {
        if (seen.request_hash !== requestHash) {
          throw new ProcessorError(
            "rejected",
            "idempotency key reused with different parameters",
            "idempotency_key_in_use",
          );
        }
        return this.read(seen.intent_id)!;
      }
      const id = "pi_sim_" + randomBytes(12).toString("hex");
      const secret = id + "_secret_" + randomBytes(12).toString("hex");
      db.prepare(
        "INSERT INTO sim_intents (id, client_secret, amount_cents, currency, status, metadata, last_error, created_at) VALUES (?, ?, ?, ?, 'requires_payment_method', ?, NULL, ?)",
      ).run(id, secret, req.amountCents, req.currency, JSON.stringify(req.metadata), Date.now());
      db.prepare(
        "INSERT INTO sim_idempotency (idempotency_key, request_hash, intent_id) VALUES (?, ?, ?)",
      ).run(req.idempotencyKey, requestHash, id);
      return this.read(id)!;
    });
    return create.immediate();
  }

  async retrieveIntent(id: string): Promise<ProcessorIntent | null> {
    return this.read(id);
  }

  async cancelIntent(id: string): Promise<ProcessorIntent> {
    return this.transition(id, "cancel");
  }

  parseWebhook(): ProcessorEvent {
    // The simulated processor has no remote side to call us back: its dev endpoint applies the
    // state change to billing directly, the way a webhook would.
    throw new ProcessorError("unsupported", "webhooks are not used with the simulated processor");
  }

  /** Moves an intent on, as the customer's bank or the blockchain would. Dev-only. */
  transition(id: string, action: SimulatedAction): ProcessorIntent {
    const db = this.requireDb();
    const run = db.transaction((): ProcessorIntent => {
      const row = this.read(id);
      if (!row) throw new ProcessorError("rejected", `no such payment intent: ${id}`, "resource_missing");
      if (!ALLOWED_FROM[action].includes(row.status)) {
        throw new ProcessorError(
          "unexpected_state",
          `cannot ${action} a payment intent whose status is ${row.status}`,
          "payment_intent_unexpected_state",
        );
      }
      const next: Record<SimulatedAction, [IntentStatus, string | null]> = {
        succeed: ["succeeded", null],
        process: ["processing", null],
        // Like Stripe: a failed attempt returns the intent to requires_payment_method with an error.
        fail: ["requires_payment_method", "Your payment was declined (simulated)."],
        cancel: ["canceled", row.lastError],
      };
      const [status, lastError] = next[action];
      db.prepare("UPDATE sim_intents SET status = ?, last_error = ? WHERE id = ?").run(status, lastError, id);
      return this.read(id)!;
    });
    return run.immediate();
  }

  private read(id: string): ProcessorIntent | null {
    const r = this.requireDb().prepare("SELECT * FROM sim_intents WHERE id = ?").get(id) as
      SimRow | undefined;
    if (!r) return null;
    return {
      id: r.id,
      status: r.status,
      amountCents: r.amount_cents,
      amountReceivedCents: r.status === "succeeded" ? r.amount_cents : 0,
      currency: r.currency,
      clientSecret: r.client_secret,
      metadata: JSON.parse(r.metadata) as Record<string, string>,
      lastError: r.last_error,
    };
  }

  private requireDb(): Database {
    if (!this.db) throw new Error("SimulatedProcessor used before createBilling attached its database");
    return this.db;
  }
}
