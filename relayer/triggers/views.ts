/**
 * Triggers and runs as the API answers them (snake_case; docs/triggers.md, "The trigger object").
 * A webhook trigger's URL is built from the service's public URL; its secret is never here (it is
 * answered once, by create or by the update that adds an HMAC).
 */
import { nextRunMs } from "./schedule";
import type { RunRow, StoredTrigger } from "./store";

const iso = (ms: number | null | undefined) =>
  ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString();

export function triggerView(t: StoredTrigger, origin: string, nowMs: number): Record<string, unknown> {
  return {
    id: t.id,
    name: t.name,
    kind: t.kind,
    enabled: t.enabled,
    paused: t.paused,
    cid: t.cid,
    pkp_ids: t.pkpIds,
    js_params: t.jsParams,
    run_as: { key_address: t.runAsKeyAddress },
    ...(t.schedule
      ? {
          schedule: {
            cron: t.schedule.cron,
            missed: t.schedule.missed,
            next_run_at: t.enabled && !t.paused ? iso(nextRunMs(t.schedule.cron, nowMs)) : null,
          },
        }
      : {}),
    ...(t.webhook
      ? { webhook: { url: `${origin}/hooks/v1/${t.webhook.hookId}`, hmac: t.webhook.hmac } }
      : {}),
    ...(t.chainEvent
      ? {
          chain_event: {
            chain_id: t.chainEvent.chainId,
            address: t.chainEvent.address,
            event: t.chainEvent.event,
            topic0: t.chainEvent.topic0,
            topics: t.chainEvent.topics,
            from_block: t.chainEvent.fromBlock,
          },
        }
      : {}),
    limits: {
      runs_per_minute: t.limits.runsPerMinute,
      max_queued_runs: t.limits.maxQueuedRuns,
      concurrency: t.limits.concurrency,
    },
    retry: { max_attempts: t.retry.maxAttempts, backoff_ms: t.retry.backoffMs },
    created_at: iso(t.createdAt),
    updated_at: iso(t.updatedAt),
  };
}

export function runView(r: RunRow): Record<string, unknown> {
  let response: unknown = null;
  if (r.response !== null) {
    try {
      response = JSON.parse(r.response);
    } catch {
      // Truncated: the stored text as it is.
      response = r.response;
    }
  }
  return {
    id: r.run_id,
    trigger_id: r.trigger_id,
    firing_id: r.firing_id,
    status: r.status,
    skip_reason: r.skip_reason,
    attempt: Number(r.attempt),
    input_summary: r.input_summary,
    response,
    error: r.error_code === null ? null : { code: r.error_code, message: r.error_message },
    logs: r.logs,
    charged_cents: Number(r.charged_cents),
    fired_at: iso(r.fired_ms),
    created_at: iso(r.created_ms),
    started_at: iso(r.started_ms),
    finished_at: iso(r.finished_ms),
    next_attempt_at: r.status === "queued" ? iso(r.next_attempt_ms) : null,
    instance: r.instance,
  };
}
