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
import type { NextFunction, Request, Response } from "express";
import getRawBody from "raw-body";
import { type RelayerContext } from "../context";
import { clientIp } from "../http/context";
import { deliverHook } from "../triggers/hookDelivery";
import { isIpTaken } from "../triggers/hookRequest";
import { endpoint } from "./endpoint";
import * as s from "./schemas";

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
    const out = await deliverHook(ctx, {
      hookId: String(req.params.hook_id),
      raw: (req.res?.locals.hookBody as Buffer | undefined) ?? Buffer.alloc(0),
      headers: req.headers,
      takeTriggerToken: true,
    });
    return { status: 202, body: { run_id: out.runId, firing_id: out.firingId } };
  },
});

export function hookEndpoints(ctx: RelayerContext) {
  return [{ ...postHook, before: [rawBody(ctx)] }];
}

/** For the document (the body reader is added when the app mounts the group). */
export const HOOK_ENDPOINTS = [postHook];
