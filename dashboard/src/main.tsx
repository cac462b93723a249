import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { scrubPaymentReturnUrl } from "./paymentReturn";
import "./styles.css";

// Before anything renders or loads: a Stripe return URL's client secret must not stay in the history.
scrubPaymentReturnUrl();
// And on a change of the hash alone (no reload: a typed or pasted return URL in an open tab), before
// the app's own listener (registered later, so called later) reads it.
window.addEventListener("hashchange", () => scrubPaymentReturnUrl());

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
