import { createHash, randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { type DataLayer, prepare, type Sql } from "../db";
import type { Schema } from "../db/schema";
import { ApiError } from "../errors";
import { intentNotFound, stateError, toApiError, validateAmount, validateIntentId } from "./paymentErrors";
import type { Ledger } from "./ledger";
import { formatCents } from "./money";
import {
  type PaymentProcessor,
  type ProcessorEvent,
  type ProcessorIntent,
  ProcessorError,
} from "./processor";

/** Largest single top-up accepted (configurable): $10,000. Stripe's own ceiling is far higher. */
export const DEFAULT_MAXIMUM_PAYMENT_CENTS = 1_000_000;

/**
 * Test-harness crash point (docs/billing.md, "Crash testing"). When the environment variable
 * SIGIL_BILLING_TEST_CRASH_POINT is "before_credit", the process SIGKILLs itself after the processor
 * has reported an intent as succeeded and before the credit transaction: exactly the window that lost
 * credits in the reference system. Only test/billing's child-process harness sets it.
 */
export const CRASH_POINT_ENV = "SIGIL_BILLING_TEST_CRASH_POINT";

/** A payment intent's row as this module reads it (the table is declared in db/schema.ts). */
type IntentRow = Omit<Schema["payment_intents"], "created_at" | "updated_at">;

/** Records an intent the processor made (or one adopted from it); a row already there is kept. */
function insertIntent(sql: Sql, intent: ProcessorIntent, accountId: string, now: number): Promise<number> {
  const { id, amountCents, currency, status, lastError } = intent;
  return sql.run(Q.insert, [id, accountId, amountCents, currency, status, lastError, now, now]);
}

export interface ConfirmResult {
  httpStatus: 200 | 202;
  body: {
    payment_intent_id: string;
    status: "succeeded" | "processing";
    credited_cents: number;
    newly_credited: boolean;
    balance_cents: number;
    balance_display: string;
  };
}

type Outcome =
  | "credited"
  | "already_credited"
  | "status_recorded"
  | "stale"
  | "ignored_foreign"
  | "ignored_type"
  | "duplicate";

/**
 * Top-ups: creating intents, observing their state (confirm_payment, webhooks, reconciliation) and
 * crediting exactly once. Every observation of an intent funnels into `observe`, whose single
 * transaction credits under the UNIQUE ledger reference "pi:<id>", so whichever path sees
 * "succeeded" first credits and every other path is a no-op.
 */
const Q = {
  row: prepare("payments.row", (db, a) =>
    db.selectFrom("payment_intents").selectAll().where("payment_intent_id", "=", a(0)),
  ),
  /** The intent's row, locked until the transaction ends on PostgreSQL (observations of one intent take turns). */
  rowForUpdate: {
    sqlite: prepare("payments.rowForUpdate.sqlite", (db, a) =>
      db.selectFrom("payment_intents").selectAll().where("payment_intent_id", "=", a(0)),
    ),
    postgres: prepare("payments.rowForUpdate.pg", (db, a) =>
      db.selectFrom("payment_intents").selectAll().where("payment_intent_id", "=", a(0)).forUpdate(),
    ),
  },
  insert: prepare("payments.insert", (db, a) =>
    db
      .insertInto("payment_intents")
      .values({
        payment_intent_id: a(0),
        account_id: a(1),
        amount_cents: a(2),
        currency: a(3),
        status: a(4),
        last_error: a(5),
        status_event_at: 0,
        created_at: a(6),
        updated_at: a(7),
      })
      .onConflict((oc) => oc.column("payment_intent_id").doNothing()),
  ),
  setStatus: prepare("payments.setStatus", (db, a) =>
    db
      .updateTable("payment_intents")
      .set({ status: a(0), last_error: a(1), status_event_at: a(2), updated_at: a(3) })
      .where("payment_intent_id", "=", a(4)),
  ),
  markCredited: prepare("payments.markCredited", (db, a) =>
    db
      .updateTable("payment_intents")
      .set({
        status: "succeeded",
        last_error: null,
        credited_cents: a(0),
        credited_at: a(1),
        updated_at: a(2),
      })
      .where("payment_intent_id", "=", a(3)),
  ),
  eventSeen: prepare("payments.eventSeen", (db, a) =>
    db.selectFrom("webhook_events").select("outcome").where("event_id", "=", a(0)),
  ),
  /**
   * Claims a webhook event id: the first transaction to insert it handles the event, a concurrent
   * duplicate (another instance) waits on the unique key and then inserts nothing.
   */
  claimEvent: prepare("payments.claimEvent", (db, a) =>
    db
      .insertInto("webhook_events")
      .values({ event_id: a(0), type: a(1), outcome: a(2), received_at: a(3) })
      .onConflict((oc) => oc.column("event_id").doNothing()),
  ),
  setEventOutcome: prepare("payments.setEventOutcome", (db, a) =>
    db
      .updateTable("webhook_events")
      .set({ outcome: a(0) })
      .where("event_id", "=", a(1)),
  ),
  uncredited: prepare("payments.uncredited", (db, a) =>
    db
      .selectFrom("payment_intents")
      .select(["payment_intent_id", "status"])
      .where("credited_at", "is", null)
      .where("status", "!=", "canceled")
      .where("created_at", ">", a(0))
      .orderBy("created_at", "desc")
      .limit(5000),
  ),
};

export class Payments {
  private readonly crashPoint: string | undefined;

  constructor(
    private readonly db: DataLayer,
    private readonly ledger: Ledger,
    private readonly processor: PaymentProcessor,
    private readonly ledgerId: string,
    private readonly limits: { minimumCents: number; maximumCents: number },
    /** The balance including usage charges not yet committed (Metering's write-behind buffer). */
    private readonly balanceOf: (accountId: string) => Promise<number>,
    private readonly logger?: Logger,
  ) {
    this.crashPoint = process.env[CRASH_POINT_ENV];
  }

  async createIntent(accountId: string, amountCents: unknown, clientIdempotencyKey?: string) {
    validateAmount(amountCents, this.limits);
    const amount = amountCents as number;
    // A client-supplied Idempotency-Key makes retries return the same intent; without one every
    // call is a new intent (harmless: an unpaid intent costs nothing and expires at the processor).
    const idempotencyKey = clientIdempotencyKey
      ? "sigil-create-" +
        createHash("sha256").update(`${this.ledgerId}:${accountId}:${clientIdempotencyKey}`).digest("hex")
      : "sigil-create-" + randomUUID();
    const intent = await this.call(() =>
      this.processor.createIntent({
        amountCents: amount,
        currency: "usd",
        metadata: { account_id: accountId, ledger_id: this.ledgerId },
        idempotencyKey,
      }),
    );
    const now = Date.now();
    await insertIntent(this.db, intent, accountId, now);
    this.logger?.info(
      { account_id: accountId, payment_intent_id: intent.id, amount_cents: amount },
      "payment intent created",
    );
    return {
      client_secret: intent.clientSecret,
      payment_intent_id: intent.id,
      amount_cents: intent.amountCents,
      status: intent.status,
    };
  }

  async confirm(accountId: string, paymentIntentId: unknown): Promise<ConfirmResult> {
    const id = validateIntentId(paymentIntentId);
    const row = await this.row(id);
    if (row && row.account_id !== accountId) throw intentNotFound(id);
    if (row?.credited_at != null) return await this.succeededResult(row, false);

    const intent = await this.call(() => this.processor.retrieveIntent(id));
    // Unknown to us, unknown to the processor, or tagged with another account or ledger: all look
    // the same from outside, so a caller cannot probe for other accounts' intents.
    if (!intent || !this.ownedBy(intent, accountId)) throw intentNotFound(id);

    const { newlyCredited } = await this.observe(intent, nowSeconds());
    const after = (await this.row(id))!;
    if (after.credited_at != null) return await this.succeededResult(after, newlyCredited);
    if (intent.status === "processing") {
      const balance = await this.balanceOf(accountId);
      return {
        httpStatus: 202,
        body: {
          payment_intent_id: id,
          status: "processing",
          credited_cents: 0,
          newly_credited: false,
          balance_cents: balance,
          balance_display: formatCents(balance),
        },
      };
    }
    throw stateError(intent);
  }

  async cancel(accountId: string, paymentIntentId: unknown) {
    const id = validateIntentId(paymentIntentId);
    const row = await this.row(id);
    if (row && row.account_id !== accountId) throw intentNotFound(id);
    if (!row) {
      const found = await this.call(() => this.processor.retrieveIntent(id));
      if (!found || !this.ownedBy(found, accountId)) throw intentNotFound(id);
    }
    try {
      const intent = await this.processor.cancelIntent(id, "sigil-cancel-" + id);
      await this.observe(intent, nowSeconds());
      return { payment_intent_id: id, status: intent.status };
    } catch (e) {
      if (!(e instanceof ProcessorError && e.kind === "unexpected_state")) throw toApiError(e);
      // Too late to cancel (it succeeded, or was already canceled): record what it is now, which
      // credits it if it succeeded, and say so.
      const current = await this.call(() => this.processor.retrieveIntent(id));
      if (current) await this.observe(current, nowSeconds());
      throw new ApiError("payment_not_cancelable", `payment intent ${id} can no longer be canceled`, {
        details: { payment_intent_id: id, status: current?.status ?? "unknown" },
      });
    }
  }

  /** A verified webhook delivery. Duplicates and stale (out-of-order) events change nothing. */
  async handleEvent(event: ProcessorEvent): Promise<Outcome> {
    if (await this.db.first(Q.eventSeen, [event.id])) return "duplicate";
    const intent = event.intent;
    if (!intent || !event.type.startsWith("payment_intent.")) {
      await this.db.run(Q.claimEvent, [event.id, event.type, "ignored_type", Date.now()]);
      return "ignored_type";
    }
    if (!this.ours(intent)) {
      await this.db.run(Q.claimEvent, [event.id, event.type, "ignored_foreign", Date.now()]);
      return "ignored_foreign";
    }
    const { outcome } = await this.observe(intent, event.created, event);
    return outcome;
  }

  /**
   * Repair pass: asks the processor about intents not yet credited and credits those that succeeded.
   * At start-up it checks every uncredited, non-canceled intent of the last 30 days (a crash between
   * "succeeded" and "credited"); the periodic pass checks only `processing` ones (a crypto payment that
   * settled after its page was closed, when no webhook is configured). An outage of the processor
   * ends the pass early: the rest count as errors and are retried by the next pass, confirm or webhook.
   */
  async reconcile(
    opts: { onlyProcessing?: boolean; maxAgeDays?: number } = {},
  ): Promise<{ checked: number; credited: number; errors: number }> {
    const since = Date.now() - (opts.maxAgeDays ?? 30) * 86_400_000;
    const rows = await this.db.all(Q.uncredited, [since]);
    const ids = rows
      .filter((r) => !opts.onlyProcessing || r.status === "processing")
      .map((r) => r.payment_intent_id);
    let credited = 0;
    let errors = 0;
    for (const [i, id] of ids.entries()) {
      try {
        const intent = await this.processor.retrieveIntent(id);
        if (!intent || !this.ours(intent)) continue;
        if ((await this.observe(intent, nowSeconds())).newlyCredited) credited++;
      } catch (e) {
        const outage = e instanceof ProcessorError && e.kind === "unavailable";
        errors += outage ? ids.length - i : 1;
        this.logger?.warn(
          { payment_intent_id: id, err: e instanceof Error ? e.message : String(e) },
          outage
            ? "reconcile: payment processor unavailable, pass stopped"
            : "reconcile: could not check intent",
        );
        if (outage) break;
      }
    }
    if (ids.length > 0)
      this.logger?.info({ checked: ids.length, credited, errors }, "billing reconciliation done");
    return { checked: ids.length, credited, errors };
  }

  /** Dev-only (simulated processor): apply a state change the way its webhook would. */
  async observeNow(intent: ProcessorIntent): Promise<void> {
    await this.observe(intent, nowSeconds());
  }

  async intentAccount(id: string): Promise<string | null> {
    return (await this.row(id))?.account_id ?? null;
  }

  /**
   * Records what the processor says about an intent and credits it if it succeeded: one immediate
   * transaction, together with the webhook event id when there is one.
   */
  private async observe(
    intent: ProcessorIntent,
    observedAt: number,
    event?: ProcessorEvent,
  ): Promise<{ newlyCredited: boolean; outcome: Outcome }> {
    if (intent.status === "succeeded" && this.crashPoint === "before_credit")
      process.kill(process.pid, "SIGKILL");
    const accountId = intent.metadata.account_id;
    // Money coming in is fsynced before we answer (durable; the rest of a SQLite file runs
    // synchronous=NORMAL). On PostgreSQL every commit is durable.
    return this.db.transaction(
      async (tx): Promise<{ newlyCredited: boolean; outcome: Outcome }> => {
        const now = Date.now();
        // Claimed first, inside the transaction: two deliveries of one event racing (two relayer
        // instances) must not both proceed; the loser waits on the unique key, then finds it taken.
        if (event && (await tx.run(Q.claimEvent, [event.id, event.type, "processing", now])) === 0)
          return { newlyCredited: false, outcome: "duplicate" };
        // Adopt intents we have no row for (a crash between the processor's create and our insert):
        // the processor's metadata, signed or fetched with our secret key, names the account.
        await insertIntent(tx, intent, accountId, now);
        const row = (await tx.first(Q.rowForUpdate[tx.kind], [intent.id])) as IntentRow;
        let result: { newlyCredited: boolean; outcome: Outcome };
        if (row.credited_at != null) {
          result = { newlyCredited: false, outcome: "already_credited" };
        } else if (intent.status === "succeeded") {
          const cents = intent.amountReceivedCents > 0 ? intent.amountReceivedCents : intent.amountCents;
          const applied = await this.ledger.apply(tx, {
            accountId: row.account_id,
            kind: "credit",
            amountCents: cents,
            reference: "pi:" + intent.id,
            keyAddress: null,
            operation: "top_up",
          });
          await tx.run(Q.markCredited, [cents, now, now, intent.id]);
          result = {
            newlyCredited: applied.applied,
            outcome: applied.applied ? "credited" : "already_credited",
          };
          if (applied.applied) {
            this.logger?.info(
              { account_id: row.account_id, payment_intent_id: intent.id, credited_cents: cents },
              "payment credited",
            );
          }
        } else if (observedAt >= row.status_event_at && row.status !== "canceled") {
          // Older events arriving late (processing after payment_failed, say) do not roll the status back.
          await tx.run(Q.setStatus, [intent.status, intent.lastError, observedAt, now, intent.id]);
          result = { newlyCredited: false, outcome: "status_recorded" };
        } else {
          result = { newlyCredited: false, outcome: "stale" };
        }
        if (event) await tx.run(Q.setEventOutcome, [result.outcome, event.id]);
        return result;
      },
      { durable: true },
    );
  }

  private async succeededResult(row: IntentRow, newlyCredited: boolean): Promise<ConfirmResult> {
    const balance = await this.balanceOf(row.account_id);
    return {
      httpStatus: 200,
      body: {
        payment_intent_id: row.payment_intent_id,
        status: "succeeded",
        credited_cents: row.credited_cents ?? 0,
        newly_credited: newlyCredited,
        balance_cents: balance,
        balance_display: formatCents(balance),
      },
    };
  }

  private async row(id: string): Promise<IntentRow | undefined> {
    return (await this.db.first(Q.row, [id])) as IntentRow | undefined;
  }

  private ours(intent: ProcessorIntent): boolean {
    return (
      intent.metadata.ledger_id === this.ledgerId &&
      typeof intent.metadata.account_id === "string" &&
      /^[0-9]{1,20}$/.test(intent.metadata.account_id) &&
      intent.currency === "usd"
    );
  }

  private ownedBy(intent: ProcessorIntent, accountId: string): boolean {
    return this.ours(intent) && intent.metadata.account_id === accountId;
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw toApiError(e);
    }
  }
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
