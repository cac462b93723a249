import { ApiError } from "../errors";
import { type ProcessorIntent, ProcessorError } from "./processor";

/** Validation of payment requests and the ApiErrors that payment states and processor failures become. */

export function validateAmount(
  amount: unknown,
  limits: { minimumCents: number; maximumCents: number },
): void {
  if (typeof amount !== "number" || !Number.isSafeInteger(amount)) {
    throw new ApiError("invalid_request", "amount_cents must be an integer number of cents", {
      details: { field: "amount_cents" },
    });
  }
  if (amount < limits.minimumCents) {
    throw new ApiError("amount_below_minimum", `the minimum payment is ${limits.minimumCents} cents`, {
      details: { amount_cents: amount, minimum_cents: limits.minimumCents },
    });
  }
  if (amount > limits.maximumCents) {
    throw new ApiError("amount_above_maximum", `the maximum payment is ${limits.maximumCents} cents`, {
      details: { amount_cents: amount, maximum_cents: limits.maximumCents },
    });
  }
}

export function toApiError(e: unknown): unknown {
  if (!(e instanceof ProcessorError)) return e;
  switch (e.kind) {
    case "unexpected_state":
    case "rejected":
      return new ApiError(
        "payment_processor_error",
        "the payment processor refused the request; check the billing configuration",
        {
          details: { processor_code: e.processorCode ?? null },
          cause: e,
        },
      );
    default:
      return new ApiError(
        "payment_processor_unavailable",
        "the payment processor could not be reached; try again",
        { retryAfter: 5, cause: e },
      );
  }
}

export function validateIntentId(id: unknown): string {
  if (typeof id !== "string" || !/^pi_[A-Za-z0-9_]{1,200}$/.test(id)) {
    throw new ApiError("invalid_request", "payment_intent_id must be a PaymentIntent id (pi_…)", {
      details: { field: "payment_intent_id" },
    });
  }
  return id;
}

export function intentNotFound(id: string): ApiError {
  return new ApiError("payment_intent_not_found", `no payment intent ${id} for this account`, {
    details: { payment_intent_id: id },
  });
}

export function stateError(intent: ProcessorIntent): ApiError {
  const details = { payment_intent_id: intent.id, status: intent.status };
  if (intent.status === "canceled") {
    return new ApiError(
      "payment_canceled",
      "this payment was canceled and will not be credited; create a new payment intent",
      { details },
    );
  }
  if (intent.status === "requires_payment_method" && intent.lastError) {
    return new ApiError(
      "payment_failed",
      `the payment failed: ${intent.lastError} No credits were applied; retry with a new payment`,
      {
        details: { ...details, reason: intent.lastError },
      },
    );
  }
  return new ApiError(
    "payment_not_completed",
    "the payment has not been completed yet; finish it with the processor, then confirm again",
    {
      details,
    },
  );
}
