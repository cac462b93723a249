import { sql } from "kysely";
import type { Logger } from "pino";
import { type DataLayer, type Sql, prepare } from "../db";
import type { RidingAdmission } from "../db/riding";
import { ApiError, isApiError } from "../errors";
import type { Ledger } from "./ledger";
import type { Principal } from "./principal";
import {
  type LocalExtra,
  type Reservation,
  type Standing,
  deleteReservations,
  readStanding,
  renew,
  reserve,
  shrinkSettled,
  verdict,
} from "./reservations";
import {
  executionChargeReference,
  pinChargeReference,
  writeChargeReference,
  type ForwardRequestId,
} from "./references";

export type { Principal };

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
/**
 * How long past its run's deadline a reservation keeps counting when nothing renews it (its instance
 * died): long enough for a run that waited in the executor's queue, clock differences between
 * instances and a few missed renewals; short enough that a crash does not block an account for long.
 */
export const DEFAULT_RESERVATION_SLACK_MS = 60_000;
const MAX_PENDING_CHARGES = 256;
/**
 * PostgreSQL: how long a settled row waits for this instance's next admission to carry its shrink
 * (in the same round trip) before it is sent on its own, together with every other one waiting.
 * Under load the next admission comes within a millisecond, and one client's next request within a
 * few; an idle instance pays one statement. Not armed when the flush (which deletes the rows) comes first.
 */
export const SHRINK_RIDE_MS = 20;

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
  /** The run's reservation, whose row this charge replaces in the flush that commits it. */
  reservationId: string | null;
}

