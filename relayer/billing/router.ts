import { toApiError } from "../http/errorHandler";
import express, {
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
  type Router,
} from "express";
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { ApiError, isApiError } from "../errors";
import type { Ledger } from "./ledger";
import type { Metering, Principal, Prices } from "./metering";
import { CREDIT_PACKAGES, formatCents } from "./money";
import { intentNotFound } from "./paymentErrors";
import type { Payments } from "./payments";
import { type PaymentProcessor, ProcessorError } from "./processor";
import { type SimulatedAction, SimulatedProcessor } from "./simulatedProcessor";

export interface RouterDeps {
  ledger: Ledger;
  metering: Metering;
  payments: Payments;
  processor: PaymentProcessor;
  prices: Prices;
  logger?: Logger;
}

const SIMULATED_ACTIONS: readonly SimulatedAction[] = ["succeed", "fail", "process", "cancel"];
const MAX_PAGE_SIZE = 100;
const DEFAULT_PAGE_SIZE = 20;

/**
 * /core/v1/billing. Mounted before the relayer's JSON parser, so it parses its own bodies: the
 * webhook needs the raw bytes for the signature check, the rest take small JSON bodies.
 */
export function buildRouter(deps: RouterDeps, requireAccountKey: RequestHandler): Router {
  const { ledger, metering, payments, processor, prices } = deps;
  const r = express.Router();
  const json = express.json({ limit: "16kb", type: () => true });
  const auth: RequestHandler[] = [requireAccountKey, requireAccountPrincipal];

  r.get("/stripe_config", (_req, res) => {
    res.json({ publishable_key: processor.publishableKey(), mode: processor.kind });
  });

  r.get("/packages", (_req, res) => {
    res.json({
      items: CREDIT_PACKAGES.map((p) => ({
        ...p,
        credits: p.amount_cents,
        price_display: formatCents(p.amount_cents),
      })),
      minimum_payment_cents: prices.minimum_payment_cents,
      prices: {
        write_cents: prices.write_cents,
        execution_cents_per_second: prices.execution_cents_per_second,
        pin_cents_per_100kb: prices.pin_cents_per_100kb,
        read_cents: 0,
      },
    });
  });

  r.post("/webhook", express.raw({ type: () => true, limit: "512kb" }), async (req, res) => {
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    let event;
    try {
      event = processor.parseWebhook(raw, req.get("stripe-signature"));
    } catch (e) {
      if (e instanceof ProcessorError && e.kind === "invalid_signature") {
        throw new ApiError(
          "invalid_webhook_signature",
          "the Stripe-Signature header does not verify against the raw body",
        );
      }
      if (e instanceof ProcessorError && e.kind === "unsupported") {
        throw new ApiError(
          "webhook_not_configured",
          "this deployment does not accept payment webhooks (no signing secret, or the simulated processor)",
        );
      }
      throw e;
    }
    const outcome = await payments.handleEvent(event);
    res.json({ received: true, event_id: event.id, outcome });
  });

  r.get("/balance", ...auth, async (_req, res) => {
    const view = await metering.balanceView(principal(res).accountId);
    // reserved_cents: what runs in flight hold; balance_cents − reserved_cents is what can be spent.
    res.json({
      balance_cents: view.balance_cents,
      balance_display: formatCents(view.balance_cents),
      reserved_cents: view.reserved_cents,
    });
  });

  r.post("/create_payment_intent", ...auth, json, async (req, res) => {
    const body = objectBody(req);
    const out = await payments.createIntent(
      principal(res).accountId,
      body.amount_cents,
      req.get("idempotency-key") || undefined,
    );
    res.json(out);
  });

  r.post("/confirm_payment", ...auth, json, async (req, res) => {
    const out = await payments.confirm(principal(res).accountId, objectBody(req).payment_intent_id);
    res.status(out.httpStatus).json(out.body);
  });

  r.post("/cancel_payment", ...auth, json, async (req, res) => {
    res.json(await payments.cancel(principal(res).accountId, objectBody(req).payment_intent_id));
  });

  r.get("/history", ...auth, async (req, res) => {
    const pageNumber = intParam(req.query.page_number, 0, 0, Number.MAX_SAFE_INTEGER, "page_number");
    const pageSize = intParam(req.query.page_size, DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE, "page_size");
    await metering.flush();
    const { items, total } = await ledger.history(principal(res).accountId, pageNumber, pageSize);
    res.json({ items, page_number: pageNumber, page_size: pageSize, total });
  });

  // Dev-only: exists only while the simulated processor is active, never with Stripe.
  if (processor instanceof SimulatedProcessor) {
    r.post("/simulated/intents/:id/:action", ...auth, async (req, res) => {
      const id = String(req.params.id);
      const action = String(req.params.action) as SimulatedAction;
      if (!SIMULATED_ACTIONS.includes(action)) {
        throw new ApiError(
          "invalid_simulated_action",
          `action must be one of ${SIMULATED_ACTIONS.join(", ")}`,
          { details: { action } },
        );
      }
      if ((await payments.intentAccount(id)) !== principal(res).accountId) throw intentNotFound(id);
      let intent;
      try {
        intent = await processor.transition(id, action);
      } catch (e) {
        if (e instanceof ProcessorError && e.kind === "unexpected_state") {
          throw new ApiError("invalid_simulated_transition", e.message, {
            details: { payment_intent_id: id, action },
          });
        }
        throw e;
      }
      // What Stripe's webhook would do next: record the new state, crediting a success.
      await payments.observeNow(intent);
      res.json({ payment_intent_id: id, status: intent.status, last_error: intent.lastError });
    });
  }

  r.use((err: unknown, req: Request, res: Response, next: NextFunction) =>
    renderError(err, req, res, next, deps.logger),
  );
  return r;
}

