/**
 * Pinned bytes per account (docs/actions.md, "Pinning: quota and price"). The content store is shared
 * and content-addressed (one file per CID whoever stored it), but every account that pins a CID, with
 * POST /actions or by having the relayer fetch it from the IPFS gateways for it, owns a pin of its own:
 * the CID's bytes count against that account's quota once, and are charged once, however often it pins
 * the same CID again. Two accounts pinning the same code both pay for it: neither can make the other's
 * quota or bill depend on what it does.
 *
 * Pins live in the relayer's SQLite database. A pin is reserved (quota checked and row written in one
 * IMMEDIATE transaction, so concurrent pins cannot overshoot the quota together) before the bytes are
 * written to the store, and the reservation is released if that write fails: nothing is stored for a
 * refused pin, and no quota is used by a pin that was not stored.
 */
import type { Db } from "./store";
import { ApiError } from "./errors";

export interface PinUsage {
  used_bytes: number;
  quota_bytes: number;
  pins: number;
}

export class PinLedger {
  private readonly s;

  constructor(
    private readonly db: Db,
    readonly quotaBytes: number,
  ) {
    if (!Number.isSafeInteger(quotaBytes) || quotaBytes < 0)
      throw new RangeError("the pin quota is a non-negative integer number of bytes");
    db.exec(`
      CREATE TABLE IF NOT EXISTS pins (
        account_id TEXT NOT NULL,
        cid TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (account_id, cid)
      );
    `);
    this.s = {
      has: db.prepare("SELECT 1 FROM pins WHERE account_id = ? AND cid = ?"),
      usage: db.prepare(
        "SELECT COALESCE(SUM(bytes), 0) AS used, COUNT(*) AS pins FROM pins WHERE account_id = ?",
      ),
      insert: db.prepare("INSERT INTO pins (account_id, cid, bytes, created_ms) VALUES (?, ?, ?, ?)"),
      remove: db.prepare("DELETE FROM pins WHERE account_id = ? AND cid = ?"),
    };
  }

  /** Whether the account has pinned this CID. */
  has(accountId: string, cid: string): boolean {
    return this.s.has.get(accountId, cid) !== undefined;
  }

  usage(accountId: string): PinUsage {
    const row = this.s.usage.get(accountId) as { used: number; pins: number };
    return { used_bytes: row.used, quota_bytes: this.quotaBytes, pins: row.pins };
  }

  /**
   * Reserve a pin of `bytes` for the account: false if it already holds this CID (nothing to do, nothing
   * to charge); true if reserved now; throws 413 pin_quota_exceeded (nothing written) when the account's
   * pins would pass the quota.
   */
  reserve(accountId: string, cid: string, bytes: number): boolean {
    return this.db
      .transaction(() => {
        if (this.s.has.get(accountId, cid) !== undefined) return false;
        const used = (this.s.usage.get(accountId) as { used: number }).used;
        if (used + bytes > this.quotaBytes) {
          throw new ApiError(
            413,
            "pin_quota_exceeded",
            `Pinning ${cid} (${bytes} bytes) would take this account's pins to ${used + bytes} bytes; the quota is ${this.quotaBytes}.`,
            { details: { cid, bytes, used_bytes: used, quota_bytes: this.quotaBytes } },
          );
        }
        this.s.insert.run(accountId, cid, bytes, Date.now());
        return true;
      })
      .immediate();
  }

  /** Undo a reservation whose bytes could not be stored. */
  release(accountId: string, cid: string): void {
    this.s.remove.run(accountId, cid);
  }
}
