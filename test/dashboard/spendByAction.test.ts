/**
 * The data behind the Billing chart of spend per action (dashboard/src/spendByAction.ts): which
 * charges become which series, and, for any history, that nothing is lost or counted twice.
 */
import { expect } from "chai";
import fc from "fast-check";
import { NOT_ACTIONS, OTHER_ACTIONS, spendByAction, type Debit } from "../../dashboard/src/spendByAction";

const DAY = 86_400;
const T0 = 1_760_000_000 - (1_760_000_000 % DAY); // a UTC midnight
const cidN = (n: number) => `Qm${String(n).padStart(44, "x")}`;
const exec = (cid: string | null, cents: number, at = T0): Debit => ({
  type: "debit",
  amount_cents: cents,
  operation: "execution",
  action_cid: cid,
  created_at: at,
});

describe("dashboard: spend per action (the chart's series)", () => {
  it("gives the top N actions a series each, biggest first; the rest of the executions are 'other actions'", () => {
    const items = [exec(cidN(1), 5), exec(cidN(2), 9), exec(cidN(3), 1), exec(cidN(1), 5)];
    const r = spendByAction(items, 2);
    expect(r.series).to.deep.equal([
      { key: cidN(1), kind: "action", totalCents: 10 },
      { key: cidN(2), kind: "action", totalCents: 9 },
      { key: OTHER_ACTIONS, kind: "other", totalCents: 1 },
    ]);
  });

  it("puts writes and pins in their own series, and credits nowhere", () => {
    const items: Debit[] = [
      exec(cidN(1), 2),
      { type: "debit", amount_cents: 1, operation: "add_group", action_cid: null, created_at: T0 },
      { type: "debit", amount_cents: 1, operation: "pin", action_cid: null, created_at: T0 },
      { type: "credit", amount_cents: 500, operation: "top_up", action_cid: null, created_at: T0 },
    ];
    expect(spendByAction(items).series).to.deep.equal([
      { key: cidN(1), kind: "action", totalCents: 2 },
      { key: NOT_ACTIONS, kind: "not-action", totalCents: 2 },
    ]);
  });

  it("counts executions charged before the ledger recorded the CID as 'other actions'", () => {
    expect(spendByAction([exec(null, 3)]).series).to.deep.equal([
      { key: OTHER_ACTIONS, kind: "other", totalCents: 3 },
    ]);
  });

  it("one bar per UTC day, oldest first", () => {
    const r = spendByAction([exec(cidN(1), 1, T0 + DAY), exec(cidN(1), 2, T0)]);
    expect(r.days).to.deep.equal([
      new Date(T0 * 1000).toISOString().slice(0, 10),
      new Date((T0 + DAY) * 1000).toISOString().slice(0, 10),
    ]);
    expect(r.cents).to.deep.equal([[2], [1]]);
  });

  it("property: every debit is in exactly one cell; at most N action series; series totals match their cells", () => {
    const debit = fc.record({
      type: fc.constantFrom("debit" as const, "credit" as const),
      amount_cents: fc.integer({ min: 1, max: 1000 }),
      operation: fc.constantFrom("execution", "execution", "pin", "add_group"),
      action_cid: fc.option(fc.integer({ min: 0, max: 9 }).map(cidN), { nil: null }),
      created_at: fc.integer({ min: T0, max: T0 + 5 * DAY }),
    });
    fc.assert(
      fc.property(fc.array(debit, { maxLength: 60 }), fc.integer({ min: 0, max: 6 }), (items, topN) => {
        const r = spendByAction(items, topN);
        const spent = items.filter((i) => i.type === "debit").reduce((n, i) => n + i.amount_cents, 0);
        const cells = r.cents.flat().reduce((n, c) => n + c, 0);
        expect(cells).to.equal(spent);
        expect(r.series.filter((s) => s.kind === "action").length).to.be.at.most(topN);
        r.series.forEach((s, k) => expect(r.cents.reduce((n, row) => n + row[k], 0)).to.equal(s.totalCents));
        expect(r.series.every((s) => s.totalCents > 0)).to.equal(true);
      }),
    );
  });
});
