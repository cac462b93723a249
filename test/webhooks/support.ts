/** Shared setup of the webhook tests: a stack whose deliveries may reach the loopback receiver, fast retries. */
import { exponentialBackoff, type WebhookOptions } from "../../relayer/webhooks";
import { startStack, type Stack } from "../helpers/stack";
import type { RelayerOptions } from "../../relayer";

/** Loopback allowed (the receivers run on 127.0.0.1), retries after ~200 ms, ~400 ms, …, given up after 60 s. */
export function testWebhookOptions(over: WebhookOptions = {}): WebhookOptions {
  return {
    allowAddresses: ["127.0.0.0/8"],
    retry: exponentialBackoff({ baseMs: 200, maxMs: 1_000, giveUpAfterMs: 60_000, random: () => 0.5 }),
    timeoutMs: 2_000,
    deliveryPollMs: 50,
    ...over,
  };
}

export function startWebhookStack(
  webhooks: WebhookOptions = testWebhookOptions(),
  over: Partial<RelayerOptions> = {},
): Promise<Stack> {
  return startStack({ pollIntervalMs: 100, webhooks, ...over });
}

export async function newAccount(s: Stack, name = "hooks"): Promise<{ key: string; id: number }> {
  const a = await s.api("POST", "/core/v1/new_account", { body: { account_name: name } });
  if (a.status !== 201) throw new Error(`new_account: ${a.status} ${JSON.stringify(a.body)}`);
  return { key: a.body.api_key, id: a.body.account_id };
}

export async function register(
  s: Stack,
  key: string,
  url: string,
  eventTypes: string[] = ["*"],
): Promise<{ id: string; secret: string }> {
  const r = await s.api("POST", "/core/v1/webhooks", { key, body: { url, event_types: eventTypes } });
  if (r.status !== 201) throw new Error(`webhooks: ${r.status} ${JSON.stringify(r.body)}`);
  return { id: r.body.id, secret: r.body.secret };
}
