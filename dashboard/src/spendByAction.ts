/**
 * Spend over time per action, from the billing history: the data behind the Billing page's chart.
 * Execution charges carry the action's CID (`action_cid`); the `topN` actions that cost the most get
 * a series each, the rest of the executions one "other actions" series, and every other charge
 * (writes, pins) one "writes and pins" series, so the bars always add up to what was spent.
 */

export interface Debit {
  type: "credit" | "debit";
  amount_cents: number;
  operation: string;
  action_cid: string | null;
  created_at: number;
}

export const OTHER_ACTIONS = "other actions";
export const NOT_ACTIONS = "writes and pins";

export interface SpendSeries {
  /** A CID, or OTHER_ACTIONS, or NOT_ACTIONS. */
  key: string;
  kind: "action" | "other" | "not-action";
  totalCents: number;
}

export interface SpendByAction {
  /** UTC days (yyyy-mm-dd) with any spend, oldest first. */
  days: string[];
  /** Biggest action first, then "other actions", then "writes and pins" (only those with spend). */
  series: SpendSeries[];
  /** cents[day index][series index] */
  cents: number[][];
}

const dayOf = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString().slice(0, 10);

export function spendByAction(items: readonly Debit[], topN = 5): SpendByAction {
  const debits = items.filter((i) => i.type === "debit");
  const keyOf = (d: Debit) => (d.operation === "execution" ? (d.action_cid ?? OTHER_ACTIONS) : NOT_ACTIONS);
  const perAction = new Map<string, number>();
  for (const d of debits) {
    const k = keyOf(d);
    if (k === OTHER_ACTIONS || k === NOT_ACTIONS) continue;
    perAction.set(k, (perAction.get(k) ?? 0) + Math.abs(d.amount_cents));
  }
  // Ties broken by CID so the colours do not change between two loads of the same history.
  const top = [...perAction]
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1))
    .slice(0, Math.max(0, topN))
    .map(([k]) => k);
  const seriesOf = (d: Debit) => {
    const k = keyOf(d);
    if (k === NOT_ACTIONS) return NOT_ACTIONS;
    return top.includes(k) ? k : OTHER_ACTIONS;
  };
  const keys = [...top, OTHER_ACTIONS, NOT_ACTIONS];
  const days = [...new Set(debits.map((d) => dayOf(d.created_at)))].sort();
  const grid = days.map(() => keys.map(() => 0));
  for (const d of debits)
    grid[days.indexOf(dayOf(d.created_at))][keys.indexOf(seriesOf(d))] += Math.abs(d.amount_cents);
  const totals = keys.map((_, s) => grid.reduce((n, row) => n + row[s], 0));
  const kept = keys.map((_, s) => s).filter((s) => totals[s] > 0);
  return {
    days,
    series: kept.map((s) => ({
      key: keys[s],
      kind: keys[s] === OTHER_ACTIONS ? "other" : keys[s] === NOT_ACTIONS ? "not-action" : "action",
      totalCents: totals[s],
    })),
    cents: grid.map((row) => kept.map((s) => row[s])),
  };
}
