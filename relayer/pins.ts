/**
 * Pinned bytes per account (docs/actions.md, "Pinning: quota and price"). The content store is
 * content-addressed (one file per CID whoever stored it), but every account that pins a CID, with
 * POST /actions or by having the relayer fetch it from the IPFS gateways for it, owns a pin of its own:
 * the CID's bytes count against that account's quota once, and are charged once, however often it pins
 * the same CID again. Two accounts pinning the same code both pay for it: neither can make the other's
 * quota or bill depend on what it does.
 *
 * Pins live in the data layer: the shared PostgreSQL database when `SIGIL_DATABASE_URL` is set (so a
 * quota holds across every instance, whichever one a pin reaches), else the embedded SQLite file. The
 * pinned bytes are there too (relayer/pinnedCode.ts).
 * A pin is reserved (quota checked and row written atomically, so concurrent pins cannot overshoot the
 * quota together) before the bytes are written to the store, and the reservation is released if that
 * write fails: nothing is stored for a refused pin, and no quota is used by a pin that was not stored.
 *
 * Atomicity: the check and the insert are one conditional INSERT … SELECT. SQLite runs one writer at a
 * time, so that statement alone is enough there (no transaction: the SQLite database is shared
 * with other stores, whose statements must never be caught up in a rollback of ours). PostgreSQL at
 * READ COMMITTED would let two such inserts see the same old sum, so there the statement runs in a
 * transaction holding a per-account advisory lock: one account's pins take turns, others do not wait.
 */
import { sql } from "kysely";
import { type DataLayer, type Sql, prepare } from "./db";
import { ApiError } from "./errors";

export interface PinUsage {
  used_bytes: number;
  quota_bytes: number;
  pins: number;
}

export interface PinRecord {
  cid: string;
  bytes: number;
  /** When the account first pinned this CID. */
  pinned_at: string;
}

const Q = {
  has: prepare("pins.has", (db, a) =>
    db.selectFrom("pins").select("cid").where("account_id", "=", a(0)).where("cid", "=", a(1)),
  ),
  usage: prepare("pins.usage", (db, a) =>
    db
      .selectFrom("pins")
      .select([sql<number>`COALESCE(SUM(bytes), 0)`.as("used"), sql<number>`COUNT(*)`.as("pins")])
      .where("account_id", "=", a(0)),
  ),
  /** Inserts (account, cid, bytes, now) only if the account's pins plus `bytes` stay within the quota. */
  reserve: prepare("pins.reserve", (db, a) =>
    db
      .insertInto("pins")
      .columns(["account_id", "cid", "bytes", "created_ms"])
      .expression(
        db
          .selectNoFrom([
            // Typed: PostgreSQL would read a bare parameter in a select list as text.
            sql<string>`CAST(${a(0)} AS TEXT)`.as("account_id"),
            sql<string>`CAST(${a(1)} AS TEXT)`.as("cid"),
            sql<number>`CAST(${a(2)} AS BIGINT)`.as("bytes"),
            sql<number>`CAST(${a(3)} AS BIGINT)`.as("created_ms"),
          ])
          .where(
            sql<number>`(SELECT COALESCE(SUM(p.bytes), 0) FROM pins p WHERE p.account_id = ${a(0)}) + CAST(${a(2)} AS BIGINT)`,
            "<=",
            sql<number>`CAST(${a(4)} AS BIGINT)`,
          ),
      )
      .onConflict((oc) => oc.columns(["account_id", "cid"]).doNothing()),
  ),
  release: prepare("pins.release", (db, a) =>
    db.deleteFrom("pins").where("account_id", "=", a(0)).where("cid", "=", a(1)),
  ),
  /** Newest first; the CID breaks ties between pins of the same millisecond, so pages never overlap. */
  page: prepare("pins.page", (db, a) =>
    db
      .selectFrom("pins")
      .select(["cid", "bytes", "created_ms"])
      .where("account_id", "=", a(0))
      .orderBy("created_ms", "desc")
      .orderBy("cid", "asc")
      .limit(a(1))
      .offset(a(2)),
  ),
};

export class PinLedger {
  constructor(
    private readonly db: DataLayer,
    readonly quotaBytes: number,
  ) {
    if (!Number.isSafeInteger(quotaBytes) || quotaBytes < 0)
      throw new RangeError("the pin quota is a non-negative integer number of bytes");
  }

  /** Whether the account has pinned this CID. */
  async has(accountId: string, cid: string): Promise<boolean> {
    return (await this.db.first(Q.has, [accountId, cid])) !== undefined;
  }

  async usage(accountId: string): Promise<PinUsage> {
    const row = (await this.db.first(Q.usage, [accountId]))!;
    return { used_bytes: Number(row.used), quota_bytes: this.quotaBytes, pins: Number(row.pins) };
  }

  /**
   * Reserve a pin of `bytes` for the account: false if it already holds this CID (nothing to do, nothing
   * to charge); true if reserved now; throws 413 pin_quota_exceeded (nothing written) when the account's
   * pins would pass the quota.
   */
  async reserve(accountId: string, cid: string, bytes: number): Promise<boolean> {
    const insert = (s: Sql) => s.run(Q.reserve, [accountId, cid, bytes, Date.now(), this.quotaBytes]);
    const inserted =
      this.db.kind === "postgres"
        ? await this.db.transaction(async (tx) => {
            await tx.exec("SELECT pg_advisory_xact_lock(hashtext('sigil:pins:' || $1))", [accountId]);
            return insert(tx);
          })
        : await insert(this.db);
    if (inserted === 1) return true;
    if (await this.has(accountId, cid)) return false;
    const used = (await this.usage(accountId)).used_bytes;
    throw new ApiError(
      "pin_quota_exceeded",
      `Pinning ${cid} (${bytes} bytes) would take this account's pins to ${used + bytes} bytes; the quota is ${this.quotaBytes}.`,
      { details: { cid, bytes, used_bytes: used, quota_bytes: this.quotaBytes } },
    );
  }

  /** Undo a reservation whose bytes could not be stored. */
  async release(accountId: string, cid: string): Promise<void> {
    await this.db.run(Q.release, [accountId, cid]);
  }

  /** One page of the account's pins, newest first, and how many it has in all. */
  async list(
    accountId: string,
    pageNumber: number,
    pageSize: number,
  ): Promise<{ items: PinRecord[]; total: number }> {
    const rows = await this.db.all(Q.page, [accountId, pageSize, pageNumber * pageSize]);
    const { pins } = await this.usage(accountId);
    return {
      items: rows.map((r) => ({
        cid: r.cid,
        bytes: Number(r.bytes),
        pinned_at: new Date(Number(r.created_ms)).toISOString(),
      })),
      total: pins,
    };
  }
}
