/**
 * Storage of Idempotency-Key records, the same on both engines. A request first *claims* its
 * (scope, key) by inserting a row with status 0; the unique primary key lets exactly one request
 * (of one instance) win, and every duplicate, on whichever instance it arrives, finds the claim.
 * The winner then stores its 2xx answer in the row, or releases the claim when it failed.
 *
 * A claim names the attempt holding it (`owner`, a random token) and when that attempt last proved
 * alive (`heartbeat_ms`). Before an attempt broadcasts a write it records the signed forward request in
 * `writes`, in the same row: every update below is conditional on the owner, so an attempt whose claim
 * was taken over (it was presumed dead) can neither record nor answer any more.
 */
import type { Sql } from "./engine";
import { prepare } from "./prepared";
import type { Schema } from "./schema";

/** A record as the idempotency layer reads it: the row of db/schema.ts without its (scope, key). */
export type IdempotencyRow = Omit<Schema["idempotency"], "scope" | "key">;

const Q = {
  claim: prepare("idem.claim2", (db, a) =>
    db
      .insertInto("idempotency")
      .values({
        scope: a(0),
        key: a(1),
        fingerprint: a(2),
        status: 0,
        body: "",
        created_ms: a(3),
        owner: a(4),
        heartbeat_ms: a(3),
        writes: "",
      })
      .onConflict((oc) => oc.columns(["scope", "key"]).doNothing()),
  ),
  read: prepare("idem.read2", (db, a) =>
    db
      .selectFrom("idempotency")
      .select(["fingerprint", "status", "body", "created_ms", "owner", "heartbeat_ms", "writes"])
      .where("scope", "=", a(0))
      .where("key", "=", a(1)),
  ),
  /** Takes over a claim exactly as it was read (same holder, same heartbeat): one taker wins. */
  takeOver: prepare("idem.takeOver", (db, a) =>
    db
      .updateTable("idempotency")
      .set({ owner: a(0), heartbeat_ms: a(1) })
      .where("scope", "=", a(2))
      .where("key", "=", a(3))
      .where("owner", "=", a(4))
      .where("heartbeat_ms", "=", a(5))
      .where("status", "=", 0),
  ),
  heartbeat: prepare("idem.heartbeat", (db, a) =>
    db
      .updateTable("idempotency")
      .set({ heartbeat_ms: a(0) })
      .where("scope", "=", a(1))
      .where("key", "=", a(2))
      .where("owner", "=", a(3))
      .where("status", "=", 0),
  ),
  recordWrites: prepare("idem.recordWrites", (db, a) =>
    db
      .updateTable("idempotency")
      .set({ writes: a(0) })
      .where("scope", "=", a(1))
      .where("key", "=", a(2))
      .where("owner", "=", a(3))
      .where("status", "=", 0),
  ),
  complete: prepare("idem.complete2", (db, a) =>
    db
      .updateTable("idempotency")
      .set({ status: a(0), body: a(1) })
      .where("scope", "=", a(2))
      .where("key", "=", a(3))
      .where("owner", "=", a(4))
      .where("status", "=", 0),
  ),
  /** Releases a claim its holder failed without writing anything. */
  release: prepare("idem.release", (db, a) =>
    db
      .deleteFrom("idempotency")
      .where("scope", "=", a(0))
      .where("key", "=", a(1))
      .where("owner", "=", a(2))
      .where("status", "=", 0),
  ),
  /** Removes one exact row (an expired record), never a newer one. */
  remove: prepare("idem.remove", (db, a) =>
    db
      .deleteFrom("idempotency")
      .where("scope", "=", a(0))
      .where("key", "=", a(1))
      .where("created_ms", "=", a(2))
      .where("status", "=", a(3)),
  ),
  releaseUnsent: prepare("idem.releaseUnsent", (db) =>
    db.deleteFrom("idempotency").where("status", "=", 0).where("writes", "=", ""),
  ),
  abandonAll: prepare("idem.abandonAll", (db) =>
    db.updateTable("idempotency").set({ heartbeat_ms: 0 }).where("status", "=", 0),
  ),
  prune: prepare("idem.prune", (db, a) => db.deleteFrom("idempotency").where("created_ms", "<", a(0))),
};

export class IdempotencyRecords {
  constructor(private readonly db: Sql) {}

  /** true when this caller now owns (scope, key); false when a row is already there. */
  async claim(
    scope: string,
    key: string,
    fingerprint: string,
    nowMs: number,
    owner: string,
  ): Promise<boolean> {
    return (await this.db.run(Q.claim, [scope, key, fingerprint, nowMs, owner])) === 1;
  }

  read(scope: string, key: string): Promise<IdempotencyRow | undefined> {
    return this.db.first(Q.read, [scope, key]);
  }

  /** true when `owner` now holds the claim `seen` (nobody refreshed or took it since it was read). */
  async takeOver(
    scope: string,
    key: string,
    seen: Pick<IdempotencyRow, "owner" | "heartbeat_ms">,
    owner: string,
    nowMs: number,
  ): Promise<boolean> {
    return (await this.db.run(Q.takeOver, [owner, nowMs, scope, key, seen.owner, seen.heartbeat_ms])) === 1;
  }

  /** false when the claim is no longer `owner`'s. `atMs` 0 marks it abandoned (taken over at once). */
  async heartbeat(scope: string, key: string, owner: string, atMs: number): Promise<boolean> {
    return (await this.db.run(Q.heartbeat, [atMs, scope, key, owner])) === 1;
  }

  /** false when the claim is no longer `owner`'s (then nothing was recorded). */
  async recordWrites(scope: string, key: string, owner: string, writes: string): Promise<boolean> {
    return (await this.db.run(Q.recordWrites, [writes, scope, key, owner])) === 1;
  }

  async complete(scope: string, key: string, owner: string, status: number, body: string): Promise<void> {
    await this.db.run(Q.complete, [status, body, scope, key, owner]);
  }

  async release(scope: string, key: string, owner: string): Promise<void> {
    await this.db.run(Q.release, [scope, key, owner]);
  }

  async remove(
    scope: string,
    key: string,
    row: Pick<IdempotencyRow, "created_ms" | "status">,
  ): Promise<void> {
    await this.db.run(Q.remove, [scope, key, row.created_ms, row.status]);
  }

  /**
   * After a restart of a store no other process uses: a claim that recorded nothing sent nothing, so it
   * is dropped (the retry runs afresh); one that recorded a forward request is kept for its retry to
   * reconcile with the chain, marked abandoned so that retry takes it over at once.
   */
  async recoverAfterRestart(): Promise<void> {
    await this.db.run(Q.releaseUnsent);
    await this.db.run(Q.abandonAll);
  }

  /** Deletes records and claims created before `beforeMs`; returns how many. */
  prune(beforeMs: number): Promise<number> {
    return this.db.run(Q.prune, [beforeMs]);
  }
}
