import Stripe from "stripe";
import {
  type CreateIntentRequest,
  type IntentStatus,
  type PaymentProcessor,
  type ProcessorEvent,
  type ProcessorIntent,
  ProcessorError,
} from "./processor";

export interface StripeProcessorOptions {
  secretKey: string;
  publishableKey: string;
  /** The endpoint's signing secret (whsec_…); webhooks are refused without it. */
  webhookSecret?: string;
  /**
   * Payment methods offered on every intent. Default ["card", "crypto"]: an explicit list, not
   * automatic_payment_methods, so that a Stripe account without crypto enabled fails loudly at
   * create_payment_intent instead of silently offering card only (see docs/billing.md).
   * Pass "automatic" to let the Stripe dashboard decide.
   */
  paymentMethodTypes?: string[] | "automatic";
  /** Connection overrides (tests point the real SDK at a local stub). */
  host?: string;
  port?: number;
  protocol?: "http" | "https";
  maxNetworkRetries?: number;
  timeoutMs?: number;
}

/** The Stripe implementation: PaymentIntents through the official SDK. */
export class StripeProcessor implements PaymentProcessor {
  readonly kind = "stripe" as const;
  private readonly stripe: Stripe;
  private readonly opts: StripeProcessorOptions;

  constructor(opts: StripeProcessorOptions) {
    if (!/^(sk|rk)_/.test(opts.secretKey))
      throw new Error("StripeProcessor: secretKey must be a Stripe secret key (sk_… or rk_…)");
    if (!/^pk_/.test(opts.publishableKey))
      throw new Error("StripeProcessor: publishableKey must start with pk_");
    this.opts = opts;
    this.stripe = new Stripe(opts.secretKey, {
      host: opts.host,
      port: opts.port,
      protocol: opts.protocol,
      // Safe to retry: every mutating call carries our own idempotency key.
      maxNetworkRetries: opts.maxNetworkRetries ?? 2,
      timeout: opts.timeoutMs ?? 20_000,
    });
  }

  publishableKey(): string {
    return this.opts.publishableKey;
  }

  async createIntent(req: CreateIntentRequest): Promise<ProcessorIntent> {
    const methods = this.opts.paymentMethodTypes ?? ["card", "crypto"];
    const params: Stripe.PaymentIntentCreateParams = {
      amount: req.amountCents,
      currency: req.currency,
      metadata: req.metadata,
      ...(methods === "automatic"
        ? { automatic_payment_methods: { enabled: true } }
        : { payment_method_types: methods }),
    };
    const pi = await this.call(() =>
      this.stripe.paymentIntents.create(params, { idempotencyKey: req.idempotencyKey }),
    );
    return toIntent(pi);
  }

  async retrieveIntent(id: string): Promise<ProcessorIntent | null> {
    try {
      // GET is idempotent by nature; Stripe ignores idempotency keys on GET requests.
      return toIntent(await this.stripe.paymentIntents.retrieve(id));
    } catch (e) {
      if (e instanceof Stripe.errors.StripeInvalidRequestError && e.code === "resource_missing") return null;
      throw classify(e);
    }
  }

  async cancelIntent(id: string, idempotencyKey: string): Promise<ProcessorIntent> {
    const pi = await this.call(() => this.stripe.paymentIntents.cancel(id, {}, { idempotencyKey }));
    return toIntent(pi);
  }

  parseWebhook(rawBody: Buffer, signatureHeader: string | undefined): ProcessorEvent {
    if (!this.opts.webhookSecret)
      throw new ProcessorError("unsupported", "no webhook signing secret is configured");
    if (!signatureHeader) throw new ProcessorError("invalid_signature", "missing Stripe-Signature header");
    let event: Stripe.Event;
    try {
      event = this.stripe.webhooks.constructEvent(rawBody, signatureHeader, this.opts.webhookSecret);
    } catch (e) {
      throw new ProcessorError("invalid_signature", "webhook signature does not verify", undefined, {
        cause: e,
      });
    }
    const obj = (event.data as { object?: { object?: string } } | undefined)?.object;
    return {
      id: event.id,
      type: event.type,
      created: event.created,
      intent:
        obj && obj.object === "payment_intent" ? toIntent(obj as unknown as Stripe.PaymentIntent) : null,
    };
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw classify(e);
    }
  }
}

function toIntent(pi: Stripe.PaymentIntent): ProcessorIntent {
  return {
    id: pi.id,
    status: pi.status as IntentStatus,
    amountCents: pi.amount,
    amountReceivedCents: pi.amount_received ?? 0,
    currency: pi.currency,
    clientSecret: pi.client_secret ?? null,
    metadata: (pi.metadata ?? {}) as Record<string, string>,
    lastError: pi.last_payment_error
      ? (pi.last_payment_error.message ?? pi.last_payment_error.code ?? "payment failed")
      : null,
  };
}

/** Maps SDK errors onto the few kinds billing distinguishes. The SDK's message never contains the secret key. */
function classify(e: unknown): ProcessorError {
  if (e instanceof ProcessorError) return e;
  if (e instanceof Stripe.errors.StripeError) {
    if (e.code === "payment_intent_unexpected_state")
      return new ProcessorError("unexpected_state", e.message, e.code, { cause: e });
    if (
      e instanceof Stripe.errors.StripeInvalidRequestError ||
      e instanceof Stripe.errors.StripeIdempotencyError
    ) {
      return new ProcessorError("rejected", e.message, e.code ?? e.rawType ?? e.type, { cause: e });
    }
    return new ProcessorError("unavailable", e.message, e.code ?? e.rawType ?? e.type, { cause: e });
  }
  return new ProcessorError("unavailable", e instanceof Error ? e.message : String(e), undefined, {
    cause: e,
  });
}
