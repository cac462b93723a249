import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { scrubPaymentReturnUrl } from "./paymentReturn";
import "./styles.css";

// Before anything renders or loads: a Stripe return URL's client secret must not stay in the history.
scrubPaymentReturnUrl();

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
