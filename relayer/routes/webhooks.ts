/**
 * /core/v1/webhooks: endpoints that receive signed events about the account (docs/webhooks.md). The
 * account key only: who is told about permission changes is the owner's decision, like the changes
 * themselves; a usage key gets 403 owner_only.
 */
import { Router } from "express";
import { authOf } from "../auth";
import { handler, type RelayerContext } from "../context";
import { BodyReader, invalid, parsePage } from "../http/validate";
import {
  DEFAULT_ROTATION_GRACE_SECONDS,
  MAX_ROTATION_GRACE_SECONDS,
  parseEventTypes,
} from "../webhooks/endpoints";
import { MAX_URL_LENGTH } from "../webhooks/urlPolicy";

export function webhookRoutes(ctx: RelayerContext): Router {
  const r = Router();
  const { limits } = ctx.cfg;
  const endpoints = () => ctx.webhooks.endpoints;
  const account = ctx.auth.requireAccountKey();
  const urlField = (b: BodyReader, required: boolean) =>
    b.string("url", { required, max: MAX_URL_LENGTH, nonEmpty: true });

  r.post(
    "/webhooks",
    account,
    handler(
      ctx,
      async (req, res) => {
        const auth = authOf(res);
        const b = new BodyReader(req.body);
        const url = urlField(b, true);
        const eventTypes = parseEventTypes(b.raw("event_types"));
        const description = b.string("description", { max: limits.maxDescriptionLength });
        b.done();
        return {
          status: 201,
          body: await endpoints().create(auth.principal.accountId, { url, eventTypes, description }),
        };
      },
      // Kept sealed under the caller's key for an Idempotency-Key replay, like a new usage key.
      { secretFields: { names: ["secret"], mode: "encrypt" } },
    ),
  );

  r.get(
    "/webhooks",
    account,
    handler(ctx, async (req, res) => {
      const page = parsePage(req.query as Record<string, unknown>, limits.maxPageSize);
      return {
        body: await endpoints().list(authOf(res).principal.accountId, page.pageNumber, page.pageSize),
      };
    }),
  );

  r.get(
    "/webhooks/:id",
    account,
    handler(ctx, async (req, res) => ({
      body: await endpoints().get(authOf(res).principal.accountId, String(req.params.id)),
    })),
  );

  r.post(
    "/webhooks/:id",
    account,
    handler(ctx, async (req, res) => {
      const b = new BodyReader(req.body);
      const url = b.has("url") ? urlField(b, true) : (b.raw("url"), undefined);
      const eventTypes = b.has("event_types") ? parseEventTypes(b.raw("event_types")) : undefined;
      const description = b.optionalString("description", limits.maxDescriptionLength);
      const enabled = b.has("enabled") ? b.bool("enabled") : (b.raw("enabled"), undefined);
      b.done();
      return {
        body: await endpoints().update(authOf(res).principal.accountId, String(req.params.id), {
          url,
          eventTypes,
          description,
          enabled,
        }),
      };
    }),
  );

  r.delete(
    "/webhooks/:id",
    account,
    handler(ctx, async (req, res) => {
      await endpoints().remove(authOf(res).principal.accountId, String(req.params.id));
      return { body: { id: String(req.params.id), deleted: true } };
    }),
  );

  r.post(
    "/webhooks/:id/rotate_secret",
    account,
    handler(
      ctx,
      async (req, res) => {
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
          body: await endpoints().rotate(
            authOf(res).principal.accountId,
            String(req.params.id),
            graceSeconds,
          ),
        };
      },
      { secretFields: { names: ["secret"], mode: "encrypt" } },
    ),
  );

  r.get(
    "/webhooks/:id/deliveries",
    account,
    handler(ctx, async (req, res) => {
      const page = parsePage(req.query as Record<string, unknown>, limits.maxPageSize);
      return {
        body: await endpoints().deliveries(
          authOf(res).principal.accountId,
          String(req.params.id),
          page.pageNumber,
          page.pageSize,
        ),
      };
    }),
  );

  r.post(
    "/webhooks/:id/deliveries/:delivery/resend",
    account,
    handler(ctx, async (req, res) => {
      new BodyReader(req.body).done();
      const item = await endpoints().resend(
        authOf(res).principal.accountId,
        String(req.params.id),
        String(req.params.delivery),
      );
      return { status: 202, body: item };
    }),
  );

  return r;
}
