import type { RequestHandler } from "express";
import type { Logger } from "pino";
import { type DataLayer, openDataLayer } from "../db";
import type { RidingAdmission } from "../db/riding";
import { type HistoryItem, Ledger } from "./ledger";
import {
  type ChargeResult,
  DEFAULT_CHARGE_FLUSH_MS,
  DEFAULT_PRICES,
  DEFAULT_RESERVATION_SLACK_MS,
  Metering,
  type Prices,
  type Principal,
  executionPriceCents,
} from "./metering";
import { formatCents } from "./money";
import type { Reservation } from "./reservations";
import { DEFAULT_MAXIMUM_PAYMENT_CENTS, Payments } from "./payments";
import type { PaymentProcessor } from "./processor";
import type { ForwardRequestId } from "./references";
import type { DeclaredRouter } from "../routes/endpoint";
import { buildRouter } from "./router";
import { createWriteCatchUp, type WriteCatchUp, type WriteCatchUpOptions } from "./catchUp";

export type { Principal, Prices, ChargeResult, HistoryItem, PaymentProcessor, ForwardRequestId, Reservation };
export type { WriteCatchUp, WriteCatchUpOptions, CatchUpReport } from "./catchUp";
export { CAUGHT_UP_OPERATION } from "./catchUp";
export {
  writeChargeReference,
  parseWriteReference,
  executionChargeReference,
  type ParsedWriteReference,
} from "./references";
export type { ProcessorIntent, ProcessorEvent, IntentStatus, CreateIntentRequest } from "./processor";
export { ProcessorError } from "./processor";
export { SimulatedProcessor } from "./simulatedProcessor";
export { StripeProcessor, type StripeProcessorOptions } from "./stripeProcessor";
export {
  DEFAULT_PRICES,
  DEFAULT_CHARGE_FLUSH_MS,
  DEFAULT_RESERVATION_SLACK_MS,
  executionPriceCents,
  pinPriceCents,
} from "./metering";
export { CREDIT_PACKAGES, formatCents } from "./money";
export { CRASH_POINT_ENV } from "./payments";
export { MIGRATIONS, migrate, readVersion, type Migration } from "../db";

export interface Billing {
  /** Mounted by the relayer at /core/v1/billing BEFORE its own JSON body parser: this router parses its own bodies (raw for /webhook). `requireAccountKey` is the relayer's middleware: it sets res.locals.principal (kind "account") or passes an ApiError to next(). */
  router(requireAccountKey: RequestHandler): DeclaredRouter;
  /** Called by the relayer after new_account lands (grants the configured sign-up credit, default 0). */
  onAccountCreated(accountId: string): Promise<void>;
  /**
   * Throws ApiError 402 insufficient_credits (details: balance_cents, price_cents), 403
   * spend_cap_reached, or 503 database_unavailable (the charge could not be recorded: nothing runs).
   */
  assertCanAfford(p: Principal, operation: "write" | "execution"): Promise<void>;
  /**
   * Charge a management write that landed: one forward request, named by what identifies it on chain
   * (chain, forwarder, signer, forwarder nonce; see references.ts). Idempotent on that reference.
   */
  chargeWrite(p: Principal, operation: string, request: ForwardRequestId): Promise<ChargeResult>;
  /**
   * Charge an execution for the time it used, never more than `timeLimitMs` (the run's limit) if given.
   * `requestId` is the HTTP request's own id (one run per request). Idempotent on it. `actionCid`, the
   * CID of the code that ran (inline code: the CID the service computed for it), is recorded with the
   * charge and shown as `action_cid` in the history.
   */
  chargeExecution(
    p: Principal,
    executionMs: number,
    requestId: string,
    timeLimitMs?: number,
    actionCid?: string,
  ): Promise<ChargeResult>;
  /**
   * Admits a run by reserving its worst case (`timeLimitMs` at the price per started second) against
   * the key's cap and the account's balance, atomically across instances (docs/billing.md, "Runs in
   * flight are reserved"). Throws 403 spend_cap_reached or 402 insufficient_credits (naming what is
   * reserved and the largest timeout_ms that would fit), or 503 database_unavailable. Every
   * reservation ends with settleExecution (the run ran) or releaseExecution (it never did).
   * `along`: the run's other admission (its execution lease) to make in the same round trip where
   * both live in one PostgreSQL database (relayer/db/riding.ts); a reservation is then made only with it.
   */
  reserveExecution(p: Principal, timeLimitMs: number, along?: RidingAdmission): Promise<Reservation>;
  /**
   * Charges a reserved run for its time (at most its reservation: the same limit) and releases the
   * rest. `requestId` and `actionCid` as for chargeExecution; idempotent on the request id.
   */
  settleExecution(
    r: Reservation,
    executionMs: number,
    requestId: string,
    actionCid?: string,
  ): Promise<ChargeResult>;
  /** Releases the reservation of a run that never ran; never throws. */
  releaseExecution(r: Reservation): Promise<void>;
  /** Cents spent so far by a usage key (shown as `balance` in list_api_keys), and its cap or null. */
  keySpend(keyAddress: string): Promise<{ spent_cents: number; cap_cents: number | null }>;
  setKeySpendCap(accountId: string, keyAddress: string, capCents: number | null): Promise<void>;
  prices(): {
    write_cents: number;
    execution_cents_per_second: number;
    minimum_payment_cents: number;
    pin_cents_per_100kb: number;
  };
  reconcile(): Promise<void>;
  close(): Promise<void>;

