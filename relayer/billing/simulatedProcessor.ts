import { type DataLayer, type Sql, prepare } from "../db";
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

const Q = {
  seen: prepare("sim.seen", (db, a) =>
    db
      .selectFrom("sim_idempotency")
      .select(["request_hash", "intent_id"])
      .where("idempotency_key", "=", a(0)),
  ),
  insertIntent: prepare("sim.insertIntent", (db, a) =>
    db.insertInto("sim_intents").values({
      id: a(0),
      client_secret: a(1),
      amount_cents: a(2),
      currency: a(3),
      status: "requires_payment_method",
      metadata: a(4),
      last_error: null,
      created_at: a(5),
    }),
  ),
  insertKey: prepare("sim.insertKey", (db, a) =>
    db.insertInto("sim_idempotency").values({ idempotency_key: a(0), request_hash: a(1), intent_id: a(2) }),
  ),
  setStatus: prepare("sim.setStatus", (db, a) =>
    db
      .updateTable("sim_intents")
      .set({ status: a(0), last_error: a(1) })
      .where("id", "=", a(2)),
  ),
  read: prepare("sim.read", (db, a) => db.selectFrom("sim_intents").selectAll().where("id", "=", a(0))),
  /** Locks the intent's row on PostgreSQL, so two instances moving one intent on take turns. */
  readForUpdate: prepare("sim.readForUpdate", (db, a) =>
    db.selectFrom("sim_intents").selectAll().where("id", "=", a(0)).forUpdate(),
  ),
};

/**
 * A local stand-in for Stripe's test mode, for the embedded default and development: intents are
 * created with the same shape and lifecycle, and a developer moves them on (succeed, leave
 * processing, fail, cancel) through the dev-only endpoint POST /core/v1/billing/simulated/intents/:id/:action,
 * which exists only while this processor is active. No money moves. Its intents live in the billing
 * database (tables sim_intents, sim_idempotency), so they survive restarts and every instance sees them.
 */
export class SimulatedProcessor implements PaymentProcessor {
  readonly kind = "simulated" as const;
  private db: DataLayer | null = null;

  publishableKey(): string {
    return "pk_sim_local_not_a_real_key";
  }

  attach(db: DataLayer): void {
    this.db = db;
  }

  async createIntent(req: CreateIntentRequest): Promise<ProcessorIntent> {
    const db = this.requireDb();
    const requestHash = createHash("sha256")
      .update(JSON.stringify([req.amountCents, req.currency, req.metadata]))
      .digest("hex");
    return db.transaction(async (tx): Promise<ProcessorIntent> => {
      // Same semantics as Stripe's Idempotency-Key: a replay returns the first result, a reuse
      // with different parameters is refused.
      const seen = await tx.first(Q.seen, [req.idempotencyKey]);
      if (seen) {
        if (seen.request_hash !== requestHash) {
          throw new ProcessorError(
            "rejected",
            "idempotency key reused with different parameters",
            "idempotency_key_in_use",
          );
        }
        return (await this.read(tx, seen.intent_id))!;
      }
      const id = "pi_sim_" + randomBytes(12).toString("hex");
      const secret = id + "_secret_" + randomBytes(12).toString("hex");
      await tx.run(Q.insertIntent, [
        id,
        secret,
        req.amountCents,
        req.currency,
        JSON.stringify(req.metadata),
        Date.now(),
      ]);
      await tx.run(Q.insertKey, [req.idempotencyKey, requestHash, id]);
      return (await this.read(tx, id))!;
    });
  }

  async retrieveIntent(id: string): Promise<ProcessorIntent | null> {
    return this.read(this.requireDb(), id);
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
  async transition(id: string, action: SimulatedAction): Promise<ProcessorIntent> {
    return this.requireDb().transaction(async (tx): Promise<ProcessorIntent> => {
      const row = await this.read(tx, id, true);
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
      await tx.run(Q.setStatus, [status, lastError, id]);
      return (await this.read(tx, id))!;
    });
  }

  private async read(db: Sql, id: string, forUpdate = false): Promise<ProcessorIntent | null> {
    const r = (await db.first(forUpdate && db.kind === "postgres" ? Q.readForUpdate : Q.read, [id])) as
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

  private requireDb(): DataLayer {
    if (!this.db) throw new Error("SimulatedProcessor used before createBilling attached its database");
    return this.db;
  }
}
