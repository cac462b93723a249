/**
 * POST /hooks/v1/:hook_id: the public URL of a webhook trigger (docs/triggers.md, "Inbound webhooks").
 * The only way to start work without a credential, so every refusal comes before any work and costs
 * the account nothing: the source's rate (per IP) first, then the body read raw up to its limit, then
 * the one lookup of the hook (remembered for a second by this instance), the trigger's own rate, the
 * HMAC when the trigger asks for one (compared in constant time), and the trigger's queue (refused in
 * memory while this instance knows it is full). An unknown, disabled or deleted hook answers the same 404.
 * The refusals that need neither the body nor the database are answered before this app sees the
 * request (triggers/hookFastPath.ts), identically.
 */
import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { NextFunction, Request, Response } from "express";
import getRawBody from "raw-body";
import { type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { clientIp } from "../http/context";
import { deliveryIdOf, HOOK_ID, isIpTaken } from "../triggers/hookRequest";
import { notFound } from "../triggers/service";
import { endpoint } from "./endpoint";
import * as s from "./schemas";

/** Headers the action never sees: credentials, cookies, and what proxies add about the client. */
const STRIPPED = new Set([
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  "forwarded",
  "via",
  "x-real-ip",
  "true-client-ip",
  "cf-connecting-ip",
  "x-amz-security-token",
  "x-csrf-token",
  "x-xsrf-token",
]);

/** The headers handed to the action (lower-case names; secret-bearing and proxy headers removed). */
export function safeHeaders(headers: Request["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase();
    if (STRIPPED.has(n) || n.startsWith("x-forwarded-") || n.startsWith("proxy-")) continue;
    if (value === undefined) continue;
    out[n] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

/** Does `given` carry the HMAC-SHA256 of `raw` under `secret` (after `prefix`, in `encoding`)? */
export function hmacMatches(
  raw: Buffer,
  secret: string,
  spec: { prefix: string; encoding: "hex" | "base64" },
  given: string | undefined,
): boolean {
  if (given === undefined || !given.startsWith(spec.prefix)) return false;
  const want = createHmac("sha256", secret).update(raw).digest();
  const got = Buffer.from(given.slice(spec.prefix.length).trim(), spec.encoding);
  return got.length === want.length && timingSafeEqual(got, want);
}

/** Reads the body as bytes up to the configured limit (413 past it), before anything parses it. */
function rawBody(ctx: RelayerContext) {
  return (req: Request, res: Response, next: NextFunction) => {
    // The source's rate first: a flood from one address is refused before its bodies are read. Taken
    // once: the fast path (triggers/hookFastPath.ts) may have taken it before handing the request on.
    Promise.resolve(
      isIpTaken(req)
        ? undefined
        : ctx.triggers.hookIpLimit.take(`hip:${clientIp(req)}`, `address ${clientIp(req)}`),
    )
      .then(() =>
        getRawBody(req, { length: req.headers["content-length"], limit: ctx.cfg.triggers.hookBodyBytes }),
      )
      .then(
        (raw) => {
          res.locals.hookBody = raw;
          next();
        },
        (err: unknown) => next(err),
      );
  };
}

const postHook = endpoint<RelayerContext>("POST", "/:hook_id", {
  caller: "public",
  summary:
    "Deliver an event to a webhook trigger: queues one run (202) with the body, raw bytes and safe headers",
  params: [s.idParam("hook_id", { type: "string" })],
  status: 202,
  answer: s.out({ run_id: s.str(), firing_id: s.str() }),
  errors: [
    "invalid_request",
    "invalid_idempotency_key",
    "idempotency_key_reused",
    "idempotency_key_in_flight",
    "payload_too_large",
    "rate_limited",
    "trigger_not_found",
    "webhook_signature_invalid",
    "trigger_queue_full",
    "insufficient_credits",
  ],
  before: [],
  async handle(ctx, req) {
    const raw = (req.res?.locals.hookBody as Buffer | undefined) ?? Buffer.alloc(0);
    const hookId = String(req.params.hook_id);
    if (!HOOK_ID.test(hookId)) throw notFound();
    const t = await ctx.triggers.byHookId(hookId);
    if (!t || !t.enabled || !t.webhook) throw notFound();
    await ctx.triggers.hookTriggerLimit.take(`htr:${t.id}`, `trigger ${t.id}`);
    if (t.webhook.hmac) {
      const secret = ctx.triggers.openSecret(t);
      if (secret === null || !hmacMatches(raw, secret, t.webhook.hmac, req.get(t.webhook.hmac.header)))
        throw new ApiError(
          "webhook_signature_invalid",
          `The ${t.webhook.hmac.header} header does not carry the HMAC-SHA256 of the body under this trigger's secret.`,
        );
    }
    let body: unknown = null;
    try {
      body = raw.length ? JSON.parse(raw.toString("utf8")) : null;
    } catch {
      // Not JSON (a form post, say): the action still has the raw bytes.
      body = null;
    }
    const delivery = deliveryIdOf(req.headers);
    const firingId = `webhook:${delivery ?? randomUUID()}`;
    const out = await ctx.triggers.fire(
      {
        triggerId: t.id,
        firingId,
        firedAt: Date.now(),
        input: {
          kind: "webhook",
          body,
          rawBase64: raw.toString("base64"),
          headers: safeHeaders(req.headers),
        },
      },
      t,
      { fresh: delivery === null },
    );
    return { status: 202, body: { run_id: out.runId, firing_id: firingId } };
  },
});

export function hookEndpoints(ctx: RelayerContext) {
  return [{ ...postHook, before: [rawBody(ctx)] }];
}

/** For the document (the body reader is added when the app mounts the group). */
export const HOOK_ENDPOINTS = [postHook];
