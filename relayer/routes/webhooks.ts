/**
 * /core/v1/webhooks: endpoints that receive signed events about the account (docs/webhooks.md). The
 * account key only: who is told about permission changes is the owner's decision, like the changes
 * themselves; a usage key gets 403 owner_only.
 */
import { authOf } from "../auth";
import { type RelayerContext } from "../context";
import { parsePage } from "../http/validate";
import {
  DEFAULT_ROTATION_GRACE_SECONDS,
  MAX_ROTATION_GRACE_SECONDS,
  parseEventTypes,
} from "../webhooks/endpoints";
import type { Subscription } from "../webhooks/eventTypes";
import { MAX_URL_LENGTH } from "../webhooks/urlPolicy";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

const url = { ...s.bytes(MAX_URL_LENGTH, "https:// URL"), "x-sigil-non-blank": true } as s.Typed<string>;
/** `event_types` is read by the webhooks' own parser (invalid_event_type names the known types). */
const eventTypes = (v: unknown) => (v === undefined ? undefined : parseEventTypes(v));

const createBody = s.obj({ url, event_types: s.eventTypes, description: s.description }, [
  "url",
  "event_types",
]);
const updateBody = s.obj({
  url,
  event_types: s.eventTypes,
  description: s.bytes(s.BODY_LIMITS.maxDescriptionLength),
  enabled: s.bool(),
});
const rotateBody = s.obj({
  expire_previous_in_seconds: s.withDefault(
    {
      type: "integer",
      minimum: 0,
      maximum: MAX_ROTATION_GRACE_SECONDS,
      description: "Seconds the previous secret keeps signing (7 days at most)",
    } as s.Typed<number>,
    DEFAULT_ROTATION_GRACE_SECONDS,
  ),
});

const postWebhooks = endpoint<RelayerContext>("POST", "/webhooks", {
  caller: "account",
  summary: "Register a webhook endpoint (account key); the answer holds its signing secret, once",
  status: 201,
  body: createBody,
  checks: { event_types: eventTypes },
  answer: s.out({ ...s.webhookFields, secret: s.webhookSecret }),
  errors: [
    "owner_only",
    "webhook_url_invalid",
    "webhook_url_refused",
    "invalid_event_type",
    "too_many_webhooks",
  ],
  // Kept sealed under the caller's key for an Idempotency-Key replay, like a new usage key.
  secretFields: { names: ["secret"], mode: "encrypt" },
  async handle(ctx, _req, res, body: BodyOf<typeof createBody>) {
    const { url, event_types, description } = body;
    return {
      status: 201,
      body: await ctx.webhooks.endpoints.create(authOf(res).principal.accountId, {
        url,
        eventTypes: event_types as Subscription,
        description,
      }),
    };
  },
});

const getWebhooks = endpoint<RelayerContext>("GET", "/webhooks", {
  caller: "account",
  summary: "List the account's webhook endpoints",
  params: s.pagingParams,
  answer: s.page(s.ref("WebhookEndpoint")),
  errors: ["owner_only", "invalid_pagination"],
  async handle(ctx, req, res) {
    const page = parsePage(req.query as Record<string, unknown>, ctx.cfg.limits.maxPageSize);
    return {
      body: await ctx.webhooks.endpoints.list(
        authOf(res).principal.accountId,
        page.pageNumber,
        page.pageSize,
      ),
    };
  },
});

const getWebhooksId = endpoint<RelayerContext>("GET", "/webhooks/:id", {
  caller: "account",
  summary: "A webhook endpoint",
  params: [s.webhookId],
  answer: s.ref("WebhookEndpoint"),
  errors: ["owner_only", "webhook_not_found"],
  async handle(ctx, req, res) {
    return {
      body: await ctx.webhooks.endpoints.get(authOf(res).principal.accountId, String(req.params.id)),
    };
  },
});

