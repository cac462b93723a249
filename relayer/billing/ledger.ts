import { type Sql, prepare } from "../db";

export interface LedgerEntryInput {
  accountId: string;
  kind: "credit" | "debit";
  amountCents: number;
  /** Unique across the ledger: a second entry with the same reference is a no-op. */
  reference: string;
  keyAddress: string | null;
  operation: string;
  /** The action an execution charge paid for (its CID); absent for credits, writes and pins. */
  actionCid?: string | null;
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
  /**
   * The action an execution charge paid for: its CID (inline code counts under the CID the service
   * computed for it, the same one it would have pinned). null for every other entry, and for
   * executions charged before the ledger recorded it.
   */
  action_cid: string | null;
  /** Unix seconds, like every time in the API. */
  created_at: number;
}

/**
 * From this many entries on, a PostgreSQL batch is written with two statements (which references
 * exist, then one INSERT of the rest) instead of one INSERT per entry: under load the write-behind
 * flush carries dozens of charges, and each INSERT was a round trip.
 */
const MANY_ENTRIES = 3;

const PG_EXISTING = "SELECT reference FROM ledger_entries WHERE reference = ANY($1::text[])";
const PG_INSERT_MANY = `
INSERT INTO ledger_entries (account_id, kind, amount_cents, balance_after_cents, reference, key_address,
                            operation, created_at, action_cid)
SELECT a, k, amt, bal, ref, ka, op, $8::bigint, cid
  FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $9::text[])
       WITH ORDINALITY AS e(a, k, amt, bal, ref, ka, op, cid, ord)
 ORDER BY ord
ON CONFLICT (reference) DO NOTHING
RETURNING reference`;

/**
 * PostgreSQL, many entries: the references already in the ledger are read first (they apply nothing,
 * as in insertEach), the others go in one INSERT in order, each with its balance after (ids follow
 * the order, so history reads as before). The accounts' rows are locked (FOR UPDATE) by the caller.
 * A reference that another instance inserted between the read and the INSERT (a retry of the same
 * write racing on two instances) would make later balances wrong: then nothing of this transaction
 * commits (the error rolls it back; the flush retries and the read sees it).
 */
async function insertMany(
  tx: Sql,
  entries: readonly LedgerEntryInput[],
  running: Map<string, { start: number; balance: number }>,
  now: number,
): Promise<AppliedEntry[]> {
  const existing = new Set(
    (
      (await tx.exec(PG_EXISTING, [entries.map((e) => e.reference)], { prepared: true })) as Array<{
        reference: string;
      }>
    ).map((r) => r.reference),
  );
  const out: AppliedEntry[] = [];
  const rows: LedgerEntryInput[] = [];
  const balances: number[] = [];
  const seen = new Set<string>();
  for (const e of entries) {
    const acc = running.get(e.accountId)!;
    if (existing.has(e.reference) || seen.has(e.reference)) {
      out.push({ applied: false, balanceCents: acc.balance });
      continue;
    }
    seen.add(e.reference);
    acc.balance += e.kind === "credit" ? e.amountCents : -e.amountCents;
    rows.push(e);
    balances.push(acc.balance);
    out.push({ applied: true, balanceCents: acc.balance });
  }
  if (rows.length === 0) return out;
  const inserted = await tx.exec(
    PG_INSERT_MANY,
    [
      rows.map((e) => e.accountId),
      rows.map((e) => e.kind),
      rows.map((e) => e.amountCents),
      balances,
      rows.map((e) => e.reference),
      rows.map((e) => e.keyAddress),
      rows.map((e) => e.operation),
      now,
      rows.map((e) => e.actionCid ?? null),
    ],
    { prepared: true },
  );
  if (inserted.length !== rows.length)
    throw new Error("ledger: a reference was recorded concurrently; the batch is retried");
  return out;
}

// The queries, written once for both engines (relayer/db/prepared.ts).
const Q = {
  ensure: prepare("ledger.ensure", (db, a) =>
    db
      .insertInto("accounts")
      .values({ account_id: a(0), balance_cents: 0, created_at: a(1) })
      .onConflict((oc) => oc.column("account_id").doNothing()),
  ),
  balance: prepare("ledger.balance", (db, a) =>
    db.selectFrom("accounts").select("balance_cents").where("account_id", "=", a(0)),
  ),
  /**
   * The account's row, locked until the transaction ends on PostgreSQL (FOR UPDATE), so two
   * instances applying entries to one account take turns; SQLite's BEGIN IMMEDIATE already did.
   */
  balanceForUpdate: {
    sqlite: prepare("ledger.balanceForUpdate.sqlite", (db, a) =>
      db.selectFrom("accounts").select("balance_cents").where("account_id", "=", a(0)),
    ),
    postgres: prepare("ledger.balanceForUpdate.pg", (db, a) =>
      db.selectFrom("accounts").select("balance_cents").where("account_id", "=", a(0)).forUpdate(),
    ),
  },
  insert: prepare("ledger.insert", (db, a) =>
    db
      .insertInto("ledger_entries")
      .values({
        account_id: a(0),
        kind: a(1),
        amount_cents: a(2),
        balance_after_cents: a(3),
        reference: a(4),
        key_address: a(5),
        operation: a(6),
        created_at: a(7),
        action_cid: a(8),
      })
      .onConflict((oc) => oc.column("reference").doNothing()),
  ),
  addBalance: prepare("ledger.addBalance", (db, a) =>
    db
      .updateTable("accounts")
      .set((eb) => ({ balance_cents: eb("balance_cents", "+", a(0)) }))
      .where("account_id", "=", a(1)),
  ),
  history: prepare("ledger.history", (db, a) =>
    db
      .selectFrom("ledger_entries")
      .select([
        "id",
        "kind",
        "amount_cents",
        "balance_after_cents",
        "operation",
        "reference",
        "key_address",
        "action_cid",
        "created_at",
      ])
      .where("account_id", "=", a(0))
      .orderBy("id", "desc")
      .limit(a(1))
      .offset(a(2)),
  ),
  count: prepare("ledger.count", (db, a) =>
    db
      .selectFrom("ledger_entries")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("account_id", "=", a(0)),
  ),
  sum: prepare("ledger.sum", (db, a) =>
    db
      .selectFrom("ledger_entries")
      .select((eb) =>
        eb.fn
          .coalesce(
            eb.fn.sum<number>(
              eb
                .case("kind")
                .when("credit")
                .then(eb.ref("amount_cents"))
                .else(eb.neg(eb.ref("amount_cents")))
                .end(),
            ),
            eb.lit(0),
          )
          .as("s"),
      )
      .where("account_id", "=", a(0)),
  ),
  hasRef: prepare("ledger.hasRef", (db, a) =>
    db.selectFrom("ledger_entries").select("id").where("reference", "=", a(0)),
  ),
};

