import type { Database, Statement } from "better-sqlite3";

export interface LedgerEntryInput {
  accountId: string;
  kind: "credit" | "debit";
  amountCents: number;
  /** Unique across the ledger: a second entry with the same reference is a no-op. */
  reference: string;
  keyAddress: string | null;
  operation: string;
}

export interface AppliedEntry {
  /** false when the reference was already in the ledger (nothing changed). */
  applied: boolean;
  balanceCents: number;
}

export interface HistoryItem {
  id: number;
  type: "credit" | "debit";
  amount_cents: number;
  balance_after_cents: number;
  operation: string;
  reference: string;
  key_address: string | null;
  /** Unix seconds, like every time in the API. */
  created_at: number;
}

/**
 * Balances and their ledger. The only code that changes `accounts.balance_cents`, and it does so in
 * the same transaction as the ledger row, guarded by the row's UNIQUE reference.
 */
export class Ledger {
  private readonly s: {
    ensure: Statement;
    balance: Statement;
    insert: Statement;
    addBalance: Statement;
    history: Statement;
    count: Statement;
    sum: Statement;
    hasRef: Statement;
  };

  constructor(private readonly db: Database) {
    this.s = {
      ensure: db.prepare(
        "INSERT INTO accounts (account_id, balance_cents, created_at) VALUES (?, 0, ?) ON CONFLICT (account_id) DO NOTHING",
      ),
      balance: db.prepare("SELECT balance_cents FROM accounts WHERE account_id = ?"),
      insert: db.prepare(
        `INSERT INTO ledger_entries (account_id, kind, amount_cents, balance_after_cents, reference, key_address, operation, created_at)
         VALUES (@accountId, @kind, @amountCents, @balanceAfter, @reference, @keyAddress, @operation, @now)
         ON CONFLICT (reference) DO NOTHING`,
      ),
      addBalance: db.prepare("UPDATE accounts SET balance_cents = balance_cents + ? WHERE account_id = ?"),
      history: db.prepare(
        "SELECT id, kind, amount_cents, balance_after_cents, operation, reference, key_address, created_at FROM ledger_entries WHERE account_id = ? ORDER BY id DESC LIMIT ? OFFSET ?",
      ),
      count: db.prepare("SELECT COUNT(*) AS n FROM ledger_entries WHERE account_id = ?"),
      sum: db.prepare(
        "SELECT COALESCE(SUM(CASE kind WHEN 'credit' THEN amount_cents ELSE -amount_cents END), 0) AS s FROM ledger_entries WHERE account_id = ?",
      ),
      hasRef: db.prepare("SELECT 1 FROM ledger_entries WHERE reference = ?"),
    };
  }

  ensureAccount(accountId: string): void {
    this.s.ensure.run(accountId, Date.now());
  }

  balance(accountId: string): number {
    const row = this.s.balance.get(accountId) as { balance_cents: number } | undefined;
    return row?.balance_cents ?? 0;
  }

  hasReference(reference: string): boolean {
    return this.s.hasRef.get(reference) !== undefined;
  }

  /**
   * Applies one entry. Must run inside a write transaction (callers combine it with their own
   * bookkeeping: the intent's credited flag, the key's spend), so that a crash leaves all or nothing.
   */
  apply(e: LedgerEntryInput): AppliedEntry {
    if (!this.db.inTransaction) throw new Error("Ledger.apply must run inside a transaction");
    if (!Number.isSafeInteger(e.amountCents) || e.amountCents <= 0)
      throw new Error(`ledger amount must be a positive integer, got ${e.amountCents}`);
    this.ensureAccount(e.accountId);
    const delta = e.kind === "credit" ? e.amountCents : -e.amountCents;
    const balanceAfter = this.balance(e.accountId) + delta;
    const r = this.s.insert.run({ ...e, balanceAfter, now: Date.now() });
    if (r.changes === 0) return { applied: false, balanceCents: this.balance(e.accountId) };
    this.s.addBalance.run(delta, e.accountId);
    return { applied: true, balanceCents: balanceAfter };
  }

  /**
   * Applies many entries in one pass (the write-behind flush of usage charges): each account's
   * balance is read once and written once, and each entry costs one INSERT. Must run inside a write
   * transaction. Returns, per entry, whether it was applied (false: its reference was already there).
   */
  applyBatch(entries: readonly LedgerEntryInput[]): boolean[] {
    if (!this.db.inTransaction) throw new Error("Ledger.applyBatch must run inside a transaction");
    const running = new Map<string, { start: number; balance: number }>();
    const now = Date.now();
    const applied = entries.map((e) => {
      if (!Number.isSafeInteger(e.amountCents) || e.amountCents <= 0)
        throw new Error(`ledger amount must be a positive integer, got ${e.amountCents}`);
      let acc = running.get(e.accountId);
      if (!acc) {
        this.ensureAccount(e.accountId);
        const b = this.balance(e.accountId);
        acc = { start: b, balance: b };
        running.set(e.accountId, acc);
      }
      const after = acc.balance + (e.kind === "credit" ? e.amountCents : -e.amountCents);
      if (this.s.insert.run({ ...e, balanceAfter: after, now }).changes === 0) return false;
      acc.balance = after;
      return true;
    });
    for (const [accountId, acc] of running)
      if (acc.balance !== acc.start) this.s.addBalance.run(acc.balance - acc.start, accountId);
    return applied;
  }

  history(accountId: string, pageNumber: number, pageSize: number): { items: HistoryItem[]; total: number } {
    const rows = this.s.history.all(accountId, pageSize, pageNumber * pageSize) as Array<{
      id: number;
      kind: "credit" | "debit";
      amount_cents: number;
      balance_after_cents: number;
      operation: string;
      reference: string;
      key_address: string | null;
      created_at: number;
    }>;
    const total = (this.s.count.get(accountId) as { n: number }).n;
    return {
      total,
      items: rows.map((r) => ({
        id: r.id,
        type: r.kind,
        amount_cents: r.amount_cents,
        balance_after_cents: r.balance_after_cents,
        operation: r.operation,
        reference: r.reference,
        key_address: r.key_address,
        created_at: Math.floor(r.created_at / 1000),
      })),
    };
  }

  /** The invariant the tests and operators check: the ledger's net sum equals the stored balance. */
  audit(accountId: string): { balance_cents: number; ledger_sum_cents: number } {
    return {
      balance_cents: this.balance(accountId),
      ledger_sum_cents: (this.s.sum.get(accountId) as { s: number }).s,
    };
  }
}
