/**
 * A hook call whose source was let in and whose body was read, to its end: the trigger behind the hook
 * id, its own rate, the HMAC when it asks for one, then one firing stored (answered its run id). Both
 * ways a call arrives end here: the app's route (routes/hooks.ts) and the hooks' own listener
 * (hookListener.ts), which hands over only the calls its thread could not refuse.
 */
import { randomUUID } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { RelayerContext } from "../context";
import { ApiError } from "../errors";
import { deliveryIdOf, HOOK_ID, hmacMatches, safeHeaders } from "./hookRequest";
import { notFound } from "./intakeRefusals";

export interface HookCall {
  hookId: string;
  raw: Buffer;
  headers: IncomingHttpHeaders;
  /** False when the trigger's token was already taken for this call (the listener's thread took it). */
  takeTriggerToken: boolean;
}

export async function deliverHook(
  ctx: RelayerContext,
  call: HookCall,
): Promise<{ runId: string; firingId: string }> {
  const { hookId, raw, headers } = call;
  if (!HOOK_ID.test(hookId)) throw notFound();
  const t = await ctx.triggers.byHookId(hookId);
  if (!t || !t.enabled || !t.webhook) throw notFound();
  if (call.takeTriggerToken) await ctx.triggers.hookTriggerLimit.take(`htr:${t.id}`, `trigger ${t.id}`);
  if (t.webhook.hmac) {
    const secret = ctx.triggers.openSecret(t);
    const given = headers[t.webhook.hmac.header.toLowerCase()];
    if (
      secret === null ||
      !hmacMatches(raw, secret, t.webhook.hmac, Array.isArray(given) ? given.join(", ") : given)
    )
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
  const delivery = deliveryIdOf(headers);
  const firingId = `webhook:${delivery ?? randomUUID()}`;
  const out = await ctx.triggers.fire(
    {
      triggerId: t.id,
      firingId,
      firedAt: Date.now(),
      input: { kind: "webhook", body, rawBase64: raw.toString("base64"), headers: safeHeaders(headers) },
    },
    t,
    { fresh: delivery === null },
  );
  return { runId: out.runId, firingId };
}
