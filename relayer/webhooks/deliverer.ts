/**
 * Delivers due events, off the request path: a loop claims due deliveries (a lease in the database, so
 * that of several instances exactly one sends each attempt), sends at most `concurrency` at once and
 * records each outcome: success, a retry at the schedule's next time, or, after the schedule's three
 * days of failures, a given-up delivery and (if the endpoint had no success meanwhile) a disabled
 * endpoint with a `webhook.disabled` notice and a log line.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { AddressGuard } from "../../enclave";
import type { RetrySchedule } from "./retry";
import type { SecretBox } from "./secrets";
import { sendOnce, type AttemptResult } from "./send";
import { SIGNATURE_HEADER, signatureHeader } from "./signature";
import type { DueDelivery, EndpointRow, WebhookStore } from "./store";

export const DISABLED_NOTICE = "webhook.disabled";

/** How long a stop waits for attempts already sent before aborting them. */
const STOP_GRACE_MS = 1_000;

export interface DelivererOptions {
  store: WebhookStore;
  secrets: SecretBox;
  guard: AddressGuard;
  retry: RetrySchedule;
  timeoutMs: number;
  concurrency: number;
  pollMs: number;
  maxResponseBytes: number;
  logger: Logger;
  instanceId?: string;
}

export class Deliverer {
  private readonly owner: string;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;
  private wanted = false;

  constructor(private readonly o: DelivererOptions) {
    this.owner = `${o.instanceId ?? "sigil"}:${randomBytes(6).toString("hex")}`;
  }

  start(): void {
    this.schedule(0);
  }

  /** Look for due deliveries now (a scanner just stored events). */
  wake(): void {
    if (this.stopped) return;
    if (this.ticking) this.wanted = true;
    else this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking?.catch(() => undefined);
    // An attempt already on the wire usually ends within moments: let it finish and be recorded, so a
    // graceful stop neither sends it again nor undercounts the receiver's attempts. Only what is still
    // waiting after the grace is aborted and released for the next instance.
    const drained = Promise.all([...this.inFlight]);
    let graceTimer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>(
      (r) => (graceTimer = setTimeout(r, Math.min(this.o.timeoutMs, STOP_GRACE_MS))),
    );
    await Promise.race([drained, grace]);
    clearTimeout(graceTimer);
    this.abort.abort();
    await drained;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.ticking = this.tick().finally(() => {
        this.ticking = null;
        const again = this.wanted;
        this.wanted = false;
        this.schedule(again ? 0 : this.o.pollMs);
      });
    }, ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const free = this.o.concurrency - this.inFlight.size;
    if (free <= 0) return;
    const now = Date.now();
    // The lease outlives the longest attempt, so only an instance that died leaves one to expire.
    let claimed: DueDelivery[];
    try {
      claimed = await this.o.store.claimDue(this.owner, now, now + this.o.timeoutMs + 30_000, free);
    } catch (err) {
      this.o.logger.warn({ err: (err as Error).message }, "webhook deliveries: claiming failed; retried");
      return;
    }
    for (const d of claimed) {
      const p = this.deliver(d)
        .catch((err: unknown) =>
          this.o.logger.error(
            { err: (err as Error).message, delivery_id: d.delivery_id },
            "webhook delivery failed to record",
          ),
        )
        .finally(() => {
          this.inFlight.delete(p);
          this.wake();
        });
      this.inFlight.add(p);
    }
  }

  private async deliver(d: DueDelivery): Promise<void> {
    const { store } = this.o;
    const [endpoint, payload] = await Promise.all([
      store.endpointById(d.endpoint_id),
      store.eventPayload(d.event_id),
    ]);
    if (!endpoint || payload === undefined) return; // deleted meanwhile: nothing to send
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      "content-type": "application/json",
      "user-agent": "Sigil-Webhooks/1",
      "sigil-event-id": d.event_id,
      "sigil-delivery-id": d.delivery_id,
      [SIGNATURE_HEADER.toLowerCase()]: signatureHeader(this.signingSecrets(endpoint), timestamp, payload),
    };
    const result = await sendOnce(endpoint.url, headers, payload, {
      guard: this.o.guard,
      timeoutMs: this.o.timeoutMs,
      maxResponseBytes: this.o.maxResponseBytes,
      signal: this.abort.signal,
    });
    if (this.abort.signal.aborted && !result.ok) {
      // Stopping: not the receiver's failure. Due again at once, for this instance's successor or another.
      await store.release(this.owner, d.delivery_id);
      return;
    }
    await this.record(d, endpoint, result);
  }

  private async record(d: DueDelivery, endpoint: EndpointRow, result: AttemptResult): Promise<void> {
    const now = Date.now();
    if (result.ok) {
      await this.o.store.recordSuccess(this.owner, d.delivery_id, result.status!, now);
      return;
    }
    const firstFailureMs = d.first_failure_ms ?? now;
    const gaveUp = now - firstFailureMs >= this.o.retry.giveUpAfterMs;
    const disabled = await this.o.store.recordFailure(
      this.owner,
      { deliveryId: d.delivery_id, endpointId: d.endpoint_id, firstFailureMs },
      {
        status: result.status,
        error: result.error ?? "failed",
        nowMs: now,
        nextAttemptMs: now + this.o.retry.delayMs(d.attempts + 1),
        gaveUp,
      },
      `${DISABLED_NOTICE}: deliveries failed for the whole retry window (${window(this.o.retry.giveUpAfterMs)}) without a success`,
    );
    if (disabled)
      this.o.logger.warn(
        { endpoint_id: endpoint.endpoint_id, account_id: endpoint.account_id, notice: DISABLED_NOTICE },
        "webhook endpoint disabled: its deliveries failed for the whole retry window",
      );
  }

  /** The current secret, and during a rotation's grace period the previous one too. */
  private signingSecrets(e: EndpointRow): string[] {
    const out = [this.o.secrets.open(e.endpoint_id, e.account_id, e.secret_sealed)];
    if (e.previous_secret_sealed && (e.previous_secret_expires_ms ?? 0) > Date.now())
      out.push(this.o.secrets.open(e.endpoint_id, e.account_id, e.previous_secret_sealed));
    return out;
  }
}

function window(ms: number): string {
  return ms >= 3_600_000 ? `${Math.round(ms / 3_600_000)} h` : `${Math.round(ms / 1000)} s`;
}
