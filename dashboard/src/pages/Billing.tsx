/**
 * Credits. With the Stripe processor, "Continue to payment" creates a payment intent and shows
 * Stripe's Payment Element (its own chunk, loaded then); Stripe sends the browser back to the return
 * view (#/billing/return), which confirms the intent. With the simulated processor (the default of
 * `npm start`) the payment form is marked "simulated": Pay moves the intent on through the dev-only
 * endpoint and then calls confirm_payment, exactly as the return view does. Confirming runs once per
 * click burst (useAction), and the service credits an intent once however often it is confirmed.
 */
import { lazy, Suspense, useCallback, useState } from "react";
import { billingApi, type Session } from "../api";
import { PaymentReturn } from "../components/PaymentReturn";
import { DataTable } from "../components/DataTable";
import { ErrorNote, Field, Loading, short } from "../components/ui";
import { readPaymentReturn } from "../paymentReturn";
import { useAction, useLoad } from "../useLoad";

// The chart is its own chunk: loaded when the history has arrived, not with the first page.
const SpendChart = lazy(() => import("../components/SpendChart"));
// Stripe's React bindings and loader: loaded when a Stripe payment starts.
const StripePayment = lazy(() => import("../components/StripePayment"));

/** The service's limits for one payment (create_payment_intent, docs/billing.md). */
const MINIMUM_CENTS = 500;
const MAXIMUM_CENTS = 1_000_000;
const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;

/** The inline error for a custom amount, or null when the service would accept it. */
function amountError(text: string): string | null {
  const t = text.trim();
  if (!/^\d{1,9}$/.test(t)) return "A whole number of cents, e.g. 500.";
  if (Number(t) < MINIMUM_CENTS) return `At least ${MINIMUM_CENTS} cents (${dollars(MINIMUM_CENTS)}).`;
  if (Number(t) > MAXIMUM_CENTS)
    return `At most ${MAXIMUM_CENTS.toLocaleString("en-US")} cents (${dollars(MAXIMUM_CENTS)}) in one payment.`;
  return null;
}

export function Billing({ session, hash }: { session: Session; hash: string }) {
  const billing = billingApi(session.sigil);
  const balance = useLoad(() => billing.balance());
  const mode = useLoad(() => billing.mode());
  const history = useLoad(() => billing.history());
  const [amount, setAmount] = useState(String(MINIMUM_CENTS));
  const [amountErrorText, setAmountError] = useState<string | null>(null);
  const [intent, setIntent] = useState<{
    payment_intent_id: string;
    client_secret: string;
    amount_cents: number;
  } | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const start = useAction();
  const pay = useAction();
  const cancel = useAction();
  const simulated =
    mode.data?.mode === "simulated" || (mode.data?.publishable_key ?? "").startsWith("pk_sim_");
  const returned = readPaymentReturn(hash);
  const { reload: reloadBalance } = balance;
  const { reload: reloadHistory } = history;
  const refresh = useCallback(() => {
    reloadBalance();
    reloadHistory();
  }, [reloadBalance, reloadHistory]);

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
      {returned ? <PaymentReturn session={session} params={returned} onSettled={refresh} /> : null}
      {mode.data && !returned && !intent ? (
        <section className="card" aria-labelledby="topup-title">
          <h2 id="topup-title">Add credits</h2>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              const t = amount.trim();
              const bad = amountError(t);
              setAmountError(bad);
              if (bad) return;
              setDone(null);
              void start.run(() => billing.createIntent(Number(t))).then((r) => r && setIntent(r));
            }}
          >
            <div className="row">
              <button type="button" onClick={() => setAmount(String(MINIMUM_CENTS))}>
                Starter: {dollars(MINIMUM_CENTS)}
              </button>
            </div>
            <Field
              label="Amount in cents"
              error={amountErrorText}
              hint={`${MINIMUM_CENTS} to ${MAXIMUM_CENTS.toLocaleString("en-US")}`}
            >
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
      {intent && !simulated && mode.data ? (
        <section className="card" aria-labelledby="pay-title">
          <h2 id="pay-title">Pay {dollars(intent.amount_cents)}</h2>
          <p className="muted">Card or crypto, through Stripe. You come back here when it is done.</p>
          <Suspense fallback={<Loading what="Stripe's payment form" />}>
            <StripePayment
              publishableKey={mode.data.publishable_key}
              clientSecret={intent.client_secret}
              amountDisplay={dollars(intent.amount_cents)}
              theme={document.documentElement.dataset.theme === "dark" ? "dark" : "light"}
            />
          </Suspense>
          <div className="row">
            <button
              type="button"
              disabled={cancel.pending}
              onClick={() =>
                void cancel
                  .run(() => billing.cancel(intent.payment_intent_id))
                  .then((r) => r && setIntent(null))
              }
            >
              Cancel this payment
            </button>
          </div>
          <ErrorNote error={cancel.error} />
        </section>
      ) : null}
      {intent && simulated ? (
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
                    refresh();
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
      <DataTable
        rows={history.data?.items}
        loading={history.loading}
        loadingWhat="history"
        errorNote={<ErrorNote error={history.error} />}
        empty="No credits or charges yet."
        caption="Billing history"
        rowKey={(h) => h.id}
        columns={[
          { header: "When", cell: (h) => new Date(h.created_at * 1000).toLocaleString() },
          {
            header: "What",
            cell: (h) => (
              <>
                {operationLabel(h.operation)}
                {h.action_cid ? (
                  <>
                    {" "}
                    <code title={h.action_cid}>{short(h.action_cid, 8)}</code>
                  </>
                ) : null}
              </>
            ),
          },
          {
            header: "Amount",
            cell: (h) => (
              <>
                {h.type === "debit" ? "−" : "+"}
                {dollars(Math.abs(h.amount_cents))}
              </>
            ),
          },
          { header: "Balance after", cell: (h) => dollars(h.balance_after_cents) },
        ]}
      />
    </>
  );
}

const OPERATIONS: Record<string, string> = {
  signup_credit: "Sign-up credit",
  top_up: "Top-up",
  execution: "Action run",
  pin: "Pinned an action",
  create_pkp: "Created a PKP",
  create_group: "Created a group",
  delete_group: "Deleted a group",
  add_usage_api_key: "Created a usage key",
  update_usage_api_key: "Updated a usage key",
  update_usage_api_key_metadata: "Renamed a usage key",
  remove_usage_api_key: "Revoked a usage key",
  rotate_usage_api_key: "Rotated a usage key",
};

/** A ledger operation for people: "Sign-up credit", not signup_credit. */
export function operationLabel(op: string): string {
  const known = OPERATIONS[op];
  if (known) return known;
  const words = op.replace(/[_/]+/g, " ").trim();
  return words ? words[0].toUpperCase() + words.slice(1) : op;
}
