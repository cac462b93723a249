/**
 * The page Stripe sends the browser back to after a payment (#/billing/return?payment_intent=…). It
 * asks the service to confirm the intent: `confirm_payment` is what credits, once however often it is
 * called, so a reload or a second visit never credits twice. Stripe's `redirect_status` is a hint in
 * a URL and only chooses the words shown while the answer is on its way.
 */
import { useEffect, useRef, useState } from "react";
import { billingApi, describeError, type Session } from "../api";
import type { PaymentReturn as Params } from "../paymentReturn";
import { Loading } from "./ui";

type Confirmed = Awaited<ReturnType<ReturnType<typeof billingApi>["confirm"]>>;
type Outcome =
  | { kind: "waiting" }
  | { kind: "credited"; answer: Confirmed }
  | { kind: "processing"; answer: Confirmed }
  | { kind: "refused"; title: string; explanation: string; code: string; status?: number };

/** A crypto payment settles in minutes: ask again at this pace while the page stays open. */
const PROCESSING_POLL_MS = 15_000;

const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;

export function PaymentReturn({
  session,
  params,
  onSettled,
}: {
  session: Session;
  params: Params;
  onSettled: () => void;
}) {
  const [outcome, setOutcome] = useState<Outcome>({ kind: "waiting" });
  const { paymentIntentId } = params;
  // Kept in a ref: a new callback from the parent must not send confirm_payment again.
  const settled = useRef(onSettled);
  settled.current = onSettled;

  useEffect(() => {
    const billing = billingApi(session.sigil);
    let current = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ask = () =>
      billing.confirm(paymentIntentId).then(
        (answer) => {
          if (!current) return;
          if (answer.status === "processing") {
            setOutcome({ kind: "processing", answer });
            timer = setTimeout(ask, PROCESSING_POLL_MS);
            return;
          }
          setOutcome({ kind: "credited", answer });
          settled.current();
        },
        (e: unknown) => current && setOutcome(refusal(e)),
      );
    void ask();
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [session, paymentIntentId]);

  return (
    <section className="card" aria-labelledby="return-title" data-testid="payment-return">
      <h2 id="return-title">Payment result</h2>
      <p className="muted">
        Payment <code>{paymentIntentId}</code>
      </p>
      {outcome.kind === "waiting" ? (
        <Loading
          what={
            params.redirectStatus === "failed"
              ? "what the payment processor says"
              : "the payment's confirmation"
          }
        />
      ) : null}
      {outcome.kind === "credited" ? (
        <p role="status" data-testid="payment-credited">
          Payment received: {dollars(outcome.answer.credited_cents)} credited. Balance{" "}
          {outcome.answer.balance_display}.
        </p>
      ) : null}
      {outcome.kind === "processing" ? (
        <p role="status">
          Payment received, waiting for its confirmation (a crypto payment takes a few minutes). Nothing is
          credited yet; this page checks again every {PROCESSING_POLL_MS / 1000} seconds, and the account is
          credited even if you close it.
        </p>
      ) : null}
      {outcome.kind === "refused" ? (
        <div className="error" role="alert" data-testid="payment-refused">
          <p>
            <strong>{outcome.title}</strong> {outcome.explanation}
          </p>
          <p>
            <code className="code">{outcome.code}</code>
            {outcome.status ? <span className="muted"> (HTTP {outcome.status})</span> : null}
          </p>
        </div>
      ) : null}
      <p>
        <a href="#/billing">Back to billing</a>
      </p>
    </section>
  );
}

/** confirm_payment's refusals as a sentence that says what happened and what to do. */
function refusal(e: unknown): Outcome {
  const shown = describeError(e);
  const reason = typeof shown.details?.reason === "string" ? shown.details.reason : null;
  const base = { kind: "refused" as const, code: shown.code, status: shown.status };
  switch (shown.code) {
    case "payment_failed":
      return {
        ...base,
        title: "The payment failed.",
        explanation: `${reason ? reason + " " : ""}Nothing was charged and nothing was credited; start a new payment to try again.`,
      };
    case "payment_not_completed":
      return {
        ...base,
        title: "The payment was not completed.",
        explanation:
          "It was left before the card or wallet step finished. Nothing was charged and nothing was credited.",
      };
    case "payment_canceled":
      return {
        ...base,
        title: "The payment was canceled.",
        explanation: "Nothing was credited; start a new payment.",
      };
    case "payment_intent_not_found":
      return {
        ...base,
        title: "This account has no such payment.",
        explanation: "Check that you are signed in with the account that paid.",
      };
    default:
      return { ...base, title: "The payment could not be confirmed yet.", explanation: shown.message };
  }
}
