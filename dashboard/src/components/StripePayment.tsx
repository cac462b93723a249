/**
 * Stripe's Payment Element for one payment intent: the methods the intent allows (card and crypto by
 * default, docs/billing.md), then `stripe.confirmPayment`, which sends the browser to Stripe (3-D
 * Secure, a crypto wallet) and back to the return page (#/billing/return), where `confirm_payment`
 * credits the account. Its own chunk, loaded only when a Stripe payment starts.
 *
 * Stripe.js must come from https://js.stripe.com (Stripe's terms; the Content-Security-Policy allows
 * it when the Stripe processor is on). When it cannot be loaded (offline, blocked by an extension or a
 * proxy) the page says so and names the command-line path, rather than rendering nothing.
 */
import { Elements, PaymentElement, useElements, useStripe } from "@stripe/react-stripe-js";
import type { Stripe } from "@stripe/stripe-js";
import { loadStripe } from "@stripe/stripe-js/pure";
import { useEffect, useState } from "react";
import { returnUrl } from "../paymentReturn";
import { Loading } from "./ui";

export interface StripePaymentProps {
  publishableKey: string;
  clientSecret: string;
  amountDisplay: string;
  theme: "light" | "dark";
}

type Loaded = { state: "loading" } | { state: "ready"; stripe: Stripe } | { state: "failed"; why: string };

export default function StripePayment(props: StripePaymentProps) {
  const [loaded, setLoaded] = useState<Loaded>({ state: "loading" });
  useEffect(() => {
    let current = true;
    loadStripe(props.publishableKey).then(
      (stripe) =>
        current &&
        setLoaded(
          stripe ? { state: "ready", stripe } : { state: "failed", why: "Stripe.js is not available here" },
        ),
      (e: unknown) =>
        current && setLoaded({ state: "failed", why: e instanceof Error ? e.message : String(e) }),
    );
    return () => {
      current = false;
    };
  }, [props.publishableKey]);

  if (loaded.state === "loading") return <Loading what="Stripe's payment form" />;
  if (loaded.state === "failed") return <StripeUnavailable why={loaded.why} />;
  return (
    <Elements
      stripe={loaded.stripe}
      options={{
        clientSecret: props.clientSecret,
        appearance: { theme: props.theme === "dark" ? "night" : "stripe" },
      }}
    >
      <PayForm amountDisplay={props.amountDisplay} />
    </Elements>
  );
}

/** What to do when Stripe's script cannot be had: the same payment, from a terminal. */
export function StripeUnavailable({ why }: { why: string }) {
  return (
    <div className="error" role="alert" data-testid="stripe-unavailable">
      <p>
        Stripe&apos;s payment form could not be loaded from js.stripe.com ({why}). Check the connection or
        anything that blocks scripts from js.stripe.com, then try again.
      </p>
      <p>
        Or from a terminal: <code>npx sigil billing top-up --amount 500</code> starts a payment for any
        browser or program that can reach Stripe, and <code>npx sigil billing confirm &lt;id&gt;</code>{" "}
        credits it.
      </p>
    </div>
  );
}

function PayForm({ amountDisplay }: { amountDisplay: string }) {
  const stripe = useStripe();
  const elements = useElements();
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        if (!stripe || !elements || pending) return;
        setPending(true);
        setError(null);
        // On success the browser leaves for the return page; an answer here is a problem to show
        // (a declined card, an incomplete form), and the form stays for another try.
        void stripe
          .confirmPayment({ elements, confirmParams: { return_url: returnUrl(window.location) } })
          .then((r) => {
            if (r.error) setError(r.error.message ?? r.error.type);
          })
          .finally(() => setPending(false));
      }}
    >
      <PaymentElement />
      <button type="submit" className="primary" disabled={!stripe || !elements || pending}>
        {pending ? "Paying…" : `Pay ${amountDisplay}`}
      </button>
      {error ? (
        <p className="error" role="alert">
          {error}
        </p>
      ) : null}
    </form>
  );
}
