/**
 * The ledger's batch of entries (the write-behind flush), on each engine: a batch large enough for
 * PostgreSQL's two-statement form (references read, then one INSERT of the rest) applies exactly what
 * one INSERT per entry applies: a reference already in the ledger and a reference repeated inside the
 * batch apply nothing, every other entry applies with its running balance, in order, and the stored
 * balance equals the ledger's sum. On PostgreSQL the whole batch costs the same few statements
 * whatever its size.
 */
import { expect } from "chai";
import { join } from "node:path";
import { Ledger, type LedgerEntryInput } from "../../relayer/billing/ledger";
import { type DataLayer, openDataLayer, postgresStatementCount } from "../../relayer/db";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { tempDir } from "./harness";

describeOnEngines("billing: the ledger's batch of entries", function (engine) {
  this.timeout(60_000);
  let tmp: ReturnType<typeof tempDir>;
  let db: DataLayer;
  let ledger: Ledger;
  const A = "31";
  const B = "32";

  beforeEach(async () => {
    tmp = tempDir();
    db = await openDataLayer({
      databaseUrl: engine === "postgres" ? await freshDatabaseUrl() : undefined,
      sqlitePath: join(tmp.dir, "ledger.sqlite"),
    });
    ledger = new Ledger(db);
  });
  afterEach(async () => {
    await db.close();
    tmp.cleanup();
  });

  const debit = (accountId: string, cents: number, reference: string): LedgerEntryInput => ({
    accountId,
    kind: "debit",
    amountCents: cents,
    reference,
    keyAddress: "0x" + "cd".repeat(20),
    operation: "execution",
    actionCid: null,
  });

  it("applies each entry once, in order, with its running balance; known and repeated references apply nothing", async () => {
    await db.transaction((tx) =>
      ledger.applyBatch(tx, [{ ...debit(A, 100, "credit:a"), kind: "credit", operation: "top_up" }]),
    );
    await db.transaction((tx) => ledger.applyBatch(tx, [debit(A, 1, "exec:known")]));
    const batch = [
      debit(A, 2, "exec:1"),
      debit(B, 5, "exec:b1"),
      debit(A, 1, "exec:known"), // already in the ledger
      debit(A, 3, "exec:2"),
      debit(A, 3, "exec:2"), // repeated inside the batch
      debit(B, 1, "exec:b2"),
      debit(A, 4, "exec:3"),
    ];
    const before = postgresStatementCount();
    const applied = await db.transaction((tx) => ledger.applyBatch(tx, batch));
    if (engine === "postgres") {
      // BEGIN; per account: ensure, lock; the references read; one INSERT; per account: the balance; COMMIT.
      expect(postgresStatementCount() - before).to.equal(1 + 2 * 2 + 1 + 1 + 2 + 1);
    }
    expect(applied).to.deep.equal([
      { applied: true, balanceCents: 97 },
      { applied: true, balanceCents: -5 },
      { applied: false, balanceCents: 97 },
      { applied: true, balanceCents: 94 },
      { applied: false, balanceCents: 94 },
      { applied: true, balanceCents: -6 },
      { applied: true, balanceCents: 90 },
    ]);
    expect(await ledger.audit(A)).to.deep.equal({ balance_cents: 90, ledger_sum_cents: 90 });
    expect(await ledger.audit(B)).to.deep.equal({ balance_cents: -6, ledger_sum_cents: -6 });
    const history = (await ledger.history(A, 0, 10)).items.map((i) => [i.reference, i.balance_after_cents]);
    expect(history).to.deep.equal([
      ["exec:3", 90],
      ["exec:2", 94],
      ["exec:1", 97],
      ["exec:known", 99],
      ["credit:a", 100],
    ]);
  });
});
