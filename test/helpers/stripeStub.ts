/**
 * A local HTTP stand-in for the part of Stripe's API that billing uses (PaymentIntents create,
 * retrieve, cancel), so tests run the REAL `stripe` SDK offline:
 *   new Stripe(key, { host: "127.0.0.1", port: stub.port, protocol: "http" })
 * It checks what the SDK sends (Bearer secret key, Stripe-Version, form encoding, known parameters,
 * Idempotency-Key semantics) and answers in Stripe's shapes and error formats. Status transitions
 * that a customer's bank or a blockchain would cause are driven by the test (succeed, process,
 * fail). Webhook payloads are signed with the real stripe.webhooks.generateTestHeaderString.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import Stripe from "stripe";

export interface StubIntent {
  id: string;
  object: "payment_intent";
  amount: number;
  amount_received: number;
  currency: string;
  status: string;
  client_secret: string;
  metadata: Record<string, string>;
  payment_method_types: string[];
  automatic_payment_methods: { enabled: boolean } | null;
  last_payment_error: { code: string; message: string; type: string } | null;
  canceled_at: number | null;
  cancellation_reason: string | null;
  created: number;
  livemode: false;
}

export interface StubRequest {
  method: string;
  path: string;
  idempotencyKey: string | null;
  body: string;
}

export interface StripeStubOptions {
  secretKey?: string;
  webhookSecret?: string;
  /** Refuse POSTs without an explicit Idempotency-Key (the SDK's own "stripe-node-retry-…" keys count as missing). Default true. */
  requireExplicitIdempotencyKeys?: boolean;
}

const CREATE_PARAMS = new Set([
  "amount",
  "currency",
  "metadata",
  "payment_method_types",
  "automatic_payment_methods",
  "description",
]);
const KNOWN_METHOD_TYPES = new Set(["card", "crypto", "us_bank_account", "link"]);
const CANCELABLE = new Set([
  "requires_payment_method",
  "requires_capture",
  "requires_confirmation",
  "requires_action",
  "processing",
]);

export class StripeStub {
  readonly secretKey: string;
  readonly webhookSecret: string;
  readonly intents = new Map<string, StubIntent>();
  readonly requests: StubRequest[] = [];
  private readonly idempotency = new Map<
    string,
    { method: string; path: string; body: string; status: number; response: string }
  >();
  private readonly server: Server;
  private readonly requireKeys: boolean;
  private resetNext = 0;
  private signer = new Stripe("sk_test_signer_only");
  port = 0;

