/**
 * What the /core/v1/webhooks routes do, apart from HTTP: validation of endpoint settings, creation
 * with a fresh secret (returned once), updates, rotation, deletion, and the delivery log. Every
 * operation is scoped to the caller's account: another account's endpoint is "not found".
 */
import { randomBytes } from "node:crypto";
import { ApiError } from "../errors";
import { EVENT_TYPES, isEventType, type Subscription } from "./eventTypes";
import { newSecret, type SecretBox } from "./secrets";
import type { DeliveryView, EndpointRow, WebhookStore } from "./store";
import { checkEndpointUrl, type UrlPolicy } from "./urlPolicy";

/** The longest grace period of a rotated secret: 7 days. */
export const MAX_ROTATION_GRACE_SECONDS = 7 * 24 * 3600;
export const DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600;

const ENDPOINT_ID = /^we_[0-9a-f]{24}$/;
const DELIVERY_ID = /^whd_[0-9a-f]{24}$/;
const seconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));
export type EndpointView = ReturnType<typeof endpointView>;
export type DeliveryItem = ReturnType<typeof deliveryItem>;

/**
 * An endpoint as the API shows it. The answer's shape is declared once, by its schema (`webhookFields`
 * in routes/schemas.ts); the TypeScript type is this function's.
 */
export function endpointView(r: EndpointRow, nowMs = Date.now()) {
  const graceOn = r.previous_secret_sealed !== null && (r.previous_secret_expires_ms ?? 0) > nowMs;
  return {
    id: r.endpoint_id,
    url: r.url,
    event_types: JSON.parse(r.event_types) as string[],
    description: r.description,
    enabled: r.enabled === 1,
    notice: r.disabled_reason,
    disabled_at: seconds(r.disabled_ms),
    previous_secret_expires_at: graceOn ? seconds(r.previous_secret_expires_ms) : null,
    created: seconds(r.created_ms)!,
    updated: seconds(r.updated_ms)!,
  };
}

/** A delivery as the API shows it (schema: `deliveryItem` in routes/schemas.ts). */
function deliveryItem(d: DeliveryView) {
  return {
    id: d.delivery_id,
    event_id: d.event_id,
    event_type: d.type,
    status: d.status,
    attempts: Number(d.attempts),
    next_attempt_at: d.status === "pending" ? seconds(Number(d.next_attempt_ms)) : null,
    last_attempt_at: seconds(d.last_attempt_ms === null ? null : Number(d.last_attempt_ms)),
    last_status: d.last_status === null ? null : Number(d.last_status),
    last_error: d.last_error,
    created: seconds(Number(d.created_ms))!,
  };
}

/** `event_types`: a non-empty list of known types, or ["*"]. Duplicates dropped, order kept. */
export function parseEventTypes(v: unknown): Subscription {
  const refuse = (message: string) =>
    new ApiError("invalid_event_type", message, {
      details: { field: "event_types", known: [...EVENT_TYPES, "*"] },
    });
  if (!Array.isArray(v) || v.length === 0 || v.length > EVENT_TYPES.length + 1)
    throw refuse('`event_types` must be a non-empty list of event types, or ["*"] for every type.');
  if (v.includes("*")) {
    if (v.length !== 1) throw refuse('`event_types` is either ["*"] alone or a list of event types.');
    return ["*"];
  }
  for (const [i, t] of v.entries())
    if (!isEventType(t))
      throw refuse(
        `\`event_types[${i}]\` (${JSON.stringify(String(t).slice(0, 64))}) is not an event type; see docs/webhooks.md.`,
      );
  return [...new Set(v)] as Subscription;
}

function notFound(id: string): ApiError {
  return new ApiError("webhook_not_found", `No webhook endpoint ${id.slice(0, 64)} in this account.`, {
    details: { webhook_id: id.slice(0, 64) },
  });
}

export class Endpoints {
  constructor(
    private readonly o: {
      store: WebhookStore;
      secrets: SecretBox;
      urlPolicy: UrlPolicy;
      maxPerAccount: number;
    },
  ) {}

  async create(
    accountId: string,
    input: { url: string; eventTypes: Subscription; description: string },
  ): Promise<EndpointView & { secret: string }> {
    const url = await checkEndpointUrl(input.url, this.o.urlPolicy);
    if ((await this.o.store.countEndpoints(accountId)) >= this.o.maxPerAccount)
      throw new ApiError(
        "too_many_webhooks",
        `This account has ${this.o.maxPerAccount} webhook endpoints, the most allowed; delete one first.`,
        { details: { max: this.o.maxPerAccount } },
      );
    const endpointId = "we_" + randomBytes(12).toString("hex");
    const secret = newSecret();
    const now = Date.now();
    await this.o.store.createEndpoint({
      endpointId,
      accountId,
      url,
      eventTypes: JSON.stringify(input.eventTypes),
      description: input.description,
      secretSealed: this.o.secrets.seal(endpointId, accountId, secret),
      nowMs: now,
    });
    const row = (await this.o.store.getEndpoint(accountId, endpointId))!;
    return { ...endpointView(row, now), secret };
  }

