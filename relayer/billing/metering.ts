import { sql } from "kysely";
import type { Logger } from "pino";
import { type DataLayer, type Sql, prepare } from "../db";
import { ApiError, isApiError } from "../errors";
import type { Ledger } from "./ledger";
import {
  executionChargeReference,
  pinChargeReference,
  writeChargeReference,
  type ForwardRequestId,
} from "./references";

export interface Principal {
  accountId: string /* decimal */;
  keyAddress: string;
  kind: "account" | "usage";
}

export interface Prices {
  /** A management write that landed on chain. */
  write_cents: number;
  /** An execution, per started second (minimum one second). */
  execution_cents_per_second: number;
  /** The smallest top-up create_payment_intent accepts. */
  minimum_payment_cents: number;
  /**
   * A pin (POST /actions, or code the relayer fetched from IPFS for the account), per started 100 KB
   * (102,400 bytes) of content, at least one unit; once per (account, CID) (docs/billing.md, "Pins").
   */
  pin_cents_per_100kb: number;
}

export const DEFAULT_PRICES: Prices = Object.freeze({
  write_cents: 1,
  execution_cents_per_second: 1,
  minimum_payment_cents: 500,
  pin_cents_per_100kb: 1,
});

/** The unit of the pin price. */
export const PIN_PRICE_UNIT_BYTES = 100 * 1024;

/** Cost of pinning `bytes`: every started 100 KB, at least one. */
export function pinPriceCents(prices: Prices, bytes: number): number {
  const b = Number.isFinite(bytes) && bytes > 0 ? bytes : 0;
  return Math.max(1, Math.ceil(b / PIN_PRICE_UNIT_BYTES)) * prices.pin_cents_per_100kb;
}

/** Default write-behind window for usage charges (see docs/billing.md, "Charges are written behind"). */
export const DEFAULT_CHARGE_FLUSH_MS = 50;
const MAX_PENDING_CHARGES = 256;

export interface ChargeResult {
  charged_cents: number;
  /** false when this reference had already been charged (a retry): nothing changed. */
  applied: boolean;
}

/**
 * Cost of an execution that ran `executionMs`: every started second, at least one. With the run's time
 * limit, the billed time never exceeds it: a run stopped at its limit is measured a fraction of a
 * millisecond past it (the timer fires, then the worker is stopped), and the caller chose (or was told)
 * the limit, so that is what it pays for: ceil(limit / 1000) seconds, never one more.
 */
export function executionPriceCents(prices: Prices, executionMs: number, timeLimitMs?: number): number {
  let ms = Number.isFinite(executionMs) && executionMs > 0 ? executionMs : 0;
  if (timeLimitMs !== undefined && Number.isFinite(timeLimitMs) && timeLimitMs > 0)
    ms = Math.min(ms, timeLimitMs);
  return Math.max(1, Math.ceil(ms / 1000)) * prices.execution_cents_per_second;
}

interface PendingCharge {
  accountId: string;
  keyAddress: string;
  cents: number;
  reference: string;
  operation: string;
  actionCid: string | null;
}

