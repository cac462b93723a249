/**
 * `sigil webhooks …`: endpoints that receive signed events about the account (docs/webhooks.md), and
 * their delivery logs. Account key only; every call goes through the SDK's `sigil.webhooks`.
 */
import type { Command } from "commander";
import type { WebhookDelivery, WebhookEndpoint } from "sigil/sdk";
import { UsageError } from "../api";
import { contextOf } from "../context";
import { fields, table, when } from "../output";

function eventList(v: string): string[] {
  const types = v
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "");
  if (types.length === 0)
    throw new UsageError('--events needs a comma-separated list of event types, or "*"');
  return types;
}

function enabledFlag(v: string | undefined): boolean | undefined {
  if (v === undefined) return undefined;
  if (v === "true" || v === "false") return v === "true";
  throw new UsageError("--enabled must be true or false");
}

function endpointFields(r: Record<string, unknown>): string {
  return fields([
    ["id", r.id],
    ["url", r.url],
    ["events", (r.event_types as string[]).join(", ")],
    ["description", r.description],
    ["enabled", r.enabled],
    ...(r.notice ? ([["notice", r.notice]] as [string, unknown][]) : []),
    ...(r.previous_secret_expires_at
      ? ([["previous secret until", when(r.previous_secret_expires_at)]] as [string, unknown][])
      : []),
  ]);
}

/** The secret, printed the one time it exists. */
function secretLines(secret: unknown): string[] {
  return ["", "Signing secret (shown this once; give it to your receiver):", "", `  ${String(secret)}`];
}

export function registerWebhooks(program: Command): void {
  const hooks = program
    .command("webhooks")
    .description("endpoints that receive signed events (account key; docs/webhooks.md)");

  hooks
    .command("create")
    .description("register an endpoint; prints its signing secret ONCE")
    .requiredOption("--endpoint-url <url>", "https:// URL of your receiver (--url is the Sigil API)")
    .requiredOption("--events <types>", 'comma-separated event types, or "*" for all')
    .option("--description <text>", "description")
    .action(async (o: { endpointUrl: string; events: string; description?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.sigil().webhooks.create({
        url: o.endpointUrl,
        event_types: eventList(o.events) as never,
        ...(o.description !== undefined ? { description: o.description } : {}),
      });
      out.result(r, () => [endpointFields(r), ...secretLines(r.secret)].join("\n"));
    });

  hooks
    .command("list")
    .description("list the account's endpoints")
    .action(async (_o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const items: WebhookEndpoint[] = [];
      for await (const e of client.sigil().webhooks.list()) items.push(e);
      out.result({ items }, () =>
        table(
          ["id", "url", "events", "enabled"],
          items.map((e) => [
            e.id,
            e.url,
            e.event_types.join(","),
            e.enabled ? "yes" : `no${e.notice ? " (disabled by failures)" : ""}`,
          ]),
        ),
      );
    });

  hooks
    .command("show <id>")
    .description("one endpoint")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.sigil().webhooks.get(id);
      out.result(r, () => endpointFields(r));
    });

  hooks
    .command("update <id>")
    .description("change an endpoint's url, events, description, or enable/disable it")
    .option("--endpoint-url <url>", "new URL of the receiver")
    .option("--events <types>", 'comma-separated event types, or "*"')
    .option("--description <text>", "description")
    .option("--enabled <bool>", "true or false")
    .action(
      async (
        id: string,
        o: { endpointUrl?: string; events?: string; description?: string; enabled?: string },
        cmd: Command,
      ) => {
        const { client, out } = contextOf(cmd);
        const body = {
          ...(o.endpointUrl !== undefined ? { url: o.endpointUrl } : {}),
          ...(o.events !== undefined ? { event_types: eventList(o.events) as never } : {}),
          ...(o.description !== undefined ? { description: o.description } : {}),
          ...(o.enabled !== undefined ? { enabled: enabledFlag(o.enabled) } : {}),
        };
        if (Object.keys(body).length === 0)
          throw new UsageError(
            "nothing to change: give --endpoint-url, --events, --description or --enabled",
          );
        const r = await client.sigil().webhooks.update(id, body);
        out.result(r, () => endpointFields(r));
      },
    );

  hooks
    .command("delete <id>")
    .description("delete an endpoint and its delivery log")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.sigil().webhooks.delete(id);
      out.result(r, () => `deleted ${r.id}`);
    });

  hooks
    .command("rotate-secret <id>")
    .description("a new signing secret, printed ONCE; the previous one signs too for the grace period")
    .option("--expire-previous-in <seconds>", "grace period of the previous secret (default 86400; 0 = now)")
    .action(async (id: string, o: { expirePreviousIn?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      let grace: number | undefined;
      if (o.expirePreviousIn !== undefined) {
        grace = Number(o.expirePreviousIn);
        if (!/^[0-9]+$/.test(o.expirePreviousIn))
          throw new UsageError("--expire-previous-in must be a number of seconds");
      }
      const r = await client.sigil().webhooks.rotateSecret(id, grace);
      out.result(r, () =>
        [
          `id  ${r.id}`,
          r.previous_secret_expires_at
            ? `previous secret signs too until ${when(r.previous_secret_expires_at)}`
            : "the previous secret no longer signs",
          ...secretLines(r.secret),
        ].join("\n"),
      );
    });

  hooks
    .command("deliveries <id>")
    .description("the endpoint's delivery log, newest first")
    .option("--limit <n>", "most deliveries shown", "50")
    .action(async (id: string, o: { limit: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const limit = Number(o.limit);
      if (!Number.isSafeInteger(limit) || limit < 1)
        throw new UsageError("--limit must be a positive integer");
      const items: WebhookDelivery[] = [];
      for await (const d of client.sigil().webhooks.deliveries(id)) {
        items.push(d);
        if (items.length >= limit) break;
      }
      out.result({ items }, () =>
        table(
          ["delivery", "event", "type", "status", "attempts", "last"],
          items.map((d) => [
            d.id,
            d.event_id,
            d.event_type,
            d.status,
            String(d.attempts),
            d.last_status === null ? (d.last_error ?? "") : `HTTP ${d.last_status}`,
          ]),
        ),
      );
    });

  hooks
    .command("resend <id> <deliveryId>")
    .description("send one delivery again (same event id and body)")
    .action(async (id: string, deliveryId: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.sigil().webhooks.resend(id, deliveryId);
      out.result(r, () => `queued ${r.id} (event ${r.event_id}) for delivery now`);
    });
}