  async list(accountId: string, pageNumber: number, pageSize: number) {
    const [rows, total] = await Promise.all([
      this.o.store.listEndpoints(accountId, pageSize, pageNumber * pageSize),
      this.o.store.countEndpoints(accountId),
    ]);
    return { items: rows.map((r) => endpointView(r)), page_number: pageNumber, page_size: pageSize, total };
  }

  async get(accountId: string, id: string): Promise<EndpointView> {
    return endpointView(await this.row(accountId, id));
  }

  async update(
    accountId: string,
    id: string,
    change: { url?: string; eventTypes?: Subscription; description?: string; enabled?: boolean },
  ): Promise<EndpointView> {
    await this.row(accountId, id);
    const url = change.url === undefined ? undefined : await checkEndpointUrl(change.url, this.o.urlPolicy);
    const now = Date.now();
    const row = await this.o.store.updateEndpoint(
      accountId,
      id,
      (r) => {
        const enabling = change.enabled === true && r.enabled === 0;
        const disabling = change.enabled === false && r.enabled === 1;
        return {
          ...r,
          url: url ?? r.url,
          event_types: change.eventTypes ? JSON.stringify(change.eventTypes) : r.event_types,
          description: change.description ?? r.description,
          enabled: change.enabled === undefined ? r.enabled : change.enabled ? 1 : 0,
          // Re-enabling clears the notice; disabling by hand is not a notice, just `enabled: false`.
          disabled_reason: enabling ? null : r.disabled_reason,
          disabled_ms: enabling ? null : disabling ? now : r.disabled_ms,
        };
      },
      now,
    );
    if (!row) throw notFound(id);
    return endpointView(row, now);
  }

  /**
   * A new secret, returned once. The previous one keeps signing too (a second v1 in Sigil-Signature)
   * for `graceSeconds` (default 24 h, 0 = stops at once), so receivers can switch without a gap.
   */
  async rotate(
    accountId: string,
    id: string,
    graceSeconds: number,
  ): Promise<{ id: string; secret: string; previous_secret_expires_at: number | null }> {
    await this.row(accountId, id);
    const secret = newSecret();
    const now = Date.now();
    const expiresMs = graceSeconds > 0 ? now + graceSeconds * 1000 : null;
    const ok = await this.o.store.rotateSecret(
      accountId,
      id,
      (r) => ({
        current: this.o.secrets.seal(id, accountId, secret),
        previous: expiresMs === null ? null : r.secret_sealed,
        previousExpiresMs: expiresMs,
      }),
      now,
    );
    if (!ok) throw notFound(id);
    return { id, secret, previous_secret_expires_at: seconds(expiresMs) };
  }

  async remove(accountId: string, id: string): Promise<void> {
    if (!ENDPOINT_ID.test(id) || !(await this.o.store.deleteEndpoint(accountId, id))) throw notFound(id);
  }

  async deliveries(accountId: string, id: string, pageNumber: number, pageSize: number) {
    await this.row(accountId, id);
    const [rows, total] = await Promise.all([
      this.o.store.listDeliveries(id, pageSize, pageNumber * pageSize),
      this.o.store.countDeliveries(id),
    ]);
    return { items: rows.map(deliveryItem), page_number: pageNumber, page_size: pageSize, total };
  }

  /** Sends a delivery again as soon as possible (any status); the receiver dedupes by event id. */
  async resend(accountId: string, id: string, deliveryId: string): Promise<DeliveryItem> {
    const endpoint = await this.row(accountId, id);
    const missing = () =>
      new ApiError(
        "webhook_delivery_not_found",
        `No delivery ${deliveryId.slice(0, 64)} of endpoint ${id}.`,
        {
          details: { webhook_id: id, delivery_id: deliveryId.slice(0, 64) },
        },
      );
    if (!DELIVERY_ID.test(deliveryId) || !(await this.o.store.getDelivery(id, deliveryId))) throw missing();
    if (endpoint.enabled !== 1)
      throw new ApiError(
        "webhook_disabled",
        `Endpoint ${id} is disabled; enable it (POST /core/v1/webhooks/${id} with "enabled": true) to resend.`,
        { details: { webhook_id: id } },
      );
    if (!(await this.o.store.resend(id, deliveryId, Date.now())))
      throw new ApiError(
        "webhook_delivery_in_progress",
        `Delivery ${deliveryId} is being attempted right now; its result will show in the delivery log.`,
        {
          details: { webhook_id: id, delivery_id: deliveryId },
        },
      );
    return deliveryItem((await this.o.store.getDelivery(id, deliveryId))!);
  }

  private async row(accountId: string, id: string): Promise<EndpointRow> {
    const row = ENDPOINT_ID.test(id) ? await this.o.store.getEndpoint(accountId, id) : undefined;
    if (!row) throw notFound(id);
    return row;
  }
}
