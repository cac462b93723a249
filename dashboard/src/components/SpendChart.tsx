/**
 * Spend over time: one stacked bar per day, one colour per operation (executions, each kind of
 * write), drawn as plain SVG from the billing history. Loaded on demand with the Billing page's chart.
 * The ledger names the operation of a charge, not the action: a per-action split needs the CID in the
 * ledger first.
 */
import type { BillingHistoryItem } from "../api";

const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

export default function SpendChart({ items }: { items: BillingHistoryItem[] }) {
  const debits = items.filter((i) => i.type === "debit");
  const days = [
    ...new Set(debits.map((d) => new Date(d.created_at * 1000).toISOString().slice(0, 10))),
  ].sort();
  const operations = [...new Set(debits.map((d) => d.operation))].sort();
  const cents = (day: string, op: string) =>
    debits
      .filter((d) => d.operation === op && new Date(d.created_at * 1000).toISOString().slice(0, 10) === day)
      .reduce((n, d) => n + Math.abs(d.amount_cents), 0);
  const totals = days.map((day) => operations.reduce((n, op) => n + cents(day, op), 0));
  const max = Math.max(1, ...totals);
  const width = 60 * Math.max(days.length, 1) + 40;
  const height = 160;
  const summary = days.map((day, i) => `${day}: ${totals[i]} cents`).join("; ");
  if (!debits.length) return <p className="empty">No spending yet.</p>;
  return (
    <figure className="chart">
      <svg width={width} height={height + 30} role="img" aria-label={`Spend per day. ${summary}`}>
        {days.map((day, i) => {
          let y = height;
          return (
            <g key={day} transform={`translate(${30 + i * 60},0)`}>
              {operations.map((op, k) => {
                const h = (cents(day, op) / max) * (height - 10);
                y -= h;
                return h ? (
                  <rect key={op} x={0} y={y} width={40} height={h} fill={COLOURS[k % COLOURS.length]} />
                ) : null;
              })}
              <text x={20} y={height + 16} textAnchor="middle" fontSize="10" fill="currentColor">
                {day.slice(5)}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption>
        {operations.map((op, k) => (
          <span key={op} className="legend">
            <span className="swatch" style={{ background: COLOURS[k % COLOURS.length] }} /> {op}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