  // Additions beyond the agreed interface.
  /** Before storing a pin of `bytes`: 402 insufficient_credits or 403 spend_cap_reached, like assertCanAfford. */
  assertCanAffordPin(p: Principal, bytes: number): Promise<void>;
  /** Charge a pin of `bytes` of `cid`, once per (account, CID) (reference `pin:<account>:<cid>`). */
  chargePin(p: Principal, bytes: number, cid: string): Promise<ChargeResult>;
  /** What an execution of this length costs (for the `charged_cents` the relayer reports before charging, or estimates). */
  executionPriceCents(executionMs: number, timeLimitMs?: number): number;
  balance(accountId: string): Promise<{ balance_cents: number; balance_display: string }>;
  /** What runs in flight hold on the account now (GET billing/balance shows it as `reserved_cents`). */
  reservedCents(accountId: string): Promise<number>;
  history(
    accountId: string,
    pageNumber: number,
    pageSize: number,
  ): Promise<{ items: HistoryItem[]; total: number }>;
  /** The invariant: the ledger's net sum equals the stored balance. */
  audit(accountId: string): Promise<{ balance_cents: number; ledger_sum_cents: number }>;
  /** Commits usage charges still in the write-behind buffer (reads through this interface do it themselves). */
  flushCharges(): Promise<void>;
  /**
   * The write catch-up (catchUp.ts): charges path-A writes the chain has and the ledger lacks (a
   * charge lost to a crash). The relayer starts one after it starts serving and stops it on close.
   */
  writeCatchUp(opts: WriteCatchUpOptions): WriteCatchUp;
  /** Like reconcile(), with counts. */
  reconcileWithReport(): Promise<{ checked: number; credited: number; errors: number }>;
  readonly ledgerId: string;
  readonly processorKind: "stripe" | "simulated";
  /** Which engine holds the ledger. */
  readonly engine: "sqlite" | "postgres";
  /** The data layer (tests, the audit tool). */
  readonly db: DataLayer;
}

export interface CreateBillingOptions {
  /** The SQLite ledger file (the embedded default); ignored when `databaseUrl` is set. */
  dbPath: string;
  /** postgres://…: the ledger lives in PostgreSQL, shared by every instance (SIGIL_DATABASE_URL). */
  databaseUrl?: string;
  processor: PaymentProcessor;
  prices?: Partial<Prices>;
  signupCreditCents?: number;
  /**
   * Write-behind window for usage charges in ms (default 50): charges are visible to assertCanAfford
   * at once and committed in batches. 0 commits every charge before chargeWrite/chargeExecution return.
   */
  chargeFlushMs?: number;
  /**
   * With the Stripe processor: every this many ms, re-check intents left `processing` and credit those
   * that succeeded (covers deployments without a webhook). Default 300,000 (5 min); 0 turns it off.
   * Never runs with the simulated processor, whose dev endpoint applies changes directly.
   */
  reconcileProcessingEveryMs?: number;
  /**
   * Pause between passes of the write catch-up after its start pass (ms); default 300,000 (5 min), 0:
   * only the pass at start. SIGIL_BILLING_CATCH_UP_MS with npm start.
   */
  writeCatchUpEveryMs?: number;
  /**
   * How long past its run's deadline a reservation counts when nothing renews it (its instance died);
   * default 60,000 ms. Instances renew their runs' reservations while they last.
   */
  reservationSlackMs?: number;
  /** Largest accepted top-up; default 1,000,000 cents ($10,000). */
  maximumPaymentCents?: number;
  logger?: Logger;
}

