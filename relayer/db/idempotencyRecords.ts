/**
 * Storage of Idempotency-Key records, the same on both engines. A request first *claims* its
 * (scope, key) by inserting a row with status 0; the unique primary key lets exactly one request
 * (of one instance) win, and every duplicate, on whichever instance it arrives, finds the claim.
 * The winner then stores its 2xx answer in the row, or releases the claim when it failed.
 */
import type { Sql } from "./engine";
import { prepare } from "./prepared";

export interface IdempotencyRow {
  fingerprint: string;
  /** 0 while the first request is still running (a claim); its HTTP status once it answered. */
  status: number;
  body: string;
  created_ms: number;
}

const Q = {
  claim: prepare("idem.claim", (db, a) =>
    db
      .insertInto("idempotency")
      .values({ scope: a(0), key: a(1), fingerprint: a(2), status: 0, body: "", created_ms: a(3) })
      .onConflict((oc) => oc.columns(["scope", "key"]).doNothing()),
  ),
  read: prepare("idem.read", (db, a) =>
    db
      .selectFrom("idempotency")
      .select(["fingerprint", "status", "body", "created_ms"])
      .where("scope", "=", a(0))
      .where("key", "=", a(1)),
  ),
  complete: prepare("idem.complete", (db, a) =>
    db
      .updateTable("idempotency")
      .set({ status: a(0), body: a(1) })
      .where("scope", "=", a(2))
      .where("key", "=", a(3))
      .where("created_ms", "=", a(4))
      .where("status", "=", 0),
  ),
  /** Removes one exact row (a failed claim, or an expired record), never a newer one. */
  remove: prepare("idem.remove", (db, a) =>
    db
      .deleteFrom("idempotency")
      .where("scope", "=", a(0))
      .where("key", "=", a(1))
      .where("created_ms", "=", a(2))
      .where("status", "=", a(3)),
  ),
  releaseClaims: prepare("idem.releaseClaims", (db) => db.deleteFrom("idempotency").where("status", "=", 0)),
  prune: prepare("idem.prune", (db, a) => db.deleteFrom("idempotency").where("created_ms", "<", a(0))),
};

export class IdempotencyRecords {
  constructor(private readonly db: Sql) {}

  /** true when this caller now owns (scope, key); false when a row is already there. */
  async claim(scope: string, key: string, fingerprint: string, nowMs: number): Promise<boolean> {
    return (await this.db.run(Q.claim, [scope, key, fingerprint, nowMs])) === 1;
  }

  read(scope: string, key: string): Promise<IdempotencyRow | undefined> {
    return this.db.first(Q.read, [scope, key]);
  }

  async complete(scope: string, key: string, claimedMs: number, status: number, body: string): Promise<void> {
    await this.db.run(Q.complete, [status, body, scope, key, claimedMs]);
  }

  async remove(
    scope: string,
    key: string,
    row: Pick<IdempotencyRow, "created_ms" | "status">,
  ): Promise<void> {
    await this.db.run(Q.remove, [scope, key, row.created_ms, row.status]);
  }

  /** Drops every claim (requests that never answered); only for a store no other process uses. */
  releaseClaims(): Promise<number> {
    return this.db.run(Q.releaseClaims);
  }

  /** Deletes records and claims created before `beforeMs`; returns how many. */
  prune(beforeMs: number): Promise<number> {
    return this.db.run(Q.prune, [beforeMs]);
  }
}
