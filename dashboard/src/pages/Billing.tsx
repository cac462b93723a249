/**
 * Credits. With the simulated processor (the default of `npm start`) the payment form is marked
 * "simulated": Pay moves the intent on through the dev-only endpoint and then calls confirm_payment,
 * exactly as a real payment's return page does. Confirming runs once per click burst (useAction), and
 * the service credits an intent once however often it is confirmed.
 */
import { lazy, Suspense, useState } from "react";
import { billingApi, type Session } from "../api";
import { Empty, ErrorNote, Field, Loading } from "../components/ui";
import { useAction, useLoad } from "../useLoad";

// The chart is its own chunk: loaded when the history has arrived, not with the first page.
const SpendChart = lazy(() => import("../components/SpendChart"));

const MINIMUM_CENTS = 500;
const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;

export function Billing({ session }: { session: Session }) {
  const billing = billingApi(session.sigil);
  const balance = useLoad(() => billing.balance());
  const mode = useLoad(() => billing.mode());
  const history = useLoad(() => billing.history());
  const [amount, setAmount] = useState(String(MINIMUM_CENTS));
  const [amountError, setAmountError] = useState<string | null>(null);
  const [intent, setIntent] = useState<{ payment_intent_id: string; amount_cents: number } | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const start = useAction();
  const pay = useAction();
  const simulated =
    mode.data?.mode === "simulated" || (mode.data?.publishable_key ?? "").startsWith("pk_sim_");

  return (
    <>
      <dl className="stats">
        <div>
          <dt>Balance</dt>
          <dd data-testid="balance">{balance.data ? balance.data.balance_display : "…"}</dd>
        </div>
        <div>
          <dt>Payments</dt>
          <dd>{mode.data ? (simulated ? "simulated (no money moves)" : "Stripe") : "…"}</dd>
        </div>
      </dl>
      <ErrorNote error={balance.error ?? mode.error} />
      {mode.data && !simulated ? (
        <p className="warning">
          Card payments through Stripe are not in the dashboard yet: use <code>npx sigil billing top-up</code>
          .
        </p>
      ) : null}
      {mode.data && simulated && !intent ? (
        <section className="card" aria-labelledby="topup-title">
          <h2 id="topup-title">Add credits</h2>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              const t = amount.trim();
              if (!/^\d{1,7}$/.test(t) || Number(t) < MINIMUM_CENTS) {
                setAmountError(
                  `At least ${MINIMUM_CENTS} cents (${dollars(MINIMUM_CENTS)}), in whole cents.`,
                );
                return;
              }
              setAmountError(null);
              setDone(null);
              void start.run(() => billing.createIntent(Number(t))).then((r) => r && setIntent(r));
            }}
          >
            <div className="row">
              <button type="button" onClick={() => setAmount(String(MINIMUM_CENTS))}>
                Starter: {dollars(MINIMUM_CENTS)}
              </button>
            </div>
            <Field label="Amount in cents" error={amountError} hint={`Minimum ${MINIMUM_CENTS}`}>
              {(p) => (
                <input
                  {...p}
                  inputMode="numeric"
                  value={amount}
                  onChange={(e) => setAmount(e.target.value)}
                />
              )}
            </Field>
            <button type="submit" className="primary" disabled={start.pending}>
              Continue to payment
            </button>
            <ErrorNote error={start.error} />
          </form>
        </section>
      ) : null}
      {intent ? (
        <section className="card simulated" aria-labelledby="pay-title">
          <h2 id="pay-title">Simulated payment</h2>
          <p>
            <strong>Simulated:</strong> no card, no money. Paying here credits {dollars(intent.amount_cents)}{" "}
            as a real payment would.
          </p>
          <div className="row">
            <button
              type="button"
              className="primary"
              disabled={pay.pending}
              onClick={() =>
                void pay
                  .run(async () => {
                    await billing.simulateSuccess(intent.payment_intent_id);
                    return billing.confirm(intent.payment_intent_id);
                  })
                  .then((r) => {
                    if (!r) return;
                    setIntent(null);
                    setDone(`Credited ${dollars(r.credited_cents ?? intent.amount_cents)}.`);
                    balance.reload();
                    history.reload();
                  })
              }
            >
              {pay.pending ? "Confirming…" : `Pay ${dollars(intent.amount_cents)} (simulated)`}
            </button>
            <button type="button" disabled={pay.pending} onClick={() => setIntent(null)}>
              Cancel
            </button>
          </div>
          <ErrorNote error={pay.error} />
        </section>
      ) : null}
      {done ? <p role="status">{done}</p> : null}
      <h2>Spend over time</h2>
      {history.data ? (
        <Suspense fallback={<Loading what="the chart" />}>
          <SpendChart items={history.data.items} />
        </Suspense>
      ) : null}
      <h2>History</h2>
      {history.loading && !history.data ? <Loading what="history" /> : null}
      <ErrorNote error={history.error} />
      {history.data && history.data.items.length === 0 ? <Empty>No credits or charges yet.</Empty> : null}
      {history.data && history.data.items.length > 0 ? (
        <table>
          <caption className="sr-only">Billing history</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">What</th>
              <th scope="col">Amount</th>
              <th scope="col">Balance after</th>
            </tr>
          </thead>
          <tbody>
            {history.data.items.map((h) => (
              <tr key={h.id}>
                <td>{new Date(h.created_at * 1000).toLocaleString()}</td>
                <td>{h.operation}</td>
                <td>
                  {h.type === "debit" ? "−" : "+"}
                  {dollars(Math.abs(h.amount_cents))}
                </td>
                <td>{dollars(h.balance_after_cents)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </>
  );
}