const Q = {
  spend: prepare("metering.spend", (db, a) =>
    db.selectFrom("key_spend").select(["spent_cents", "cap_cents"]).where("key_address", "=", a(0)),
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
  /** Every uncommitted charge, per account and per key (what balance and spend show). */
  private readonly pendingByAccount = new Map<string, number>();
  private readonly pendingByKey = new Map<string, number>();
  /**
   * Uncommitted charges that no reservation row stands for (writes, pins, unreserved executions):
   * what this instance adds to the database's view in a check. A reserved run's charge is not here:
   * its row holds it until the flush replaces the row by the charge, in one transaction.
   */
  private readonly unreservedByAccount = new Map<string, number>();
  private readonly unreservedByKey = new Map<string, number>();
  /** This instance's reservations whose row no committed flush has deleted yet. */
  private readonly held = new Map<string, Reservation>();
  /** Reservations of runs that charged nothing (refused by the executor, a repeated reference). */
  private readonly releases = new Set<string>();
  /**
   * Settled rows not yet shrunk to their charge. SQLite: shrunk in this instance's next reservation
   * transaction. PostgreSQL: until the shrink sent at once has landed.
   */
  private readonly shrinks = new Map<string, Reservation>();
  /**
   * Shrinks an admission or the shrink timer is carrying right now: not handed to another one
   * meanwhile (concurrent admissions each carried every waiting shrink, ~6 updates per run at 50
   * clients, most of them no-ops). Back to waiting if that round trip fails.
   */
  private readonly shrinksSent = new Set<string>();
  private renewTimer: NodeJS.Timeout | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** PostgreSQL: sends the shrinks no admission carried within SHRINK_RIDE_MS. */
  private shrinkTimer: NodeJS.Timeout | null = null;
  /** The flush in progress: flushes never overlap (a charge is committed by exactly one of them). */
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly db: DataLayer,
    private readonly ledger: Ledger,
    private readonly prices: Prices,
    private readonly flushMs: number = DEFAULT_CHARGE_FLUSH_MS,
    private readonly logger?: Logger,
    private readonly reservationSlackMs: number = DEFAULT_RESERVATION_SLACK_MS,
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
    const now = Date.now();
    // This instance's part first, then the database: a flush committing in between is then counted
    // twice (a refusal a moment early), never not at all.
    const extra = this.localExtra(p.accountId, key, now);
    const standing = await readStanding(this.db, p.accountId, key, now);
    const v = verdict(standing, extra, price);
    if (v !== "fits") throw this.refusal(v, p.accountId, key, standing, extra, price, { operation });
  }

  /**
   * Admits a run: reserves its worst case (its time limit at the price per started second) against
   * the key's cap and the account's balance, atomically with every other instance's reservations, or
   * refuses it (403 spend_cap_reached, 402 insufficient_credits) naming what is reserved and the
   * largest timeout_ms that would fit. Settle it with settleExecution, or releaseExecution if it never ran.
   * `along` (PostgreSQL, the same database): another admission of the run, made in the same round
   * trip only if the reservation fits; its refusal is thrown instead and the reservation undone. It
   * does not ride for a free run (nothing reserved) or on SQLite: the caller then admits it on its own.
   */
  async reserveExecution(p: Principal, timeLimitMs: number, along?: RidingAdmission): Promise<Reservation> {
    // The executor accepts any positive limit (an operator may configure 1500.5 ms): so does this.
    if (!Number.isFinite(timeLimitMs) || timeLimitMs <= 0 || timeLimitMs > 2 ** 40)
      throw new Error(`a run's time limit must be a positive number of ms, got ${timeLimitMs}`);
    const key = normalizeAddress(p.keyAddress);
    const worst = executionPriceCents(this.prices, timeLimitMs, timeLimitMs);
    const now = Date.now();
    const expiresMs = now + Math.ceil(timeLimitMs) + this.reservationSlackMs;
    if (worst === 0) {
      // Free executions reserve nothing; the handle is never stored, so releasing it is a no-op.
      return {
        id: "free",
        principal: p,
        keyAddress: key,
        timeLimitMs,
        worstCents: 0,
        cents: 0,
        expiresMs,
        state: "running",
      };
    }
    const extra = this.localExtra(p.accountId, key, now);
    const shrinks = this.takeShrinks();
    let outcome: Awaited<ReturnType<typeof reserve>>;
    try {
      outcome = await reserve(this.db, {
        principal: p,
        keyAddress: key,
        cents: worst,
        timeLimitMs,
        expiresMs,
        nowMs: now,
        extra,
        shrinks,
        along,
      });
    } catch (err) {
      this.shrinksLanded(shrinks, false);
      throw err;
    }
    this.shrinksLanded(shrinks, true);
    const { standing, reservation, refusedAlong } = outcome;
    // The riding admission (the run's lease) refused: the reservation was undone with it.
    if (refusedAlong) throw refusedAlong;
    if (!reservation) {
      const v = verdict(standing, extra, worst);
      throw this.refusal(v === "fits" ? "balance" : v, p.accountId, key, standing, extra, worst, {
        timeLimitMs,
      });
    }
    this.held.set(reservation.id, reservation);
    this.armRenewal();
    return reservation;
  }

  /**
   * Ends a run: charges its time (never more than its reservation: the same limit priced the same
   * way) and releases the rest. The charge is written behind like any other; the reservation's row
   * shrinks to the charge before the next admission looks at it (afterSettle) and is deleted in the
   * transaction that commits the charge.
   */
  async settleExecution(
    r: Reservation,
    executionMs: number,
    requestId: string,
    actionCid?: string,
  ): Promise<ChargeResult> {
    // A run is charged once: a reservation already settled or released charges nothing more. (The
    // ledger's reference would refuse a second charge too, but it is not read for executions: below.)
    if (r.state !== "running") return { charged_cents: 0, applied: false };
    const cents = executionPriceCents(this.prices, executionMs, r.timeLimitMs);
    try {
      return await this.charge(
        r.principal,
        cents,
        executionChargeReference(requestId),
        "execution",
        actionCid ?? null,
        r,
        // The reference is the request id, a random UUID this instance made for this request
        // (relayer/http/context.ts), so no ledger can hold it yet: asking would be a round trip on
        // every execution's answer for nothing (the ledger's UNIQUE reference still stands guard).
        true,
      );
    } catch (e) {
      await this.releaseExecution(r);
      throw e;
    }
  }

  /** A run that never ran (executor busy, too many concurrent runs): its reservation is released. */
  async releaseExecution(r: Reservation): Promise<void> {
    if (this.held.get(r.id) !== r || r.state !== "running") return;
    r.state = "settled";
    r.cents = 0;
    this.releases.add(r.id);
    await this.afterSettle(r);
  }

  /** The row follows the local view, then the next flush deletes it (at once in strict mode). */
  private async afterSettle(r: Reservation): Promise<void> {
    if (this.flushMs <= 0 || this.pending.size + this.releases.size >= MAX_PENDING_CHARGES) {
      await this.flush();
      return;
    }
    // Until the row shrinks it holds more than the charge: a refusal a moment early at worst, never a
    // run too many. The shrink rides along with this instance's next reservation, whose check it is
    // for, instead of a commit of its own (SQLite: ≈ 0.015 ms per run; PostgreSQL: a round trip).
    // PostgreSQL: other instances see the row too, so one no admission carried within SHRINK_RIDE_MS
    // is sent on its own (with every other one waiting then), off the answer's path.
    this.shrinks.set(r.id, r);
    if (this.db.kind === "postgres" && this.flushMs > SHRINK_RIDE_MS) this.armShrink();
    this.arm();
  }

  /**
   * Settled rows not shrunk yet and not being carried already, as [id, cents], for the next admission
   * or the shrink timer to carry (marked as being carried until `shrinksLanded`).
   */
  private takeShrinks(): Array<readonly [string, number]> {
    const taken: Array<readonly [string, number]> = [];
    for (const r of this.shrinks.values())
      if (!this.shrinksSent.has(r.id)) {
        this.shrinksSent.add(r.id);
        taken.push([r.id, r.cents]);
      }
    return taken;
  }

  /** The round trip that carried `shrinks` ended: applied (`ok`), or waiting again. */
  private shrinksLanded(shrinks: ReadonlyArray<readonly [string, number]>, ok: boolean): void {
    for (const [id] of shrinks) {
      this.shrinksSent.delete(id);
      if (ok) this.shrinks.delete(id);
    }
  }

  private armShrink(): void {
    if (this.shrinkTimer) return;
    this.shrinkTimer = setTimeout(() => {
      this.shrinkTimer = null;
      const shrinks = this.takeShrinks();
      shrinkSettled(this.db, shrinks).then(
        () => this.shrinksLanded(shrinks, true),
        () => this.shrinksLanded(shrinks, false), // the flush deletes the rows anyway
      );
    }, SHRINK_RIDE_MS);
    this.shrinkTimer.unref();
  }

  /**
   * What this instance adds to the database's view of an account and key: its uncommitted charges
   * that no reservation row stands for, and its own reservations whose row has expired (a run still
   * in flight whose renewal failed, or a settled charge whose flush is late): the database stopped
   * counting those, this instance has not.
   */
  private localExtra(accountId: string, key: string, now: number): LocalExtra {
    let account = this.unreservedByAccount.get(accountId) ?? 0;
    let keyCents = this.unreservedByKey.get(key) ?? 0;
    for (const r of this.held.values()) {
      if (r.expiresMs > now || r.principal.accountId !== accountId) continue;
      account += r.cents;
      if (r.keyAddress === key) keyCents += r.cents;
    }
    return { account, key: keyCents };
  }

  /**
   * The refusal, in the numbers a user knows: the balance and spend as shown elsewhere (charges
   * included), and what runs in flight hold on top of them. For a run, the largest timeout_ms (whole
   * seconds) whose worst case would fit, if any does.
   */
  private refusal(
    v: "cap" | "balance",
    accountId: string,
    key: string,
    s: Standing,
    extra: LocalExtra,
    price: number,
    what: { operation?: string; timeLimitMs?: number },
  ): ApiError {
    const balance = s.balance_cents - (this.pendingByAccount.get(accountId) ?? 0);
    const available = s.balance_cents - extra.account - s.reserved_account_cents;
    const reserved = Math.max(0, balance - available);
    const spent = s.spent_cents + (this.pendingByKey.get(key) ?? 0);
    const keyRoom =
      s.cap_cents === null ? Infinity : s.cap_cents - (s.spent_cents + extra.key + s.reserved_key_cents);
    const keyReserved = s.cap_cents === null ? 0 : Math.max(0, s.cap_cents - keyRoom - spent);
    const run = what.timeLimitMs;
    let fit = "";
    let maxTimeout: number | undefined;
    if (run !== undefined) {
      const perSecond = this.prices.execution_cents_per_second;
      const seconds = Math.floor(Math.min(keyRoom, available) / perSecond);
      if (seconds >= 1 && seconds * 1000 < run) {
        maxTimeout = seconds * 1000;
        fit = `; a timeout_ms of at most ${maxTimeout} would fit`;
      }
    }
    const runPart = run !== undefined ? `this run's time limit (${run} ms) reserves ${price} cents; ` : "";
    const extraDetails = {
      ...(run !== undefined ? { time_limit_ms: run } : {}),
      ...(maxTimeout !== undefined ? { max_timeout_ms: maxTimeout } : {}),
    };
    if (v === "cap") {
      const inFlight = keyReserved > 0 || run !== undefined;
      return new ApiError(
        "spend_cap_reached",
        `${runPart}this key has spent ${spent} of its ${s.cap_cents}-cent cap` +
          (inFlight ? ` and ${keyReserved} cents are reserved for its runs in flight` : "") +
          fit,
        {
          details: {
            key_address: key,
            spent_cents: spent,
            cap_cents: s.cap_cents,
            price_cents: price,
            ...(inFlight ? { reserved_cents: keyReserved } : {}),
            ...extraDetails,
          },
        },
      );
    }
    const inFlight = reserved > 0 || run !== undefined;
    return new ApiError(
      "insufficient_credits",
      (run !== undefined ? runPart : `this ${what.operation} costs ${price} cents and `) +
        `the balance is ${balance} cents` +
        (inFlight ? `, of which ${reserved} are reserved for runs in flight` : "") +
        fit,
      {
        details: {
          balance_cents: balance,
          price_cents: price,
          ...(inFlight ? { reserved_cents: reserved } : {}),
          ...extraDetails,
        },
      },
    );
  }

  /**
   * Keeps the rows of this instance's runs in flight counting while they last (a run may wait in the
   * executor's queue before its time limit starts): a row due within half the slack is moved to
   * now + its limit + the slack. A row that expired anyway is not revived; this instance counts it
   * itself (localExtra) until its run ends.
   */
  private armRenewal(): void {
    if (this.renewTimer) return;
    this.renewTimer = setInterval(() => void this.renewRunning(), Math.max(50, this.reservationSlackMs / 4));
    this.renewTimer.unref();
  }

  private async renewRunning(): Promise<void> {
    const now = Date.now();
    const running = [...this.held.values()].filter((r) => r.state === "running");
    if (running.length === 0 && this.renewTimer) {
      clearInterval(this.renewTimer);
      this.renewTimer = null;
      return;
    }
    for (const r of running) {
      if (r.expiresMs - now >= this.reservationSlackMs / 2) continue;
      const next = now + Math.ceil(r.timeLimitMs) + this.reservationSlackMs;
      try {
        if (await renew(this.db, r.id, next, now)) r.expiresMs = next;
      } catch {
        // The database is unreachable: retried at the next tick; counted here meanwhile once expired.
      }
    }
  }

  /** What runs in flight hold on the account now (balance_cents minus this is what can be spent). */
  async balanceView(accountId: string): Promise<{ balance_cents: number; reserved_cents: number }> {
    const now = Date.now();
    const extra = this.localExtra(accountId, "", now);
    const s = await readStanding(this.db, accountId, "", now);
    const balance = s.balance_cents - (this.pendingByAccount.get(accountId) ?? 0);
    const available = s.balance_cents - extra.account - s.reserved_account_cents;
    // Shown, not checked: rows of ended runs still waiting to shrink to their charge count as shrunk.
    let unshrunk = 0;
    for (const r of this.shrinks.values())
      if (r.principal.accountId === accountId && r.expiresMs > now) unshrunk += r.worstCents - r.cents;
    return { balance_cents: balance, reserved_cents: Math.max(0, balance - available - unshrunk) };
  }

  /** Stops the renewal timer (close()). Rows of runs still in flight then expire on their own. */
  stop(): void {
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = null;
    if (this.shrinkTimer) clearTimeout(this.shrinkTimer);
    this.shrinkTimer = null;
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
    if (this.pending.size === 0 && this.releases.size === 0) return;
    const run = this.commit([...this.pending.values()], [...this.releases]);
    this.flushing = run;
    try {
      await run;
    } finally {
      this.flushing = null;
    }
  }

  private async commit(batch: PendingCharge[], released: string[]): Promise<void> {
    const settled = [...released, ...batch.flatMap((c) => (c.reservationId ? [c.reservationId] : []))];
    try {
      await this.db.transaction(async (tx) => {
        // A reserved run's charge and the deletion of its reservation commit together: every snapshot
        // of every instance sees exactly one of them.
        await deleteReservations(tx, settled);
        if (batch.length === 0) return;
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
      if (c.reservationId === null) {
        subtract(this.unreservedByAccount, c.accountId, c.cents);
        subtract(this.unreservedByKey, c.keyAddress, c.cents);
      }
    }
    for (const id of settled) {
      this.releases.delete(id);
      this.held.delete(id);
      this.shrinks.delete(id);
    }
  }

  private async charge(
    p: Principal,
    cents: number,
    reference: string,
    operation: string,
    actionCid: string | null = null,
    reservation: Reservation | null = null,
    referenceIsNew = false,
  ): Promise<ChargeResult> {
    // Refused here, before the write-behind buffer: the ledger would refuse it at flush time, and a
    // batch that cannot commit holds every other account's charges back until the process dies.
    if (!Number.isSafeInteger(cents) || cents < 0)
      throw new Error(`a charge must be a safe integer number of cents, got ${cents} (${reference})`);
    const key = normalizeAddress(p.keyAddress);
    if (
      cents === 0 ||
      this.pending.has(reference) ||
      (!referenceIsNew && (await this.alreadyCharged(reference))) ||
      // Re-checked after the read: a concurrent charge of the same reference in this process may have
      // been buffered meanwhile. Across instances, the ledger's UNIQUE reference decides at flush time.
      this.pending.has(reference)
    ) {
      if (reservation) await this.releaseExecution(reservation);
      return { charged_cents: 0, applied: false };
    }
    const reserved = reservation !== null && this.held.get(reservation.id) === reservation;
    this.pending.set(reference, {
      accountId: p.accountId,
      keyAddress: key,
      cents,
      reference,
      operation,
      actionCid,
      reservationId: reserved ? reservation.id : null,
    });
    add(this.pendingByAccount, p.accountId, cents);
    add(this.pendingByKey, key, cents);
    if (reserved) {
      reservation.state = "settled";
      reservation.cents = cents;
      await this.afterSettle(reservation);
    } else {
      add(this.unreservedByAccount, p.accountId, cents);
      add(this.unreservedByKey, key, cents);
      if (this.flushMs <= 0 || this.pending.size >= MAX_PENDING_CHARGES) await this.flush();
      else this.arm();
    }
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

function add(m: Map<string, number>, k: string, cents: number): void {
  m.set(k, (m.get(k) ?? 0) + cents);
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
