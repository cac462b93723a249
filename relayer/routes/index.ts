/**
 * Every endpoint the service serves, by group, in the order the OpenAPI document lists them. The app
 * mounts these groups and nothing else (app.ts), and openapi.ts documents exactly these: to add an
 * endpoint, declare it in its group's file (docs/development.md, "How to add an endpoint").
 */
import { BILLING_ENDPOINTS } from "../billing/router";
import { handler, type RelayerContext } from "../context";
import { takeClaimedIpToken } from "../rateLimit";
import { ACCOUNT_ENDPOINTS } from "./accounts";
import { ACTION_ENDPOINTS } from "./actions";
import { ATTESTATION_ENDPOINTS } from "./attestation";
import { AUDIT_ENDPOINTS } from "./audit";
import { declaredRouter, type DeclaredRouter, type Endpoint, type EndpointGroup } from "./endpoint";
import { FORWARD_ENDPOINTS } from "./forward";
import { GROUP_ENDPOINTS } from "./groups";
import { KEY_ENDPOINTS } from "./keys";
import { PKP_ENDPOINTS } from "./pkps";
import { POLICY_ENDPOINTS } from "./policies";
import { ROTATION_ENDPOINTS } from "./rotation";
import { SIWE_ENDPOINTS } from "./siwe";
import { CONFIG_ENDPOINTS, DOCUMENT_ENDPOINTS, HEALTH_ENDPOINTS } from "./system";
import { WEBHOOK_ENDPOINTS } from "./webhooks";
import { TRIGGER_ENDPOINTS } from "./triggers";
import { HOOK_ENDPOINTS } from "./hooks";

const core = (endpoints: ReadonlyArray<Endpoint<RelayerContext>>) => ({ prefix: "/core/v1", endpoints });

/** svc_action's group: by far the most frequent requests, so the app tries it first. */
export const ACTION_GROUP: EndpointGroup<RelayerContext> = core(ACTION_ENDPOINTS);

/** Billing's endpoints: mounted by billing itself (it has its own context and body parsers). */
export const BILLING_GROUP: EndpointGroup<never> = {
  prefix: "/core/v1/billing",
  endpoints: BILLING_ENDPOINTS,
};

/** The relayer's own groups, in document order. */
export const RELAYER_GROUPS: ReadonlyArray<EndpointGroup<RelayerContext>> = [
  core(ACCOUNT_ENDPOINTS),
  core(KEY_ENDPOINTS),
  core(ROTATION_ENDPOINTS),
  core(PKP_ENDPOINTS),
  core(GROUP_ENDPOINTS),
  ACTION_GROUP,
  core(POLICY_ENDPOINTS),
  core(FORWARD_ENDPOINTS),
  core(WEBHOOK_ENDPOINTS),
  core(TRIGGER_ENDPOINTS),
  core(AUDIT_ENDPOINTS),
  core(CONFIG_ENDPOINTS),
  core(ATTESTATION_ENDPOINTS),
  core(SIWE_ENDPOINTS),
  core(DOCUMENT_ENDPOINTS),
  { prefix: "", endpoints: HEALTH_ENDPOINTS },
];

/**
 * Webhook triggers' public URLs: no credential, their own limits and their own raw body reader, so the
 * app mounts them before the guard that reads /core/v1 bodies (app.ts).
 */
export const HOOK_GROUP: EndpointGroup<RelayerContext> = { prefix: "/hooks/v1", endpoints: HOOK_ENDPOINTS };

/** Every group the document lists, billing's (after the forward endpoints) and the hooks included. */
export const DOCUMENTED_GROUPS: ReadonlyArray<EndpointGroup<never>> = [
  ...RELAYER_GROUPS.flatMap((g) => (g.endpoints === FORWARD_ENDPOINTS ? [g, BILLING_GROUP] : [g])),
  HOOK_GROUP as EndpointGroup<never>,
];

/**
 * A relayer group as a router: "key" callers pass the key check, "account" callers the account-key
 * check, and every handler runs under `handler` (Idempotency-Key replays, secret fields, JSON answer).
 */
export function relayerRouter(
  ctx: RelayerContext,
  endpoints: ReadonlyArray<Endpoint<RelayerContext>>,
): DeclaredRouter {
  return declaredRouter(ctx, endpoints, {
    guards: {
      key: [ctx.auth.requireKey()],
      account: [ctx.auth.requireAccountKey()],
      owner: [ctx.auth.requireOwner()],
      // Routes that do not authenticate take the IP token perIpLimit may have left to authentication.
      public: [takeClaimedIpToken],
      session: [takeClaimedIpToken],
    },
    run: (e) => handler(ctx, (req, res) => e.handle(ctx, req, res), { secretFields: e.secretFields }),
  });
}