const postWebhooksId = endpoint<RelayerContext>("POST", "/webhooks/:id", {
  caller: "account",
  summary: "Update a webhook endpoint (url, event_types, description, enabled)",
  params: [s.webhookId],
  body: updateBody,
  checks: { event_types: eventTypes },
  answer: s.ref("WebhookEndpoint"),
  errors: [
    "owner_only",
    "webhook_not_found",
    "webhook_url_invalid",
    "webhook_url_refused",
    "invalid_event_type",
  ],
  async handle(ctx, req, res, body: BodyOf<typeof updateBody>) {
    const { url, event_types, description, enabled } = body;
    return {
      body: await ctx.webhooks.endpoints.update(authOf(res).principal.accountId, String(req.params.id), {
        url,
        eventTypes: event_types as Subscription | undefined,
        description,
        enabled,
      }),
    };
  },
});

const deleteWebhooksId = endpoint<RelayerContext>("DELETE", "/webhooks/:id", {
  caller: "account",
  summary: "Delete a webhook endpoint and its delivery log",
  params: [s.webhookId],
  answer: s.out({ id: s.str(), deleted: { type: "boolean", const: true } }),
  // A DELETE may carry a body too: the guard and the body parser judge it like any other.
  errors: ["owner_only", "webhook_not_found", "invalid_json", "payload_too_large", "unsupported_media_type"],
  async handle(ctx, req, res) {
    await ctx.webhooks.endpoints.remove(authOf(res).principal.accountId, String(req.params.id));
    return { body: { id: String(req.params.id), deleted: true } };
  },
});

const postWebhooksIdRotateSecret = endpoint<RelayerContext>("POST", "/webhooks/:id/rotate_secret", {
  caller: "account",
  summary:
    "A new signing secret, returned once; the previous one keeps signing for expire_previous_in_seconds (default 86400, 0 = stop now)",
  params: [s.webhookId],
  body: rotateBody,
  answer: s.out({
    id: s.str(),
    secret: s.webhookSecret,
    previous_secret_expires_at: s.nullable(s.int("Unix seconds")),
  }),
  errors: ["owner_only", "webhook_not_found"],
  secretFields: { names: ["secret"], mode: "encrypt" },
  async handle(ctx, req, res, body: BodyOf<typeof rotateBody>) {
    return {
      body: await ctx.webhooks.endpoints.rotate(
        authOf(res).principal.accountId,
        String(req.params.id),
        body.expire_previous_in_seconds,
      ),
    };
  },
});

const getWebhooksIdDeliveries = endpoint<RelayerContext>("GET", "/webhooks/:id/deliveries", {
  caller: "account",
  summary: "The endpoint's deliveries, newest first",
  params: [s.webhookId, ...s.pagingParams],
  answer: s.page(s.deliveryItem),
  errors: ["owner_only", "invalid_pagination", "webhook_not_found"],
  async handle(ctx, req, res) {
    const page = parsePage(req.query as Record<string, unknown>, ctx.cfg.limits.maxPageSize);
    return {
      body: await ctx.webhooks.endpoints.deliveries(
        authOf(res).principal.accountId,
        String(req.params.id),
        page.pageNumber,
        page.pageSize,
      ),
    };
  },
});

const resendDelivery = endpoint<RelayerContext>("POST", "/webhooks/:id/deliveries/:delivery/resend", {
  caller: "account",
  summary: "Send a delivery again as soon as possible (same event id, same body)",
  status: 202,
  params: [s.webhookId, s.idParam("delivery", { type: "string" })],
  body: s.obj({}),
  answer: s.deliveryItem,
  errors: [
    "owner_only",
    "webhook_not_found",
    "webhook_delivery_not_found",
    "webhook_disabled",
    "webhook_delivery_in_progress",
  ],
  async handle(ctx, req, res) {
    const item = await ctx.webhooks.endpoints.resend(
      authOf(res).principal.accountId,
      String(req.params.id),
      String(req.params.delivery),
    );
    return { status: 202, body: item };
  },
});

export const WEBHOOK_ENDPOINTS = [
  postWebhooks,
  getWebhooks,
  getWebhooksId,
  postWebhooksId,
  deleteWebhooksId,
  postWebhooksIdRotateSecret,
  getWebhooksIdDeliveries,
  resendDelivery,
];