const Q = {
  spend: prepare("metering.spend", (db, a) =>
    db.selectFrom("key_spend").select(["spent_cents", "cap_cents"]).where("key_address", "=", a(0)),
  ),
  // Everything assertCanAfford needs in one statement: it runs before every metered request.
  afford: prepare("metering.afford", (db, a) =>
    db.selectNoFrom((eb) => [
      eb.selectFrom("accounts").select("balance_cents").where("account_id", "=", a(0)).as("balance_cents"),
      eb
        .selectFrom("key_spend")
        .select("spent_cents")
        .where("key_address", "=", a(1))
        .where("account_id", "=", a(0))
        .as("spent_cents"),
      eb
        .selectFrom("key_spend")
        .select("cap_cents")
        .where("key_address", "=", a(1))
        .where("account_id", "=", a(0))
        .as("cap_cents"),
    ]),
  ),
  // A key address can be removed from one account and registered under another (the registry
  // frees removed addresses): spend and cap belong to the (account, key) pair, so a row left by
  // another account starts over. SET expressions read the row as it was before the update.
  addSpend: prepare("metering.addSpend", (db, a) =>
    db
      .insertInto("key_spend")
      .values({ key_address: a(0), account_id: a(1), spent_cents: a(2), cap_cents: null })
      .onConflict((oc) =>
        oc.column("key_address").doUpdateSet({
          spent_cents: sql`CASE WHEN key_spend.account_id = excluded.account_id THEN key_spend.spent_cents + excluded.spent_cents ELSE excluded.spent_cents END`,
          cap_cents: sql`CASE WHEN key_spend.account_id = excluded.account_id THEN key_spend.cap_cents ELSE NULL END`,
          account_id: sql`excluded.account_id`,
        }),
      ),
  ),
  setCap: prepare("metering.setCap", (db, a) =>
    db
      .insertInto("key_spend")
      .values({ key_address: a(0), account_id: a(1), spent_cents: 0, cap_cents: a(2) })
      .onConflict((oc) =>
        oc.column("key_address").doUpdateSet({
          cap_cents: sql`excluded.cap_cents`,
          spent_cents: sql`CASE WHEN key_spend.account_id = excluded.account_id THEN key_spend.spent_cents ELSE 0 END`,
          account_id: sql`excluded.account_id`,
        }),
      ),
  ),
};

/**
 * Usage charges. Checked before work starts (assertCanAfford), charged after it finished
 * (chargeWrite only for writes that landed; chargeExecution for the time used). A charge is never
 * refused after the fact: the work has been done, so it is recorded in full even if that takes the
 * balance (or a key's spend) past zero (or its cap); the next assertCanAfford then refuses.
 *
 * Charges are written behind: they are applied to an in-memory overlay at once (so the next
 * assertCanAfford already sees them) and committed to the ledger in one transaction per
 * `flushMs` window (or every 256 charges, or before any read of balances, history or spend, or on
 * close). A committed transaction per trivial execution would cost more than the execution itself.
 * flushMs = 0 commits every charge before returning.
 */
