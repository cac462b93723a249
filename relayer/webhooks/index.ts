/**
 * Outgoing webhooks (docs/webhooks.md): endpoints an account registers, events from the registry's
 * logs and from the billing ledger, and durable, signed, retried deliveries. Everything lives in the
 * data layer, so a restart loses nothing and several instances on one PostgreSQL deliver each event
 * once. The routes (relayer/routes/webhooks.ts) use `endpoints`; `start`/`stop` run the loops.
 */
import type { JsonRpcProvider } from "ethers";
import type { Logger } from "pino";
import { makeAddressGuard, type AddressGuard } from "../../enclave";
import type { DataLayer } from "../db";
import { ChainScanner } from "./chainScanner";
import type { EventType } from "./eventTypes";
import { Deliverer } from "./deliverer";
import { Endpoints } from "./endpoints";
import { LedgerScanner } from "./ledgerScanner";
import { DEFAULT_RETRY_SCHEDULE, type RetrySchedule } from "./retry";
import { SecretBox, type RecordSealer } from "./secrets";
import { WebhookStore } from "./store";

export { EVENT_TYPES, type EventType, type EventPayload } from "./eventTypes";
export { exponentialBackoff, DEFAULT_RETRY_SCHEDULE, type RetrySchedule } from "./retry";
export { DISABLED_NOTICE } from "./deliverer";
export type { EndpointView, DeliveryItem } from "./endpoints";

/** RelayerOptions.webhooks: every field optional. */
export interface WebhookOptions {
  /** Non-public addresses endpoints may resolve to (IPs or CIDR ranges; SIGIL_WEBHOOK_ALLOW_ADDRESSES). Any entry also allows http://. */
  allowAddresses?: string[];
  retry?: RetrySchedule;
  /** Per attempt, default 10 s. */
  timeoutMs?: number;
  /** Attempts in flight at once per instance, default 8. */
  concurrency?: number;
  /** How often the delivery loop looks for due retries, default 1 s (new events wake it at once). */
  deliveryPollMs?: number;
  /** balance.low fires when a charge takes the balance from at least this to below it; default 50 cents. */
  lowBalanceCents?: number;
  /** How old a ledger entry must be before it is turned into an event (ledgerScanner.ts), default 2 s. */
  ledgerSettleMs?: number;
  /** How long finished deliveries (and their events) stay in the delivery log, default 30 days. */
  retentionMs?: number;
  /** Endpoints per account, default 16. */
  maxEndpointsPerAccount?: number;
}

export interface WebhooksDeps {
  db: DataLayer;
  sealer: RecordSealer;
  provider: JsonRpcProvider;
  registry: string;
  chainId: number;
  deployBlock: number;
  confirmations: number;
  pollIntervalMs: number;
  /** The billing ledger's id when billing shares this database (ledger events), else null. */
  ledgerId: string | null;
  instanceId?: string;
  logger: Logger;
  options?: WebhookOptions;
}

export class Webhooks {
  readonly endpoints: Endpoints;
  readonly store: WebhookStore;
  readonly guard: AddressGuard;
  private readonly deliverer: Deliverer;
  private readonly chain: ChainScanner;
  private readonly ledger: LedgerScanner | null;
  private timer: NodeJS.Timeout | null = null;
  private scanning: Promise<void> | null = null;
  private stopped = false;
  private failures = 0;
  private lastLedgerScan = 0;
  private lastPrune = 0;

  constructor(private readonly d: WebhooksDeps) {
    const o = d.options ?? {};
    const allow = o.allowAddresses ?? [];
    this.guard = makeAddressGuard(allow);
    this.store = new WebhookStore(d.db);
    const secrets = new SecretBox(d.sealer);
    this.endpoints = new Endpoints({
      store: this.store,
      secrets,
      urlPolicy: { guard: this.guard, allowHttp: allow.length > 0 },
      maxPerAccount: o.maxEndpointsPerAccount ?? 16,
    });
    this.deliverer = new Deliverer({
      store: this.store,
      secrets,
      guard: this.guard,
      retry: o.retry ?? DEFAULT_RETRY_SCHEDULE,
      timeoutMs: o.timeoutMs ?? 10_000,
      concurrency: o.concurrency ?? 8,
      pollMs: o.deliveryPollMs ?? 1_000,
      maxResponseBytes: 4_096,
      logger: d.logger,
      instanceId: d.instanceId,
    });
    this.chain = new ChainScanner({
      provider: d.provider,
      registry: d.registry,
      chainId: d.chainId,
      deployBlock: d.deployBlock,
      confirmations: d.confirmations,
      store: this.store,
      logger: d.logger,
    });
    this.ledger =
      d.ledgerId === null
        ? null
        : new LedgerScanner({
            store: this.store,
            ledgerId: d.ledgerId,
            lowBalanceCents: o.lowBalanceCents ?? 50,
            settleMs: o.ledgerSettleMs ?? 2_000,
          });
  }

  /**
   * Stores an event the service itself raises (not read from a log: the trigger service's), with one
   * delivery per subscribed endpoint; `eventId` is derived from what happened, so raising it twice
   * (two instances) stores it once.
   */
  async emit(e: {
    eventId: string;
    accountId: string;
    type: EventType;
    data: Record<string, unknown>;
  }): Promise<void> {
    const nowMs = Date.now();
    const payload = {
      id: e.eventId,
      type: e.type,
      created: Math.floor(nowMs / 1000),
      account_id: Number(e.accountId),
      data: e.data,
    };
    const added = await this.store.db.transaction(async (tx) =>
      this.store.addEvent(tx, e.accountId, payload, await this.store.subscribers(e.accountId, tx), nowMs),
    );
    if (added) this.deliverer.wake();
  }

  start(): void {
    this.deliverer.start();
    this.scheduleScan(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.scanning?.catch(() => undefined);
    await this.deliverer.stop();
  }

  private scheduleScan(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.scanning = this.scan().finally(() => (this.scanning = null));
      void this.scanning.then(
        () => {
          this.failures = 0;
          this.scheduleScan(this.d.pollIntervalMs);
        },
        (err: unknown) => {
          this.failures++;
          if (this.failures === 1 || this.failures % 20 === 0)
            this.d.logger.warn(
              { err: (err as Error).message, failures: this.failures },
              "webhook event scan failed; retried",
            );
          this.scheduleScan(Math.min(5_000, this.d.pollIntervalMs * 2 ** Math.min(this.failures, 5)));
        },
      );
    }, ms);
    this.timer.unref();
  }

  private async scan(): Promise<void> {
    let stored = await this.chain.scanOnce();
    if (this.ledger && Date.now() - this.lastLedgerScan >= 500) {
      this.lastLedgerScan = Date.now();
      stored += await this.ledger.scanOnce();
    }
    if (stored > 0) this.deliverer.wake();
    if (Date.now() - this.lastPrune >= 3_600_000) {
      this.lastPrune = Date.now();
      await this.store.prune(Date.now() - (this.d.options?.retentionMs ?? 30 * 24 * 3_600_000));
    }
  }
}
