import type { DataLayer } from "../db";

/**
 * The payment processor seen by billing: Stripe's PaymentIntent model, reduced to what crediting
 * needs. Both implementations (StripeProcessor, SimulatedProcessor) speak it.
 */

/** Stripe's PaymentIntent statuses. A failed attempt returns to requires_payment_method with a lastError. */
export type IntentStatus =
  | "requires_payment_method"
  | "requires_confirmation"
  | "requires_action"
  | "processing"
  | "requires_capture"
  | "canceled"
  | "succeeded";

export interface ProcessorIntent {
  id: string;
  status: IntentStatus;
  amountCents: number;
  /** What the processor actually collected (Stripe's amount_received); 0 until it succeeds. */
  amountReceivedCents: number;
  currency: string;
  clientSecret: string | null;
  metadata: Record<string, string>;
  /** The message of the last failed payment attempt, if any. */
  lastError: string | null;
}

export interface ProcessorEvent {
  id: string;
  type: string;
  /** Seconds since the epoch, as Stripe sends it; orders status updates that arrive out of order. */
  created: number;
  /** Set for payment_intent.* events. */
  intent: ProcessorIntent | null;
}

export interface CreateIntentRequest {
  amountCents: number;
  currency: "usd";
  metadata: Record<string, string>;
  /** Sent as the Idempotency-Key: a retried create returns the same intent instead of a second one. */
  idempotencyKey: string;
}

export interface PaymentProcessor {
  readonly kind: "stripe" | "simulated";
  /** Shown by GET billing/stripe_config; never a secret. */
  publishableKey(): string;
  createIntent(req: CreateIntentRequest): Promise<ProcessorIntent>;
  /** null when the processor does not know the id. */
  retrieveIntent(id: string): Promise<ProcessorIntent | null>;
  cancelIntent(id: string, idempotencyKey: string): Promise<ProcessorIntent>;
  /** Verifies and decodes a webhook delivery; throws ProcessorError("invalid_signature") when it does not verify. */
  parseWebhook(rawBody: Buffer, signatureHeader: string | undefined): ProcessorEvent;
  /** Called once by createBilling with the billing database (the simulated processor keeps its intents there). */
  attach?(db: DataLayer): void;
}

/** A processor failure, classified so the HTTP layer can choose a status without parsing messages. */
export class ProcessorError extends Error {
  constructor(
    readonly kind: "unavailable" | "invalid_signature" | "unexpected_state" | "rejected" | "unsupported",
    message: string,
    readonly processorCode?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "ProcessorError";
  }
}