export async function createBilling(opts: CreateBillingOptions): Promise<Billing> {
  const prices = resolvePrices(opts.prices);
  const signupCredit = opts.signupCreditCents ?? 0;
  if (!Number.isSafeInteger(signupCredit) || signupCredit < 0)
    throw new Error("signupCreditCents must be a non-negative integer");

  const slack = opts.reservationSlackMs ?? DEFAULT_RESERVATION_SLACK_MS;
  if (!Number.isSafeInteger(slack) || slack < 0)
    throw new Error("reservationSlackMs must be a non-negative integer number of ms");

  const db = await openDataLayer({ databaseUrl: opts.databaseUrl, sqlitePath: opts.dbPath });
  const ledgerId = ((await db.exec("SELECT ledger_id FROM ledger_meta")) as Array<{ ledger_id: string }>)[0]
    .ledger_id;
  opts.processor.attach?.(db);
  const ledger = new Ledger(db);
  const metering = new Metering(
    db,
    ledger,
    prices,
    opts.chargeFlushMs ?? DEFAULT_CHARGE_FLUSH_MS,
    opts.logger,
    slack,
  );
  const payments = new Payments(
    db,
    ledger,
    opts.processor,
    ledgerId,
    {
      minimumCents: prices.minimum_payment_cents,
      maximumCents: opts.maximumPaymentCents ?? DEFAULT_MAXIMUM_PAYMENT_CENTS,
    },
    (accountId) => metering.balanceWithPending(accountId),
    opts.logger,
  );

  // Periodic pass for processing intents (Stripe only); unref'd so it never keeps a process alive.
  let periodic: NodeJS.Timeout | null = null;
  const every = opts.reconcileProcessingEveryMs ?? 300_000;
  if (opts.processor.kind === "stripe" && every > 0) {
    let running = false;
    periodic = setInterval(() => {
      if (running || !db.open) return;
      running = true;
      payments
        .reconcile({ onlyProcessing: true })
        .catch((e: unknown) =>
          opts.logger?.error(
            { err: e instanceof Error ? e.message : String(e) },
            "periodic reconcile failed",
          ),
        )
        .finally(() => (running = false));
    }, every);
    periodic.unref();
  }

  return {
    ledgerId,
    processorKind: opts.processor.kind,
    router: (requireAccountKey) =>
      buildRouter(
        { ledger, metering, payments, processor: opts.processor, prices, logger: opts.logger },
        requireAccountKey,
      ),
    engine: db.kind,
    db,
    async onAccountCreated(accountId) {
      await db.transaction(async (tx) => {
        await ledger.ensureAccount(accountId, tx);
        if (signupCredit > 0) {
          await ledger.apply(tx, {
            accountId,
            kind: "credit",
            amountCents: signupCredit,
            reference: "signup:" + accountId,
            keyAddress: null,
            operation: "signup_credit",
          });
        }
      });
    },
    assertCanAfford: (p, operation) => metering.assertCanAfford(p, operation),
    chargeWrite: (p, operation, request) => metering.chargeWrite(p, operation, request),
    chargeExecution: (p, ms, requestId, timeLimitMs, actionCid) =>
      metering.chargeExecution(p, ms, requestId, timeLimitMs, actionCid),
    reserveExecution: (p, timeLimitMs, along) => metering.reserveExecution(p, timeLimitMs, along),
    settleExecution: (r, ms, requestId, actionCid) => metering.settleExecution(r, ms, requestId, actionCid),
    releaseExecution: (r) => metering.releaseExecution(r),
    reservedCents: async (accountId) => (await metering.balanceView(accountId)).reserved_cents,
    assertCanAffordPin: (p, bytes) => metering.assertCanAffordPin(p, bytes),
    chargePin: (p, bytes, cid) => metering.chargePin(p, bytes, cid),
    keySpend: (keyAddress) => metering.keySpend(keyAddress),
    setKeySpendCap: (accountId, keyAddress, capCents) =>
      metering.setKeySpendCap(accountId, keyAddress, capCents),
    prices: () => ({ ...prices }),
    executionPriceCents: (ms, timeLimitMs) => executionPriceCents(prices, ms, timeLimitMs),
    async balance(accountId) {
      const cents = await metering.balanceWithPending(accountId);
      return { balance_cents: cents, balance_display: formatCents(cents) };
    },
    async history(accountId, pageNumber, pageSize) {
      await metering.flush();
      return ledger.history(accountId, pageNumber, pageSize);
    },
    async audit(accountId) {
      await metering.flush();
      return ledger.audit(accountId);
    },
    flushCharges: () => metering.flush(),
    writeCatchUp: (o) =>
      createWriteCatchUp(
        { db, ledger, writeCents: () => prices.write_cents },
        { ...o, everyMs: o.everyMs ?? opts.writeCatchUpEveryMs },
      ),
    async reconcile() {
      await payments.reconcile();
    },
    reconcileWithReport: () => payments.reconcile(),
    async close() {
      if (periodic) clearInterval(periodic);
      metering.stop();
      if (!db.open) return;
      await metering.flush();
      await db.close();
    },
  };
}

function resolvePrices(p: Partial<Prices> | undefined): Prices {
  const prices = { ...DEFAULT_PRICES, ...(p ?? {}) };
  for (const [k, v] of Object.entries(prices)) {
    if (!Number.isSafeInteger(v) || v < 0)
      throw new Error(`billing price ${k} must be a non-negative integer number of cents`);
  }
  if (prices.minimum_payment_cents < 50)
    throw new Error("minimum_payment_cents below Stripe's 50-cent minimum");
  return prices;
}