export class Metering {
  private readonly pending = new Map<string, PendingCharge>();
  private readonly pendingByAccount = new Map<string, number>();
  private readonly pendingByKey = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  /** The flush in progress: flushes never overlap (a charge is committed by exactly one of them). */
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly db: DataLayer,
    private readonly ledger: Ledger,
    private readonly prices: Prices,
    private readonly flushMs: number = DEFAULT_CHARGE_FLUSH_MS,
    private readonly logger?: Logger,
  ) {}

  /**
   * Reads the database (never a cache): on PostgreSQL that is what refuses work, with 503
   * database_unavailable, when the database cannot be reached and the charge could not be recorded.
   */
  async assertCanAfford(p: Principal, operation: "write" | "execution"): Promise<void> {
    const price = operation === "write" ? this.prices.write_cents : executionPriceCents(this.prices, 0);
    await this.assertCanAffordCents(p, operation, price);
  }

  /** Before a pin of `bytes` is stored: the same refusals as assertCanAfford, at the pin's price. */
  assertCanAffordPin(p: Principal, bytes: number): Promise<void> {
    return this.assertCanAffordCents(p, "pin", pinPriceCents(this.prices, bytes));
  }

  private async assertCanAffordCents(p: Principal, operation: string, price: number): Promise<void> {
    if (price === 0) return;
    const key = normalizeAddress(p.keyAddress);
    const row = (await this.db.first(Q.afford, [p.accountId, key]))!;
    // The cap is checked first: it is the narrower, key-specific refusal and names the key's problem.
    if (row.cap_cents !== null) {
      const spent = (row.spent_cents ?? 0) + (this.pendingByKey.get(key) ?? 0);
      if (spent + price > row.cap_cents) {
        throw new ApiError(
          403,
          "spend_cap_reached",
          `this key has spent ${spent} of its ${row.cap_cents}-cent cap`,
          {
            details: { key_address: key, spent_cents: spent, cap_cents: row.cap_cents, price_cents: price },
          },
        );
      }
    }
    const balance = (row.balance_cents ?? 0) - (this.pendingByAccount.get(p.accountId) ?? 0);
    if (balance < price) {
      throw new ApiError(
        402,
        "insufficient_credits",
        `this ${operation} costs ${price} cents and the balance is ${balance} cents`,
        {
          details: { balance_cents: balance, price_cents: price },
        },
      );
    }
  }

  /** One forward request that landed: charged once per request, whatever transaction carried it. */
  chargeWrite(p: Principal, operation: string, request: ForwardRequestId): Promise<ChargeResult> {
    return this.charge(p, this.prices.write_cents, writeChargeReference(request), operation);
  }

  /**
   * One run (`requestId`: the HTTP request's own id), for its time, capped at its time limit if given.
   * `actionCid` is recorded with the charge, so spend can be told apart per action.
   */
  chargeExecution(
    p: Principal,
    executionMs: number,
    requestId: string,
    timeLimitMs?: number,
    actionCid?: string,
  ): Promise<ChargeResult> {
    return this.charge(
      p,
      executionPriceCents(this.prices, executionMs, timeLimitMs),
      executionChargeReference(requestId),
      "execution",
      actionCid ?? null,
    );
  }

  /** Charge a pin of `bytes` of `cid`, once per (account, CID). */
  chargePin(p: Principal, bytes: number, cid: string): Promise<ChargeResult> {
    return this.charge(p, pinPriceCents(this.prices, bytes), pinChargeReference(p.accountId, cid), "pin");
  }

  keySpend(keyAddress: string): Promise<{ spent_cents: number; cap_cents: number | null }> {
    return this.spendWithPending(normalizeAddress(keyAddress));
  }

  async setKeySpendCap(accountId: string, keyAddress: string, capCents: number | null): Promise<void> {
    if (capCents !== null && (!Number.isSafeInteger(capCents) || capCents < 0)) {
      throw new ApiError(
        400,
        "invalid_request",
        "a spend cap is a non-negative integer number of cents, or null for none",
        {
          details: { field: "cap_cents" },
        },
      );
    }
    await this.db.run(Q.setCap, [normalizeAddress(keyAddress), accountId, capCents]);
  }

  /** Balance including charges not yet committed. */
  async balanceWithPending(accountId: string): Promise<number> {
    return (await this.ledger.balance(accountId)) - (this.pendingByAccount.get(accountId) ?? 0);
  }

  /**
   * Commits every pending charge in one transaction. Idempotent; a failure (the database cannot be
   * reached) keeps them pending, still counted against balances and caps, and retries later.
   */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.flushing) await this.flushing;
    if (this.pending.size === 0) return;
    const run = this.commit([...this.pending.values()]);
    this.flushing = run;
    try {
      await run;
    } finally {
      this.flushing = null;
    }
  }

  private async commit(batch: PendingCharge[]): Promise<void> {
    try {
      await this.db.transaction(async (tx) => {
        const applied = await this.ledger.applyBatch(
          tx,
          batch.map((c) => ({
            accountId: c.accountId,
            kind: "debit" as const,
            amountCents: c.cents,
            reference: c.reference,
            keyAddress: c.keyAddress,
            operation: c.operation,
            actionCid: c.actionCid,
          })),
        );
        const spend = new Map<string, { accountId: string; cents: number }>();
        batch.forEach((c, i) => {
          if (!applied[i].applied) return;
          const s = spend.get(c.keyAddress) ?? { accountId: c.accountId, cents: 0 };
          s.cents += c.cents;
          spend.set(c.keyAddress, s);
        });
        for (const [key, s] of [...spend].sort(([a], [b]) => (a < b ? -1 : 1)))
          await tx.run(Q.addSpend, [key, s.accountId, s.cents]);
      });
    } catch (e) {
      this.logger?.error(
        { err: e instanceof Error ? e.message : String(e), pending: batch.length },
        "billing: could not commit usage charges; will retry",
      );
      this.arm();
      return;
    }
    // Only what this batch committed leaves the overlay: charges made while it ran stay pending.
    for (const c of batch) {
      this.pending.delete(c.reference);
      subtract(this.pendingByAccount, c.accountId, c.cents);
      subtract(this.pendingByKey, c.keyAddress, c.cents);
    }
  }

  private async charge(
    p: Principal,
    cents: number,
    reference: string,
    operation: string,
    actionCid: string | null = null,
  ): Promise<ChargeResult> {
    // Refused here, before the write-behind buffer: the ledger would refuse it at flush time, and a
    // batch that cannot commit holds every other account's charges back until the process dies.
    if (!Number.isSafeInteger(cents) || cents < 0)
      throw new Error(`a charge must be a safe integer number of cents, got ${cents} (${reference})`);
    const key = normalizeAddress(p.keyAddress);
    if (cents === 0 || this.pending.has(reference) || (await this.alreadyCharged(reference))) {
      return { charged_cents: 0, applied: false };
    }
    // Re-checked after the read: a concurrent charge of the same reference in this process may have
    // been buffered meanwhile. Across instances, the ledger's UNIQUE reference decides at flush time.
    if (this.pending.has(reference)) return { charged_cents: 0, applied: false };
    this.pending.set(reference, {
      accountId: p.accountId,
      keyAddress: key,
      cents,
      reference,
      operation,
      actionCid,
    });
    this.pendingByAccount.set(p.accountId, (this.pendingByAccount.get(p.accountId) ?? 0) + cents);
    this.pendingByKey.set(key, (this.pendingByKey.get(key) ?? 0) + cents);
    if (this.flushMs <= 0 || this.pending.size >= MAX_PENDING_CHARGES) await this.flush();
    else this.arm();
    return { charged_cents: cents, applied: true };
  }

  /**
   * Whether the ledger already holds this reference. A charge comes after the work, so it is never
   * refused: if the database cannot be asked now, the charge is buffered anyway and the ledger's
   * UNIQUE reference makes a duplicate a no-op when it is committed.
   */
  private async alreadyCharged(reference: string): Promise<boolean> {
    try {
      return await this.ledger.hasReference(reference);
    } catch (e) {
      if (!isApiError(e)) throw e;
      return false;
    }
  }

  private arm(): void {
    if (this.timer) return;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        void this.flush();
      },
      Math.max(1, this.flushMs),
    );
    // A pending flush must not keep a process alive; close() flushes what is left.
    this.timer.unref();
  }

  private async spendWithPending(key: string): Promise<{ spent_cents: number; cap_cents: number | null }> {
    const row = await this.db.first(Q.spend, [key]);
    const pending = this.pendingByKey.get(key) ?? 0;
    return row
      ? { spent_cents: row.spent_cents + pending, cap_cents: row.cap_cents }
      : { spent_cents: pending, cap_cents: null };
  }
}

function subtract(m: Map<string, number>, k: string, cents: number): void {
  const left = (m.get(k) ?? 0) - cents;
  if (left === 0) m.delete(k);
  else m.set(k, left);
}

/** Adds a committed charge to its key's spend, inside the charging transaction (also the write catch-up's). */
export async function addKeySpend(
  tx: Sql,
  keyAddress: string,
  accountId: string,
  cents: number,
): Promise<void> {
  await tx.run(Q.addSpend, [normalizeAddress(keyAddress), accountId, cents]);
}

export function normalizeAddress(a: string): string {
  return a.toLowerCase();
}
