/**
 * The billing side of the outbox: reads the ledger's entries after its cursor (the entry id) and emits
 * `payment.credited` for every credited payment and `balance.low` for every charge that takes the
 * balance from at least the threshold to below it (so once per crossing: the balance must come back
 * up to the threshold, by a payment, before the next charge can cross it again).
 *
 * Entries younger than `settleMs` are left for the next pass: on PostgreSQL ids are handed out when a
 * row is inserted but become visible when its transaction commits, so a young id can still be
 * followed by an older one; every ledger transaction is short, far below the settle time.
 */
import { createHash } from "node:crypto";
import { prepare } from "../db";
import type { EventType } from "./eventTypes";
import type { WebhookStore } from "./store";

export const LEDGER_CURSOR = "ledger";
const BATCH = 500;

const entriesAfter = prepare("wh.ledgerAfter", (db, a) =>
  db
    .selectFrom("ledger_entries")
    .select([
      "id",
      "account_id",
      "kind",
      "amount_cents",
      "balance_after_cents",
      "reference",
      "operation",
      "created_at",
    ])
    .where("id", ">", a(0))
    .where("created_at", "<", a(1))
    .orderBy("id")
    .limit(a(2)),
);

export interface LedgerScannerOptions {
  store: WebhookStore;
  /** The ledger's own id (ledger_meta): part of each event id, so two ledgers never share one. */
  ledgerId: string;
  lowBalanceCents: number;
  settleMs: number;
}

export function ledgerEventId(ledgerId: string, entryId: number, type: EventType): string {
  return (
    "evt_" +
    createHash("sha256")
      .update(`sigil/webhook-event/v1:${ledgerId}:${entryId}:${type}`)
      .digest("hex")
      .slice(0, 32)
  );
}

export class LedgerScanner {
  constructor(private readonly o: LedgerScannerOptions) {}

  async scanOnce(): Promise<number> {
    const { store } = this.o;
    const cursor = await store.cursor(LEDGER_CURSOR, 0);
    const entries = await store.db.all(entriesAfter, [cursor, Date.now() - this.o.settleMs, BATCH]);
    if (entries.length === 0) return 0;
    let stored = 0;
    await store.db.transaction(async (tx) => {
      for (const e of entries) {
        const described = this.describe(e);
        if (described === null) continue;
        const payload = {
          id: ledgerEventId(this.o.ledgerId, Number(e.id), described.type),
          type: described.type,
          created: Math.floor(Number(e.created_at) / 1000),
          account_id: Number(e.account_id),
          data: described.data,
        };
        if (await store.addEvent(tx, e.account_id, payload, await store.subscribers(e.account_id, tx)))
          stored++;
      }
      await store.advanceCursor(tx, LEDGER_CURSOR, Number(entries[entries.length - 1].id));
    });
    return stored;
  }

  private describe(e: {
    kind: string;
    amount_cents: number;
    balance_after_cents: number;
    reference: string;
    operation: string;
  }): { type: EventType; data: Record<string, unknown> } | null {
    const after = Number(e.balance_after_cents);
    const amount = Number(e.amount_cents);
    if (e.kind === "credit" && e.operation === "top_up")
      return {
        type: "payment.credited",
        data: {
          amount_cents: amount,
          balance_cents: after,
          payment_intent_id: e.reference.startsWith("pi:") ? e.reference.slice(3) : e.reference,
        },
      };
    const threshold = this.o.lowBalanceCents;
    if (e.kind === "debit" && after < threshold && after + amount >= threshold)
      return {
        type: "balance.low",
        data: {
          balance_cents: after,
          threshold_cents: threshold,
          operation: e.operation,
          charged_cents: amount,
        },
      };
    return null;
  }
}