/**
 * Balances and their ledger. The only code that changes `accounts.balance_cents`, and it does so in
 * the same transaction as the ledger row, guarded by the row's UNIQUE reference: whichever
 * transaction (of whichever instance) inserts a reference first applies it, every other one is a no-op.
 */
export class Ledger {
  constructor(private readonly db: Sql) {}

  async ensureAccount(accountId: string, tx: Sql = this.db): Promise<void> {
    await tx.run(Q.ensure, [accountId, Date.now()]);
  }

  async balance(accountId: string, tx: Sql = this.db): Promise<number> {
    return (await tx.first(Q.balance, [accountId]))?.balance_cents ?? 0;
  }

  async hasReference(reference: string): Promise<boolean> {
    return (await this.db.first(Q.hasRef, [reference])) !== undefined;
  }

  /**
   * Applies one entry inside the caller's transaction `tx` (callers combine it with their own
   * bookkeeping: the intent's credited flag, the key's spend), so that a crash leaves all or nothing.
   */
  async apply(tx: Sql, e: LedgerEntryInput): Promise<AppliedEntry> {
    return (await this.applyBatch(tx, [e]))[0];
  }

  /**
   * Applies many entries in one pass (the write-behind flush of usage charges) inside `tx`: each
   * account's row is locked and read once and written once, and each entry costs one INSERT. Returns,
   * per entry, whether it was applied (false: its reference was already there) and the balance after.
   */
  async applyBatch(tx: Sql, entries: readonly LedgerEntryInput[]): Promise<AppliedEntry[]> {
    const running = new Map<string, { start: number; balance: number }>();
    const now = Date.now();
    // Accounts are locked in a fixed order, so two instances flushing overlapping batches never
    // deadlock each other.
    for (const accountId of [...new Set(entries.map((e) => e.accountId))].sort()) {
      await this.ensureAccount(accountId, tx);
      const b = (await tx.first(Q.balanceForUpdate[tx.kind], [accountId]))?.balance_cents ?? 0;
      running.set(accountId, { start: b, balance: b });
    }
    for (const e of entries)
      if (!Number.isSafeInteger(e.amountCents) || e.amountCents <= 0)
        throw new Error(`ledger amount must be a positive integer, got ${e.amountCents}`);
    const out =
      tx.kind === "postgres" && entries.length >= MANY_ENTRIES
        ? await insertMany(tx, entries, running, now)
        : await this.insertEach(tx, entries, running, now);
    for (const [accountId, acc] of running)
      if (acc.balance !== acc.start) await tx.run(Q.addBalance, [acc.balance - acc.start, accountId]);
    return out;
  }

  /** One INSERT per entry, each knowing whether the one before applied (SQLite; small batches). */
  private async insertEach(
    tx: Sql,
    entries: readonly LedgerEntryInput[],
    running: Map<string, { start: number; balance: number }>,
    now: number,
  ): Promise<AppliedEntry[]> {
    const out: AppliedEntry[] = [];
    for (const e of entries) {
      const acc = running.get(e.accountId)!;
      const after = acc.balance + (e.kind === "credit" ? e.amountCents : -e.amountCents);
      const inserted = await tx.run(Q.insert, [
        e.accountId,
        e.kind,
        e.amountCents,
        after,
        e.reference,
        e.keyAddress,
        e.operation,
        now,
        e.actionCid ?? null,
      ]);
      if (inserted === 0) {
        out.push({ applied: false, balanceCents: acc.balance });
        continue;
      }
      acc.balance = after;
      out.push({ applied: true, balanceCents: after });
    }
    return out;
  }

  async history(
    accountId: string,
    pageNumber: number,
    pageSize: number,
  ): Promise<{ items: HistoryItem[]; total: number }> {
    const rows = await this.db.all(Q.history, [accountId, pageSize, pageNumber * pageSize]);
    const total = Number((await this.db.first(Q.count, [accountId]))?.n ?? 0);
    return {
      total,
      items: rows.map((r) => ({
        id: Number(r.id),
        type: r.kind,
        amount_cents: r.amount_cents,
        balance_after_cents: r.balance_after_cents,
        operation: r.operation,
        reference: r.reference,
        key_address: r.key_address,
        action_cid: r.action_cid,
        created_at: Math.floor(r.created_at / 1000),
      })),
    };
  }

  /** The invariant the tests and operators check: the ledger's net sum equals the stored balance. */
  async audit(accountId: string): Promise<{ balance_cents: number; ledger_sum_cents: number }> {
    return {
      balance_cents: await this.balance(accountId),
      ledger_sum_cents: Number((await this.db.first(Q.sum, [accountId]))?.s ?? 0),
    };
  }
}
