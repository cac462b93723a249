/**
 * Spend over time per action: one stacked bar per day, one colour per action (the five that cost the
 * most; the rest as "other actions"), plus writes and pins, drawn as plain SVG from the billing
 * history (spendByAction.ts). Loaded on demand with the Billing page's chart.
 */
import type { BillingHistoryItem } from "../api";
import { spendByAction } from "../spendByAction";
import { short } from "./ui";

const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];
const OTHER_COLOUR = "#7f7f7f";
const NOT_ACTION_COLOUR = "#bcbd22";

export default function SpendChart({ items }: { items: BillingHistoryItem[] }) {
  const { days, series, cents } = spendByAction(items);
  if (!days.length) return <p className="empty">No spending yet.</p>;
  const colour = (s: number) =>
    series[s].kind === "action"
      ? COLOURS[s % COLOURS.length]
      : series[s].kind === "other"
        ? OTHER_COLOUR
        : NOT_ACTION_COLOUR;
  const label = (s: number) => (series[s].kind === "action" ? short(series[s].key, 8) : series[s].key);
  const totals = cents.map((row) => row.reduce((a, b) => a + b, 0));
  const max = Math.max(1, ...totals);
  const width = 60 * days.length + 40;
  const height = 160;
  const summary =
    days.map((day, i) => `${day}: ${totals[i]} cents`).join("; ") +
    ". By action: " +
    series.map((s) => `${s.key} ${s.totalCents} cents`).join("; ");
  return (
    <figure className="chart" data-testid="spend-chart">
      <svg width={width} height={height + 30} role="img" aria-label={`Spend per day and action. ${summary}`}>
        {days.map((day, i) => {
          let y = height;
          return (
            <g key={day} transform={`translate(${30 + i * 60},0)`}>
              {series.map((s, k) => {
                const h = (cents[i][k] / max) * (height - 10);
                y -= h;
                return h ? <rect key={s.key} x={0} y={y} width={40} height={h} fill={colour(k)} /> : null;
              })}
              <text x={20} y={height + 16} textAnchor="middle" fontSize="10" fill="currentColor">
                {day.slice(5)}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption>
        {series.map((s, k) => (
          <span key={s.key} className="legend" title={s.key} data-testid="spend-legend">
            <span className="swatch" style={{ background: colour(k) }} /> {label(k)}: {s.totalCents}¢
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
