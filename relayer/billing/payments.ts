import type { Database, Statement } from "better-sqlite3";
import { createHash, randomUUID } from "node:crypto";
import type { Logger } from "pino";
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

interface IntentRow {
  payment_intent_id: string;
  account_id: string;
  amount_cents: number;
  currency: string;
  status: string;
  last_error: string | null;
  status_event_at: number;
  credited_cents: number | null;
  credited_at: number | null;
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
export class Payments {
  private readonly s: Record<
    "row" | "insert" | "setStatus" | "markCredited" | "eventSeen" | "recordEvent" | "uncredited",
    Statement
  >;
  private readonly crashPoint: string | undefined;

  constructor(
    private readonly db: Database,
    private readonly ledger: Ledger,
    private readonly processor: PaymentProcessor,
    private readonly ledgerId: string,
    private readonly limits: { minimumCents: number; maximumCents: number },
    /** The balance including usage charges not yet committed (Metering's write-behind buffer). */
    private readonly balanceOf: (accountId: string) => number,
    private readonly logger?: Logger,
  ) {
    this.crashPoint = process.env[CRASH_POINT_ENV];
    this.s = {
      row: db.prepare("SELECT * FROM payment_intents WHERE payment_intent_id = ?"),
      insert: db.prepare(
        `INSERT INTO payment_intents (payment_intent_id, account_id, amount_cents, currency, status, last_error, status_event_at, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT (payment_intent_id) DO NOTHING`,
      ),
      setStatus: db.prepare(
        "UPDATE payment_intents SET status = ?, last_error = ?, status_event_at = ?, updated_at = ? WHERE payment_intent_id = ?",
      ),
      markCredited: db.prepare(
        "UPDATE payment_intents SET status = 'succeeded', last_error = NULL, credited_cents = ?, credited_at = ?, updated_at = ? WHERE payment_intent_id = ?",
      ),
      eventSeen: db.prepare("SELECT outcome FROM webhook_events WHERE event_id = ?"),
      recordEvent: db.prepare(
        "INSERT INTO webhook_events (event_id, type, outcome, received_at) VALUES (?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING",
      ),
      uncredited: db.prepare(
        "SELECT payment_intent_id, status FROM payment_intents WHERE credited_at IS NULL AND status != 'canceled' AND created_at > ? ORDER BY created_at DESC LIMIT 5000",
      ),
    };
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
    this.s.insert.run(
      intent.id,
      accountId,
      intent.amountCents,
      intent.currency,
      intent.status,
      intent.lastError,
      now,
      now,
    );
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
    const row = this.row(id);
    if (row && row.account_id !== accountId) throw intentNotFound(id);
    if (row?.credited_at != null) return this.succeededResult(row, false);

    const intent = await this.call(() => this.processor.retrieveIntent(id));
    // Unknown to us, unknown to the processor, or tagged with another account or ledger: all look
    // the same from outside, so a caller cannot probe for other accounts' intents.
    if (!intent || !this.ownedBy(intent, accountId)) throw intentNotFound(id);

    const { newlyCredited } = this.observe(intent, nowSeconds());
    const after = this.row(id)!;
    if (after.credited_at != null) return this.succeededResult(after, newlyCredited);
    if (intent.status === "processing") {
      const balance = this.balanceOf(accountId);
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
    const row = this.row(id);
    if (row && row.account_id !== accountId) throw intentNotFound(id);
    if (!row) {
      const found = await this.call(() => this.processor.retrieveIntent(id));
      if (!found || !this.ownedBy(found, accountId)) throw intentNotFound(id);
    }
    try {
      const intent = await this.processor.cancelIntent(id, "sigil-cancel-" + id);
      this.observe(intent, nowSeconds());
      return { payment_intent_id: id, status: intent.status };
    } catch (e) {
      if (!(e instanceof ProcessorError && e.kind === "unexpected_state")) throw toApiError(e);
      // Too late to cancel (it succeeded, or was already canceled): record what it is now, which
      // credits it if it succeeded, and say so.
      const current = await this.call(() => this.processor.retrieveIntent(id));
      if (current) this.observe(current, nowSeconds());
      throw new ApiError(409, "payment_not_cancelable", `payment intent ${id} can no longer be canceled`, {
        details: { payment_intent_id: id, status: current?.status ?? "unknown" },
      });
    }
  }

  /** A verified webhook delivery. Duplicates and stale (out-of-order) events change nothing. */
  handleEvent(event: ProcessorEvent): Outcome {
    if (this.s.eventSeen.get(event.id)) return "duplicate";
    const intent = event.intent;
    if (!intent || !event.type.startsWith("payment_intent.")) {
      this.db
        .transaction(() => this.s.recordEvent.run(event.id, event.type, "ignored_type", Date.now()))
        .immediate();
      return "ignored_type";
    }
    if (!this.ours(intent)) {
      this.db
        .transaction(() => this.s.recordEvent.run(event.id, event.type, "ignored_foreign", Date.now()))
        .immediate();
      return "ignored_foreign";
    }
    const { outcome } = this.observe(intent, event.created, event);
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
    const rows = this.s.uncredited.all(since) as Array<{ payment_intent_id: string; status: string }>;
    const ids = rows
      .filter((r) => !opts.onlyProcessing || r.status === "processing")
      .map((r) => r.payment_intent_id);
    let credited = 0;
    let errors = 0;
    for (const [i, id] of ids.entries()) {
      try {
        const intent = await this.processor.retrieveIntent(id);
        if (!intent || !this.ours(intent)) continue;
        if (this.observe(intent, nowSeconds()).newlyCredited) credited++;
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
  observeNow(intent: ProcessorIntent): void {
    this.observe(intent, nowSeconds());
  }

  intentAccount(id: string): string | null {
    return this.row(id)?.account_id ?? null;
  }

  /**
   * Records what the processor says about an intent and credits it if it succeeded: one immediate
   * transaction, together with the webhook event id when there is one.
   */
  private observe(
    intent: ProcessorIntent,
    observedAt: number,
    event?: ProcessorEvent,
  ): { newlyCredited: boolean; outcome: Outcome } {
    if (intent.status === "succeeded" && this.crashPoint === "before_credit")
      process.kill(process.pid, "SIGKILL");
    const accountId = intent.metadata.account_id;
    const tx = this.db.transaction((): { newlyCredited: boolean; outcome: Outcome } => {
      if (event) {
        // Re-checked inside the transaction: two deliveries of one event racing (two relayer
        // processes) must not both proceed. The INSERT at the end would fail the loser anyway.
        const seen = this.s.eventSeen.get(event.id);
        if (seen) return { newlyCredited: false, outcome: "duplicate" };
      }
      const now = Date.now();
      // Adopt intents we have no row for (a crash between the processor's create and our insert):
      // the processor's metadata, signed or fetched with our secret key, names the account.
      this.s.insert.run(
        intent.id,
        accountId,
        intent.amountCents,
        intent.currency,
        intent.status,
        intent.lastError,
        now,
        now,
      );
      const row = this.row(intent.id)!;
      let result: { newlyCredited: boolean; outcome: Outcome };
      if (row.credited_at != null) {
        result = { newlyCredited: false, outcome: "already_credited" };
      } else if (intent.status === "succeeded") {
        const cents = intent.amountReceivedCents > 0 ? intent.amountReceivedCents : intent.amountCents;
        const applied = this.ledger.apply({
          accountId: row.account_id,
          kind: "credit",
          amountCents: cents,
          reference: "pi:" + intent.id,
          keyAddress: null,
          operation: "top_up",
        });
        this.s.markCredited.run(cents, now, now, intent.id);
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
        this.s.setStatus.run(intent.status, intent.lastError, observedAt, now, intent.id);
        result = { newlyCredited: false, outcome: "status_recorded" };
      } else {
        result = { newlyCredited: false, outcome: "stale" };
      }
      if (event) this.s.recordEvent.run(event.id, event.type, result.outcome, now);
      return result;
    });
    // Money coming in is fsynced before we answer (the rest of the file runs synchronous=NORMAL).
    this.db.pragma("synchronous = FULL");
    try {
      return tx.immediate();
    } finally {
      this.db.pragma("synchronous = NORMAL");
    }
  }

  private succeededResult(row: IntentRow, newlyCredited: boolean): ConfirmResult {
    const balance = this.balanceOf(row.account_id);
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

  private row(id: string): IntentRow | undefined {
    return this.s.row.get(id) as IntentRow | undefined;
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