const requireAccountPrincipal: RequestHandler = (_req, res, next) => {
  const p = res.locals.principal as Principal | undefined;
  if (!p) return next(new Error("billing router: requireAccountKey did not set res.locals.principal"));
  if (p.kind !== "account")
    return next(new ApiError("owner_only", "billing endpoints take the account key, not a usage key"));
  next();
};

function principal(res: Response): Principal {
  return res.locals.principal as Principal;
}

function objectBody(req: Request): Record<string, unknown> {
  const b = req.body as unknown;
  if (b === null || b === undefined || typeof b !== "object" || Array.isArray(b)) {
    throw new ApiError("invalid_request", "the request body must be a JSON object");
  }
  return b as Record<string, unknown>;
}

function intParam(v: unknown, dflt: number, min: number, max: number, name: string): number {
  if (v === undefined) return dflt;
  const n = typeof v === "string" && /^[0-9]{1,15}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ApiError("invalid_pagination", `${name} must be an integer from ${min} to ${max}`, {
      details: { field: name },
    });
  }
  return n;
}

/** The relayer's error format, rendered here because this router runs before the relayer's own handlers. */
function renderError(err: unknown, req: Request, res: Response, _next: NextFunction, logger?: Logger): void {
  let apiErr: ApiError;
  const bodyErr = err as { type?: string; status?: number };
  // Client mistakes express or the body parser throw (bad JSON, a path with broken percent-encoding such
  // as /simulated/intents/%zz/…) get the relayer's own typed answers; only the rest is a 500.
  const clientMistake = isApiError(err) ? undefined : toApiError(err);
  if (isApiError(err)) apiErr = err;
  else if (bodyErr?.type === "entity.parse.failed")
    apiErr = new ApiError("invalid_json", "the request body is not valid JSON");
  else if (bodyErr?.type === "entity.too.large")
    apiErr = new ApiError("payload_too_large", "the request body is too large");
  else if (clientMistake) apiErr = clientMistake;
  else {
    logger?.error({ err, path: req.path }, "billing: unexpected error");
    apiErr = new ApiError("internal_error", "internal error");
  }
  let requestId =
    (res.getHeader("x-request-id") as string | undefined) ?? (res.locals.requestId as string | undefined);
  if (!requestId) {
    requestId = randomUUID();
    res.setHeader("X-Request-Id", requestId);
  }
  if (apiErr.retryAfter !== undefined) res.setHeader("Retry-After", String(apiErr.retryAfter));
  res.status(apiErr.status).json({ error: apiErr.toJSON(), request_id: requestId });
}
