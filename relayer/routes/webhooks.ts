/**
 * /core/v1/webhooks: endpoints that receive signed events about the account (docs/webhooks.md). The
 * account key only: who is told about permission changes is the owner's decision, like the changes
 * themselves; a usage key gets 403 owner_only.
 */
import { authOf } from "../auth";
import { type RelayerContext } from "../context";
import { BodyReader, invalid, parsePage } from "../http/validate";
import {
  DEFAULT_ROTATION_GRACE_SECONDS,
  MAX_ROTATION_GRACE_SECONDS,
  parseEventTypes,
} from "../webhooks/endpoints";
import { MAX_URL_LENGTH } from "../webhooks/urlPolicy";
import { endpoint } from "./endpoint";
import * as s from "./schemas";

const urlField = (b: BodyReader, required: boolean) =>
  b.string("url", { required, max: MAX_URL_LENGTH, nonEmpty: true });

const postWebhooks = endpoint<RelayerContext>("POST", "/webhooks", {
  caller: "account",
  summary: "Register a webhook endpoint (account key); the answer holds its signing secret, once",
  status: 201,
  body: s.obj({ url: s.str("https:// URL"), event_types: s.eventTypes, description: s.str() }, [
    "url",
    "event_types",
  ]),
  answer: s.out({ ...s.webhookFields, secret: s.webhookSecret }),
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "unknown_field",
    "string_too_long",
    "owner_only",
    "webhook_url_invalid",
    "webhook_url_refused",
    "invalid_event_type",
    "too_many_webhooks",
  ],
  // Kept sealed under the caller's key for an Idempotency-Key replay, like a new usage key.
  secretFields: { names: ["secret"], mode: "encrypt" },
  async handle(ctx, req, res) {
    const auth = authOf(res);
    const b = new BodyReader(req.body);
    const url = urlField(b, true);
    const eventTypes = parseEventTypes(b.raw("event_types"));
    const description = b.string("description", { max: ctx.cfg.limits.maxDescriptionLength });
    b.done();
    return {
      status: 201,
      body: await ctx.webhooks.endpoints.create(auth.principal.accountId, { url, eventTypes, description }),
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
  body: s.obj({ url: s.str(), event_types: s.eventTypes, description: s.str(), enabled: s.bool() }),
  answer: s.ref("WebhookEndpoint"),
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "unknown_field",
    "string_too_long",
    "owner_only",
    "webhook_not_found",
    "webhook_url_invalid",
    "webhook_url_refused",
    "invalid_event_type",
  ],
  async handle(ctx, req, res) {
    const b = new BodyReader(req.body);
    const url = b.has("url") ? urlField(b, true) : (b.raw("url"), undefined);
    const eventTypes = b.has("event_types") ? parseEventTypes(b.raw("event_types")) : undefined;
    const description = b.optionalString("description", ctx.cfg.limits.maxDescriptionLength);
    const enabled = b.has("enabled") ? b.bool("enabled") : (b.raw("enabled"), undefined);
    b.done();
    return {
      body: await ctx.webhooks.endpoints.update(authOf(res).principal.accountId, String(req.params.id), {
        url,
        eventTypes,
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
  body: s.obj({ expire_previous_in_seconds: { type: "integer", minimum: 0, maximum: 604800 } }),
  answer: s.out({
    id: s.str(),
    secret: s.webhookSecret,
    previous_secret_expires_at: s.nullable(s.int("Unix seconds")),
  }),
  errors: [...s.BODY_ERRORS, "invalid_request", "unknown_field", "owner_only", "webhook_not_found"],
  secretFields: { names: ["secret"], mode: "encrypt" },
  async handle(ctx, req, res) {
    const b = new BodyReader(req.body);
    const grace = b.raw("expire_previous_in_seconds");
    b.done();
    let graceSeconds = DEFAULT_ROTATION_GRACE_SECONDS;
    if (grace !== undefined && grace !== null) {
      if (
        typeof grace !== "number" ||
        !Number.isSafeInteger(grace) ||
        grace < 0 ||
        grace > MAX_ROTATION_GRACE_SECONDS
      )
        throw invalid(
          "expire_previous_in_seconds",
          `an integer from 0 to ${MAX_ROTATION_GRACE_SECONDS} (7 days)`,
          grace,
        );
      graceSeconds = grace;
    }
    return {
      body: await ctx.webhooks.endpoints.rotate(
        authOf(res).principal.accountId,
        String(req.params.id),
        graceSeconds,
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
  answer: s.deliveryItem,
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "unknown_field",
    "owner_only",
    "webhook_not_found",
    "webhook_delivery_not_found",
    "webhook_disabled",
    "webhook_delivery_in_progress",
  ],
  async handle(ctx, req, res) {
    new BodyReader(req.body).done();
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