  constructor(opts: StripeStubOptions = {}) {
    this.secretKey = opts.secretKey ?? "sk_test_stub_" + randomBytes(8).toString("hex");
    this.webhookSecret = opts.webhookSecret ?? "whsec_stub_" + randomBytes(16).toString("hex");
    this.requireKeys = opts.requireExplicitIdempotencyKeys ?? true;
    this.server = createServer((req, res) => this.handle(req, res));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The next `n` POSTs are carried out, then the connection is dropped before the answer (a lost response). */
  dropNextResponses(n: number): void {
    this.resetNext = n;
  }

  // ---- transitions the outside world causes -------------------------------------------------

  /** The customer's payment went through (card) or was confirmed on chain (crypto). */
  succeed(id: string): StubIntent {
    const pi = this.must(id, [
      "requires_payment_method",
      "requires_confirmation",
      "requires_action",
      "processing",
    ]);
    pi.status = "succeeded";
    pi.amount_received = pi.amount;
    pi.last_payment_error = null;
    return clone(pi);
  }

  /** Submitted and awaiting settlement (crypto waiting for confirmations). */
  process(id: string): StubIntent {
    const pi = this.must(id, ["requires_payment_method", "requires_confirmation", "requires_action"]);
    pi.status = "processing";
    return clone(pi);
  }

  /** The attempt failed (card declined, crypto transaction reverted): back to requires_payment_method with an error, as Stripe does. */
  fail(id: string, message = "Your card was declined."): StubIntent {
    const pi = this.must(id, [
      "requires_payment_method",
      "requires_confirmation",
      "requires_action",
      "processing",
    ]);
    pi.status = "requires_payment_method";
    pi.last_payment_error = { code: "card_declined", message, type: "card_error" };
    return clone(pi);
  }

  // ---- webhooks ------------------------------------------------------------------------------

  /** A Stripe event carrying a snapshot of the intent as it is now. */
  event(
    type: string,
    id: string,
    opts: { eventId?: string; created?: number } = {},
  ): Record<string, unknown> {
    const pi = this.intents.get(id);
    if (!pi) throw new Error(`stub: no intent ${id}`);
    return {
      id: opts.eventId ?? "evt_" + randomBytes(12).toString("hex"),
      object: "event",
      api_version: "2026-10-28.endive",
      created: opts.created ?? Math.floor(Date.now() / 1000),
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
      data: { object: clone(pi) },
    };
  }

  /** The raw body and Stripe-Signature header Stripe would send for `event`. */
  sign(event: Record<string, unknown>, secret = this.webhookSecret): { payload: string; header: string } {
    const payload = JSON.stringify(event);
    return { payload, header: this.signer.webhooks.generateTestHeaderString({ payload, secret }) };
  }

  // ---- HTTP ----------------------------------------------------------------------------------

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const path = (req.url ?? "").split("?")[0];
      const method = req.method ?? "GET";
      const key = header(req, "idempotency-key");
      this.requests.push({ method, path, idempotencyKey: key, body });
      const send = (status: number, payload: unknown, extra: Record<string, string> = {}) => {
        res.writeHead(status, {
          "content-type": "application/json",
          "request-id": "req_" + randomBytes(6).toString("hex"),
          ...extra,
        });
        res.end(typeof payload === "string" ? payload : JSON.stringify(payload));
      };

      if (header(req, "authorization") !== `Bearer ${this.secretKey}`) {
        return send(
          401,
          stripeError("invalid_request_error", "Invalid API Key provided.", { code: "api_key_invalid" }),
        );
      }
      if (!header(req, "stripe-version"))
        return send(400, stripeError("invalid_request_error", "stub: missing Stripe-Version header"));

      if (method === "POST") {
        if (!(header(req, "content-type") ?? "").startsWith("application/x-www-form-urlencoded")) {
          return send(400, stripeError("invalid_request_error", "stub: POST bodies must be form-encoded"));
        }
        if (this.requireKeys && (!key || key.startsWith("stripe-node-retry-"))) {
          return send(
            400,
            stripeError("invalid_request_error", "stub: expected an explicit Idempotency-Key on every POST"),
          );
        }
        if (key) {
          const seen = this.idempotency.get(key);
          if (seen) {
            if (seen.method !== method || seen.path !== path || seen.body !== body) {
              return send(
                400,
                stripeError(
                  "idempotency_error",
                  `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
                ),
              );
            }
            return send(seen.status, seen.response, { "idempotent-replayed": "true" });
          }
        }
      }

      const [status, payload] = this.route(method, path, parseForm(body));
      const response = JSON.stringify(payload);
      // Stripe stores the result of any request that began executing, errors included (except 5xx / rate limits).
      if (method === "POST" && key && status < 500)
        this.idempotency.set(key, { method, path, body, status, response });
      if (method === "POST" && this.resetNext > 0) {
        this.resetNext--;
        req.socket.destroy();
        return;
      }
      send(status, response);
    });
  }

  private route(method: string, path: string, params: Record<string, unknown>): [number, unknown] {
    let m: RegExpMatchArray | null;
    if (method === "POST" && path === "/v1/payment_intents") return this.create(params);
    if (method === "GET" && (m = path.match(/^\/v1\/payment_intents\/([^/]+)$/))) {
      const pi = this.intents.get(decodeURIComponent(m[1]));
      return pi ? [200, pi] : missing(m[1]);
    }
    if (method === "POST" && (m = path.match(/^\/v1\/payment_intents\/([^/]+)\/cancel$/))) {
      const pi = this.intents.get(decodeURIComponent(m[1]));
      if (!pi) return missing(m[1]);
      if (!CANCELABLE.has(pi.status)) {
        return [
          400,
          stripeError(
            "invalid_request_error",
            `You cannot cancel this PaymentIntent because it has a status of ${pi.status}.`,
            { code: "payment_intent_unexpected_state" },
          ),
        ];
      }
      pi.status = "canceled";
      pi.canceled_at = Math.floor(Date.now() / 1000);
      pi.cancellation_reason =
        typeof params.cancellation_reason === "string" ? params.cancellation_reason : null;
      return [200, pi];
    }
    return [404, stripeError("invalid_request_error", `Unrecognized request URL (${method}: ${path}).`)];
  }

  private create(p: Record<string, unknown>): [number, unknown] {
    for (const k of Object.keys(p)) {
      if (!CREATE_PARAMS.has(k))
        return [
          400,
          stripeError("invalid_request_error", `Received unknown parameter: ${k}`, {
            code: "parameter_unknown",
            param: k,
          }),
        ];
    }
    const amount = typeof p.amount === "string" && /^[0-9]+$/.test(p.amount) ? Number(p.amount) : NaN;
    if (!Number.isSafeInteger(amount))
      return [
        400,
        stripeError("invalid_request_error", "Invalid integer: amount", {
          code: "parameter_invalid_integer",
          param: "amount",
        }),
      ];
    if (typeof p.currency !== "string" || !/^[a-z]{3}$/.test(p.currency)) {
      return [
        400,
        stripeError("invalid_request_error", "Missing required param: currency.", {
          code: "parameter_missing",
          param: "currency",
        }),
      ];
    }
    if (amount < 50)
      return [
        400,
        stripeError("invalid_request_error", "Amount must be at least $0.50 usd", {
          code: "amount_too_small",
          param: "amount",
        }),
      ];
    const types = p.payment_method_types;
    const auto = p.automatic_payment_methods as { enabled?: string } | undefined;
    if (types !== undefined && auto !== undefined) {
      return [
        400,
        stripeError(
          "invalid_request_error",
          "You may only specify one of these parameters: automatic_payment_methods, payment_method_types.",
          { code: "parameter_unknown" },
        ),
      ];
    }
    let methodTypes: string[] = ["card"];
    if (types !== undefined) {
      if (
        !Array.isArray(types) ||
        types.length === 0 ||
        !types.every((t) => typeof t === "string" && KNOWN_METHOD_TYPES.has(t))
      ) {
        return [
          400,
          stripeError("invalid_request_error", "Invalid payment_method_types", {
            code: "parameter_invalid_empty",
            param: "payment_method_types",
          }),
        ];
      }
      methodTypes = types as string[];
    }
    const metadata = (p.metadata ?? {}) as Record<string, unknown>;
    if (
      typeof metadata !== "object" ||
      Array.isArray(metadata) ||
      !Object.values(metadata).every((v) => typeof v === "string")
    ) {
      return [400, stripeError("invalid_request_error", "Invalid metadata", { param: "metadata" })];
    }
    const id = "pi_" + randomBytes(12).toString("hex");
    const pi: StubIntent = {
      id,
      object: "payment_intent",
      amount,
      amount_received: 0,
      currency: p.currency,
      status: "requires_payment_method",
      client_secret: `${id}_secret_${randomBytes(12).toString("hex")}`,
      metadata: metadata as Record<string, string>,
      payment_method_types: methodTypes,
      automatic_payment_methods: auto ? { enabled: auto.enabled === "true" } : null,
      last_payment_error: null,
      canceled_at: null,
      cancellation_reason: null,
      created: Math.floor(Date.now() / 1000),
      livemode: false,
    };
    this.intents.set(id, pi);
    return [200, pi];
  }

  private must(id: string, from: string[]): StubIntent {
    const pi = this.intents.get(id);
    if (!pi) throw new Error(`stub: no intent ${id}`);
    if (!from.includes(pi.status))
      throw new Error(`stub: intent ${id} is ${pi.status}, cannot move it from there`);
    return pi;
  }
}

function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return typeof v === "string" ? v : null;
}

function stripeError(type: string, message: string, extra: { code?: string; param?: string } = {}) {
  return { error: { type, message, ...extra } };
}

function missing(id: string): [number, unknown] {
  return [
    404,
    stripeError("invalid_request_error", `No such payment_intent: '${decodeURIComponent(id)}'`, {
      code: "resource_missing",
      param: "intent",
    }),
  ];
}

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** Decodes Stripe's form encoding: a[b]=1 → {a:{b:"1"}}, a[0]=x → {a:["x"]}. */
export function parseForm(body: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!body) return out;
  for (const part of body.split("&")) {
    if (!part) continue;
    const eq = part.indexOf("=");
    const rawKey = decodeURIComponent((eq < 0 ? part : part.slice(0, eq)).replace(/\+/g, " "));
    const value = decodeURIComponent((eq < 0 ? "" : part.slice(eq + 1)).replace(/\+/g, " "));
    const path = rawKey.split(/\[|\]\[|\]/).filter((s) => s !== "");
    let node: Record<string, unknown> | unknown[] = out;
    for (let i = 0; i < path.length; i++) {
      const seg = path[i];
      const last = i === path.length - 1;
      const nextIsIndex = !last && /^[0-9]+$/.test(path[i + 1]);
      const container = node as Record<string, unknown>;
      if (last) container[seg] = value;
      else {
        if (container[seg] === undefined) container[seg] = nextIsIndex ? [] : {};
        node = container[seg] as Record<string, unknown>;
      }
    }
  }
  return out;
}
