import type { Database, Statement } from "better-sqlite3";
import { ApiError } from "../errors";
import type { Ledger } from "./ledger";

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
}

export const DEFAULT_PRICES: Prices = Object.freeze({ write_cents: 1, execution_cents_per_second: 1, minimum_payment_cents: 500 });

export interface ChargeResult {
  charged_cents: number;
  balance_cents: number;
  /** false when this reference had already been charged (a retry): nothing changed. */
  applied: boolean;
}

/** Cost of an execution that ran `executionMs`: every started second, at least one. */
export function executionPriceCents(prices: Prices, executionMs: number): number {
  const ms = Number.isFinite(executionMs) && executionMs > 0 ? executionMs : 0;
  return Math.max(1, Math.ceil(ms / 1000)) * prices.execution_cents_per_second;
}

/**
 * Usage charges. Checked before work starts (assertCanAfford), charged after it finished
 * (chargeWrite only for writes that landed; chargeExecution for the time used). A charge is never
 * refused after the fact: the work has been done, so it is recorded in full even if that takes the
 * balance (or a key's spend) past zero (or its cap); the next assertCanAfford then refuses.
 */
export class Metering {
  private readonly s: { spend: Statement; addSpend: Statement; setCap: Statement };

  constructor(
    private readonly db: Database,
    private readonly ledger: Ledger,
    private readonly prices: Prices,
  ) {
    this.s = {
      spend: db.prepare("SELECT spent_cents, cap_cents FROM key_spend WHERE key_address = ?"),
      addSpend: db.prepare(
        `INSERT INTO key_spend (key_address, account_id, spent_cents, cap_cents) VALUES (?, ?, ?, NULL)
         ON CONFLICT (key_address) DO UPDATE SET spent_cents = spent_cents + excluded.spent_cents`,
      ),
      setCap: db.prepare(
        `INSERT INTO key_spend (key_address, account_id, spent_cents, cap_cents) VALUES (?, ?, 0, ?)
         ON CONFLICT (key_address) DO UPDATE SET cap_cents = excluded.cap_cents`,
      ),
    };
  }

  assertCanAfford(p: Principal, operation: "write" | "execution"): void {
    const price = operation === "write" ? this.prices.write_cents : executionPriceCents(this.prices, 0);
    if (price === 0) return;
    const key = normalizeAddress(p.keyAddress);
    const spend = this.keySpend(key);
    // The cap is checked first: it is the narrower, key-specific refusal and names the key's problem.
    if (spend.cap_cents !== null && spend.spent_cents + price > spend.cap_cents) {
      throw new ApiError(403, "spend_cap_reached", `this key has spent ${spend.spent_cents} of its ${spend.cap_cents}-cent cap`, {
        details: { key_address: key, spent_cents: spend.spent_cents, cap_cents: spend.cap_cents, price_cents: price },
      });
    }
    const balance = this.ledger.balance(p.accountId);
    if (balance < price) {
      throw new ApiError(402, "insufficient_credits", `this ${operation} costs ${price} cents and the balance is ${balance} cents`, {
        details: { balance_cents: balance, price_cents: price },
      });
    }
  }

  chargeWrite(p: Principal, operation: string, reference: string): ChargeResult {
    return this.charge(p, this.prices.write_cents, "write:" + requireReference(reference), operation);
  }

  chargeExecution(p: Principal, executionMs: number, reference: string): ChargeResult {
    return this.charge(p, executionPriceCents(this.prices, executionMs), "exec:" + requireReference(reference), "execution");
  }

  keySpend(keyAddress: string): { spent_cents: number; cap_cents: number | null } {
    const row = this.s.spend.get(normalizeAddress(keyAddress)) as { spent_cents: number; cap_cents: number | null } | undefined;
    return row ? { spent_cents: row.spent_cents, cap_cents: row.cap_cents } : { spent_cents: 0, cap_cents: null };
  }

  setKeySpendCap(accountId: string, keyAddress: string, capCents: number | null): void {
    if (capCents !== null && (!Number.isSafeInteger(capCents) || capCents < 0)) {
      throw new ApiError(400, "invalid_spend_cap", "a spend cap is a non-negative integer number of cents, or null for none", {
        details: { cap_cents: capCents },
      });
    }
    this.s.setCap.run(normalizeAddress(keyAddress), accountId, capCents);
  }

  private charge(p: Principal, cents: number, reference: string, operation: string): ChargeResult {
    const key = normalizeAddress(p.keyAddress);
    const tx = this.db.transaction((): ChargeResult => {
      if (cents === 0) return { charged_cents: 0, balance_cents: this.ledger.balance(p.accountId), applied: false };
      const r = this.ledger.apply({ accountId: p.accountId, kind: "debit", amountCents: cents, reference, keyAddress: key, operation });
      if (r.applied) this.s.addSpend.run(key, p.accountId, cents);
      return { charged_cents: r.applied ? cents : 0, balance_cents: r.balanceCents, applied: r.applied };
    });
    return tx.immediate();
  }
}

export function normalizeAddress(a: string): string {
  return a.toLowerCase();
}

function requireReference(reference: string): string {
  if (typeof reference !== "string" || reference.length === 0 || reference.length > 200) {
    throw new Error("a charge needs a non-empty reference of at most 200 characters");
  }
  return reference;
}
