import BetterSqlite3, { type Database } from "better-sqlite3";
import type { RequestHandler, Router } from "express";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "pino";
import { type HistoryItem, Ledger } from "./ledger";
import {
  type ChargeResult,
  DEFAULT_CHARGE_FLUSH_MS,
  DEFAULT_PRICES,
  Metering,
  type Prices,
  type Principal,
  executionPriceCents,
} from "./metering";
import { migrate } from "./migrations";
import { formatCents } from "./money";
import { DEFAULT_MAXIMUM_PAYMENT_CENTS, Payments } from "./payments";
import type { PaymentProcessor } from "./processor";
import type { ForwardRequestId } from "./references";
import { buildRouter } from "./router";

export type { Principal, Prices, ChargeResult, HistoryItem, PaymentProcessor, ForwardRequestId };
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
export { DEFAULT_PRICES, DEFAULT_CHARGE_FLUSH_MS, executionPriceCents, pinPriceCents } from "./metering";
export { CREDIT_PACKAGES, formatCents } from "./money";
export { CRASH_POINT_ENV } from "./payments";
export { MIGRATIONS, migrate, readVersion } from "./migrations";

export interface Billing {
  /** Mounted by the relayer at /core/v1/billing BEFORE its own JSON body parser: this router parses its own bodies (raw for /webhook). `requireAccountKey` is the relayer's middleware: it sets res.locals.principal (kind "account") or passes an ApiError to next(). */
  router(requireAccountKey: RequestHandler): Router;
  /** Called by the relayer after new_account lands (grants the configured sign-up credit, default 0). */
  onAccountCreated(accountId: string): void;
  /** Throws ApiError 402 insufficient_credits (details: balance_cents, price_cents) or 403 spend_cap_reached. */
  assertCanAfford(p: Principal, operation: "write" | "execution"): void;
  /**
   * Charge a management write that landed: one forward request, named by what identifies it on chain
   * (chain, forwarder, signer, forwarder nonce; see references.ts). Idempotent on that reference.
   */
  chargeWrite(p: Principal, operation: string, request: ForwardRequestId): ChargeResult;
  /**
   * Charge an execution for the time it used, never more than `timeLimitMs` (the run's limit) if given.
   * `requestId` is the HTTP request's own id (one run per request). Idempotent on it.
   */
  chargeExecution(p: Principal, executionMs: number, requestId: string, timeLimitMs?: number): ChargeResult;
  /** Cents spent so far by a usage key (shown as `balance` in list_api_keys), and its cap or null. */
  keySpend(keyAddress: string): { spent_cents: number; cap_cents: number | null };
  setKeySpendCap(accountId: string, keyAddress: string, capCents: number | null): void;
  prices(): {
    write_cents: number;
    execution_cents_per_second: number;
    minimum_payment_cents: number;
    pin_cents_per_100kb: number;
  };
  reconcile(): Promise<void>;
  close(): void;

  // Additions beyond the agreed interface.
  /** Before storing a pin of `bytes`: 402 insufficient_credits or 403 spend_cap_reached, like assertCanAfford. */
  assertCanAffordPin(p: Principal, bytes: number): void;
  /** Charge a pin of `bytes` of `cid`, once per (account, CID) (reference `pin:<account>:<cid>`). */
  chargePin(p: Principal, bytes: number, cid: string): ChargeResult;
  /** What an execution of this length costs (for the `charged_cents` the relayer reports before charging, or estimates). */
  executionPriceCents(executionMs: number, timeLimitMs?: number): number;
  balance(accountId: string): { balance_cents: number; balance_display: string };
  history(accountId: string, pageNumber: number, pageSize: number): { items: HistoryItem[]; total: number };
  /** The invariant: the ledger's net sum equals the stored balance. */
  audit(accountId: string): { balance_cents: number; ledger_sum_cents: number };
  /** Commits usage charges still in the write-behind buffer (reads through this interface do it themselves). */
  flushCharges(): void;
  /** Like reconcile(), with counts. */
  reconcileWithReport(): Promise<{ checked: number; credited: number; errors: number }>;
  readonly ledgerId: string;
  readonly processorKind: "stripe" | "simulated";
}

export interface CreateBillingOptions {
  dbPath: string;
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
  /** Largest accepted top-up; default 1,000,000 cents ($10,000). */
  maximumPaymentCents?: number;
  logger?: Logger;
}

export function createBilling(opts: CreateBillingOptions): Billing {
  const prices = resolvePrices(opts.prices);
  const signupCredit = opts.signupCreditCents ?? 0;
  if (!Number.isSafeInteger(signupCredit) || signupCredit < 0)
    throw new Error("signupCreditCents must be a non-negative integer");

  const db = openDatabase(opts.dbPath);
  const ledgerId = (db.prepare("SELECT ledger_id FROM ledger_meta").get() as { ledger_id: string }).ledger_id;
  opts.processor.attach?.(db);
  const ledger = new Ledger(db);
  const metering = new Metering(
    db,
    ledger,
    prices,
    opts.chargeFlushMs ?? DEFAULT_CHARGE_FLUSH_MS,
    opts.logger,
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
    onAccountCreated(accountId) {
      db.transaction(() => {
        ledger.ensureAccount(accountId);
        if (signupCredit > 0) {
          ledger.apply({
            accountId,
            kind: "credit",
            amountCents: signupCredit,
            reference: "signup:" + accountId,
            keyAddress: null,
            operation: "signup_credit",
          });
        }
      }).immediate();
    },
    assertCanAfford: (p, operation) => metering.assertCanAfford(p, operation),
    chargeWrite: (p, operation, request) => metering.chargeWrite(p, operation, request),
    chargeExecution: (p, ms, requestId, timeLimitMs) =>
      metering.chargeExecution(p, ms, requestId, timeLimitMs),
    assertCanAffordPin: (p, bytes) => metering.assertCanAffordPin(p, bytes),
    chargePin: (p, bytes, cid) => metering.chargePin(p, bytes, cid),
    keySpend: (keyAddress) => metering.keySpend(keyAddress),
    setKeySpendCap: (accountId, keyAddress, capCents) =>
      metering.setKeySpendCap(accountId, keyAddress, capCents),
    prices: () => ({ ...prices }),
    executionPriceCents: (ms, timeLimitMs) => executionPriceCents(prices, ms, timeLimitMs),
    balance(accountId) {
      const cents = metering.balanceWithPending(accountId);
      return { balance_cents: cents, balance_display: formatCents(cents) };
    },
    history(accountId, pageNumber, pageSize) {
      metering.flush();
      return ledger.history(accountId, pageNumber, pageSize);
    },
    audit(accountId) {
      metering.flush();
      return ledger.audit(accountId);
    },
    flushCharges: () => metering.flush(),
    async reconcile() {
      await payments.reconcile();
    },
    reconcileWithReport: () => payments.reconcile(),
    close() {
      if (periodic) clearInterval(periodic);
      if (!db.open) return;
      metering.flush();
      db.close();
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

/**
 * WAL for concurrent readers, and a busy timeout for other processes on the same file.
 * synchronous=NORMAL: every commit survives a crash of the process; the transactions that record
 * money coming in switch to FULL for themselves (Payments.observe), so they also survive power loss.
 */
export function openDatabase(path: string): Database {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db = new BetterSqlite3(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  db.pragma("foreign_keys = ON");
  try {
    migrate(db);
  } catch (e) {
    db.close();
    throw e;
  }
  return db;
}
