/**
 * Webhook storage on the data layer (SQLite or PostgreSQL, the same queries): endpoints, the outbox of
 * events, one delivery row per (endpoint, event), the scanners' cursors and the CIDs of added actions.
 *
 * Exactly one delivery at a time, across instances: a delivery is *claimed* by an UPDATE that sets a
 * lease only where the previous lease has expired (re-checked under the row lock on PostgreSQL, under
 * the file lock on SQLite), so of two instances racing for one row, one changes it and the other
 * changes nothing. Every write runs in a transaction: on SQLite the process shares one connection, and
 * a statement outside a transaction could land inside another caller's.
 */
import { randomBytes } from "node:crypto";
import type { DataLayer, Sql } from "../db";
import { prepare } from "../db";
import type { Schema } from "../db/schema";
import { subscribes, type EventPayload, type Subscription } from "./eventTypes";

export type EndpointRow = Schema["webhook_endpoints"];
export type DeliveryRow = Schema["webhook_deliveries"];
export interface DeliveryView extends DeliveryRow {
  type: string;
}
/** An enabled endpoint of an account, and the event types it hears. */
export interface Subscriber {
  endpoint_id: string;
  sub: Subscription;
}

export function newDeliveryId(): string {
  return "whd_" + randomBytes(12).toString("hex");
}

export interface DueDelivery {
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  attempts: number;
  first_failure_ms: number | null;
}

const Q = {
  insertEndpoint: prepare("wh.insertEndpoint", (db, a) =>
    db.insertInto("webhook_endpoints").values({
      endpoint_id: a(0),
      account_id: a(1),
      url: a(2),
      event_types: a(3),
      description: a(4),
      enabled: 1,
      secret_sealed: a(5),
      previous_secret_sealed: null,
      previous_secret_expires_ms: null,
      disabled_reason: null,
      disabled_ms: null,
      created_ms: a(6),
      updated_ms: a(6),
    }),
  ),
  countEndpoints: prepare("wh.countEndpoints", (db, a) =>
    db
      .selectFrom("webhook_endpoints")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("account_id", "=", a(0)),
  ),
  listEndpoints: prepare("wh.listEndpoints", (db, a) =>
    db
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("account_id", "=", a(0))
      .orderBy("created_ms")
      .orderBy("endpoint_id")
      .limit(a(1))
      .offset(a(2)),
  ),
  getEndpoint: prepare("wh.getEndpoint", (db, a) =>
    db
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("endpoint_id", "=", a(0))
      .where("account_id", "=", a(1)),
  ),
  endpointById: prepare("wh.endpointById", (db, a) =>
    db.selectFrom("webhook_endpoints").selectAll().where("endpoint_id", "=", a(0)),
  ),
  updateEndpoint: prepare("wh.updateEndpoint", (db, a) =>
    db
      .updateTable("webhook_endpoints")
      .set({
        url: a(0),
        event_types: a(1),
        description: a(2),
        enabled: a(3),
        disabled_reason: a(4),
        disabled_ms: a(5),
        updated_ms: a(6),
      })
      .where("endpoint_id", "=", a(7))
      .where("account_id", "=", a(8)),
  ),
  rotateSecret: prepare("wh.rotateSecret", (db, a) =>
    db
      .updateTable("webhook_endpoints")
      .set({
        secret_sealed: a(0),
        previous_secret_sealed: a(1),
        previous_secret_expires_ms: a(2),
        updated_ms: a(3),
      })
      .where("endpoint_id", "=", a(4))
      .where("account_id", "=", a(5)),
  ),
  disableEndpoint: prepare("wh.disableEndpoint", (db, a) =>
    db
      .updateTable("webhook_endpoints")
      .set({ enabled: 0, disabled_reason: a(0), disabled_ms: a(1), updated_ms: a(1) })
      .where("endpoint_id", "=", a(2))
      .where("enabled", "=", 1),
  ),
  deleteEndpoint: prepare("wh.deleteEndpoint", (db, a) =>
    db.deleteFrom("webhook_endpoints").where("endpoint_id", "=", a(0)).where("account_id", "=", a(1)),
  ),
  deleteDeliveriesOf: prepare("wh.deleteDeliveriesOf", (db, a) =>
    db.deleteFrom("webhook_deliveries").where("endpoint_id", "=", a(0)),
  ),
  /** After a re-enable: what waited starts again now, with a fresh failure window. */
  restartPending: prepare("wh.restartPending", (db, a) =>
    db
      .updateTable("webhook_deliveries")
      .set({ next_attempt_ms: a(0), first_failure_ms: null })
      .where("endpoint_id", "=", a(1))
      .where("status", "=", "pending"),
  ),
  subscribers: prepare("wh.subscribers", (db, a) =>
    db
      .selectFrom("webhook_endpoints")
      .select(["endpoint_id", "event_types"])
      .where("account_id", "=", a(0))
      .where("enabled", "=", 1),
  ),
  accountsWithEndpoints: prepare("wh.accountsWithEndpoints", (db) =>
    db.selectFrom("webhook_endpoints").select("account_id").distinct().where("enabled", "=", 1),
  ),
  insertEvent: prepare("wh.insertEvent", (db, a) =>
    db
      .insertInto("webhook_outbox_events")
      .values({ event_id: a(0), account_id: a(1), type: a(2), payload: a(3), created_ms: a(4) })
      .onConflict((oc) => oc.column("event_id").doNothing()),
  ),
  eventPayload: prepare("wh.eventPayload", (db, a) =>
    db.selectFrom("webhook_outbox_events").select(["payload"]).where("event_id", "=", a(0)),
  ),
  insertDelivery: prepare("wh.insertDelivery", (db, a) =>
    db
      .insertInto("webhook_deliveries")
      .values({
        delivery_id: a(0),
        endpoint_id: a(1),
        event_id: a(2),
        account_id: a(3),
        status: "pending",
        attempts: 0,
        next_attempt_ms: a(4),
        first_failure_ms: null,
        lease_owner: null,
        lease_expires_ms: 0,
        last_status: null,
        last_error: null,
        last_attempt_ms: null,
        created_ms: a(4),
      })
      .onConflict((oc) => oc.columns(["endpoint_id", "event_id"]).doNothing()),
  ),
  readCursor: prepare("wh.readCursor", (db, a) =>
    db.selectFrom("webhook_cursors").select(["position"]).where("name", "=", a(0)),
  ),
  /** Insert-or-nothing: of several instances creating one cursor at once, the first one's position stands. */
  initCursor: prepare("wh.initCursor", (db, a) =>
    db
      .insertInto("webhook_cursors")
      .values({ name: a(0), position: a(1) })
      .onConflict((oc) => oc.column("name").doNothing()),
  ),
  /** Forward only: a slower instance finishing an older range never moves the cursor back. */
  advanceCursor: prepare("wh.advanceCursor", (db, a) =>
    db
      .updateTable("webhook_cursors")
      .set({ position: a(0) })
      .where("name", "=", a(1))
      .where("position", "<", a(0)),
  ),
  putCid: prepare("wh.putCid", (db, a) =>
    db
      .insertInto("webhook_cids")
      .values({ cid_hash: a(0), cid: a(1) })
      .onConflict((oc) => oc.column("cid_hash").doNothing()),
  ),
  getCid: prepare("wh.getCid", (db, a) =>
    db.selectFrom("webhook_cids").select(["cid"]).where("cid_hash", "=", a(0)),
  ),
  due: prepare("wh.due", (db, a) =>
    db
      .selectFrom("webhook_deliveries as d")
      .innerJoin("webhook_endpoints as e", "e.endpoint_id", "d.endpoint_id")
      .select(["d.delivery_id", "d.endpoint_id", "d.event_id", "d.attempts", "d.first_failure_ms"])
      .where("d.status", "=", "pending")
      .where("d.next_attempt_ms", "<=", a(0))
      .where("d.lease_expires_ms", "<", a(0))
      .where("e.enabled", "=", 1)
      .orderBy("d.next_attempt_ms")
      .limit(a(1)),
  ),
  claim: prepare("wh.claim", (db, a) =>
    db
      .updateTable("webhook_deliveries")
      .set({ lease_owner: a(0), lease_expires_ms: a(1) })
      .where("delivery_id", "=", a(2))
      .where("status", "=", "pending")
      .where("lease_expires_ms", "<", a(3)),
  ),
  succeeded: prepare("wh.succeeded", (db, a) =>
    db
      .updateTable("webhook_deliveries")
      .set((eb) => ({
        status: "succeeded",
        attempts: eb("attempts", "+", 1),
        last_status: a(0),
        last_error: null,
        last_attempt_ms: a(1),
        lease_owner: null,
        lease_expires_ms: 0,
      }))
      .where("delivery_id", "=", a(2))
      .where("lease_owner", "=", a(3)),
  ),
  failed: prepare("wh.failed", (db, a) =>
    db
      .updateTable("webhook_deliveries")
      .set((eb) => ({
        status: a(0),
        attempts: eb("attempts", "+", 1),
        last_status: a(1),
        last_error: a(2),
        last_attempt_ms: a(3),
        first_failure_ms: a(4),
        next_attempt_ms: a(5),
        lease_owner: null,
        lease_expires_ms: 0,
      }))
      .where("delivery_id", "=", a(6))
      .where("lease_owner", "=", a(7)),
  ),
  release: prepare("wh.release", (db, a) =>
    db
      .updateTable("webhook_deliveries")
      .set({ lease_owner: null, lease_expires_ms: 0 })
      .where("delivery_id", "=", a(0))
      .where("lease_owner", "=", a(1)),
  ),
  pruneDeliveries: prepare("wh.pruneDeliveries", (db, a) =>
    db.deleteFrom("webhook_deliveries").where("status", "!=", "pending").where("created_ms", "<", a(0)),
  ),
  /** Events no delivery refers to any more (every one pruned or its endpoint deleted). */
  pruneEvents: prepare("wh.pruneEvents", (db, a) =>
    db
      .deleteFrom("webhook_outbox_events")
      .where("created_ms", "<", a(0))
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom("webhook_deliveries")
              .select("webhook_deliveries.delivery_id")
              .whereRef("webhook_deliveries.event_id", "=", "webhook_outbox_events.event_id"),
          ),
        ),
      ),
  ),
  successesSince: prepare("wh.successesSince", (db, a) =>
    db
      .selectFrom("webhook_deliveries")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("endpoint_id", "=", a(0))
      .where("status", "=", "succeeded")
      .where("last_attempt_ms", ">=", a(1)),
  ),
  countDeliveries: prepare("wh.countDeliveries", (db, a) =>
    db
      .selectFrom("webhook_deliveries")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("endpoint_id", "=", a(0)),
  ),
  listDeliveries: prepare("wh.listDeliveries", (db, a) =>
    db
      .selectFrom("webhook_deliveries as d")
      .innerJoin("webhook_outbox_events as v", "v.event_id", "d.event_id")
      .selectAll("d")
      .select(["v.type"])
      .where("d.endpoint_id", "=", a(0))
      .orderBy("d.created_ms", "desc")
      .orderBy("d.delivery_id", "desc")
      .limit(a(1))
      .offset(a(2)),
  ),
  getDelivery: prepare("wh.getDelivery", (db, a) =>
    db
      .selectFrom("webhook_deliveries as d")
      .innerJoin("webhook_outbox_events as v", "v.event_id", "d.event_id")
      .selectAll("d")
      .select(["v.type"])
      .where("d.delivery_id", "=", a(0))
      .where("d.endpoint_id", "=", a(1)),
  ),
  /** A resend: due now, a fresh failure window, attempts keep counting. Not while another instance holds it. */
  resend: prepare("wh.resend", (db, a) =>
    db
      .updateTable("webhook_deliveries")
      .set({ status: "pending", next_attempt_ms: a(0), first_failure_ms: null })
      .where("delivery_id", "=", a(1))
      .where("endpoint_id", "=", a(2))
      .where("lease_expires_ms", "<", a(0)),
  ),
};

export class WebhookStore {
  constructor(readonly db: DataLayer) {}

  async createEndpoint(row: {
    endpointId: string;
    accountId: string;
    url: string;
    eventTypes: string;
    description: string;
    secretSealed: string;
    nowMs: number;
  }): Promise<void> {
    await this.db.transaction((tx) =>
      tx.run(Q.insertEndpoint, [
        row.endpointId,
        row.accountId,
        row.url,
        row.eventTypes,
        row.description,
        row.secretSealed,
        row.nowMs,
      ]),
    );
  }

  async countEndpoints(accountId: string): Promise<number> {
    return Number((await this.db.first(Q.countEndpoints, [accountId]))?.n ?? 0);
  }

  listEndpoints(accountId: string, limit: number, offset: number): Promise<EndpointRow[]> {
    return this.db.all(Q.listEndpoints, [accountId, limit, offset]);
  }

  getEndpoint(accountId: string, endpointId: string, on: Sql = this.db): Promise<EndpointRow | undefined> {
    return on.first(Q.getEndpoint, [endpointId, accountId]);
  }

  endpointById(endpointId: string): Promise<EndpointRow | undefined> {
    return this.db.first(Q.endpointById, [endpointId]);
  }

  /** Replaces the editable fields; returns the row as stored, or undefined when it is not the account's. */
  async updateEndpoint(
    accountId: string,
    endpointId: string,
    change: (row: EndpointRow) => EndpointRow,
    nowMs: number,
  ): Promise<EndpointRow | undefined> {
    return this.db.transaction(async (tx) => {
      const row = await this.getEndpoint(accountId, endpointId, tx);
      if (!row) return undefined;
      const next = change(row);
      await tx.run(Q.updateEndpoint, [
        next.url,
        next.event_types,
        next.description,
        next.enabled,
        next.disabled_reason,
        next.disabled_ms,
        nowMs,
        endpointId,
        accountId,
      ]);
      if (next.enabled === 1 && row.enabled === 0) await tx.run(Q.restartPending, [nowMs, endpointId]);
      return { ...next, updated_ms: nowMs };
    });
  }

  async rotateSecret(
    accountId: string,
    endpointId: string,
    seal: (row: EndpointRow) => {
      current: string;
      previous: string | null;
      previousExpiresMs: number | null;
    },
    nowMs: number,
  ): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const row = await this.getEndpoint(accountId, endpointId, tx);
      if (!row) return false;
      const s = seal(row);
      await tx.run(Q.rotateSecret, [
        s.current,
        s.previous,
        s.previousExpiresMs,
        nowMs,
        endpointId,
        accountId,
      ]);
      return true;
    });
  }

  async deleteEndpoint(accountId: string, endpointId: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const n = await tx.run(Q.deleteEndpoint, [endpointId, accountId]);
      if (n === 1) await tx.run(Q.deleteDeliveriesOf, [endpointId]);
      return n === 1;
    });
  }

  /**
   * Stores an event and one pending delivery per subscribed endpoint, in the caller's transaction.
   * False when the event was already stored (another instance, or this one before a restart).
   */
  /**
   * Stores an event with one delivery per subscriber that hears its type. False when none does, or when
   * the event is stored already: its id is derived from what happened, so a batch scanned again after a
   * crash, or the same event raised by two instances, offers the same id.
   */
  async addEvent(
    tx: Sql,
    accountId: string,
    payload: EventPayload,
    subscribers: readonly Subscriber[],
    nowMs = Date.now(),
  ): Promise<boolean> {
    const targets = subscribers.filter((s) => subscribes(s.sub, payload.type));
    if (targets.length === 0) return false;
    const row = [payload.id, accountId, payload.type, JSON.stringify(payload), nowMs];
    if ((await tx.run(Q.insertEvent, row)) === 0) return false;
    for (const { endpoint_id } of targets)
      await tx.run(Q.insertDelivery, [newDeliveryId(), endpoint_id, payload.id, accountId, nowMs]);
    return true;
  }

  async subscribers(accountId: string, on: Sql = this.db): Promise<Subscriber[]> {
    return (await on.all(Q.subscribers, [accountId])).map((r) => ({
      endpoint_id: r.endpoint_id,
      sub: JSON.parse(r.event_types) as Subscription,
    }));
  }

  /** Accounts with at least one enabled endpoint: only their logs become events. */
  async accountsWithEndpoints(): Promise<Set<string>> {
    return new Set((await this.db.all(Q.accountsWithEndpoints)).map((r) => r.account_id));
  }

  async eventPayload(eventId: string): Promise<string | undefined> {
    return (await this.db.first(Q.eventPayload, [eventId]))?.payload;
  }

  /** The cursor's position; created at `initial` the first time anyone asks. */
  async cursor(name: string, initial: number): Promise<number> {
    await this.db.transaction((tx) => tx.run(Q.initCursor, [name, initial]));
    return Number((await this.db.first(Q.readCursor, [name]))!.position);
  }

  /** The cursor's position, or undefined when nobody created it yet. */
  async cursorIfAny(name: string, on: Sql = this.db): Promise<number | undefined> {
    const row = await on.first(Q.readCursor, [name]);
    return row === undefined ? undefined : Number(row.position);
  }

  /** Creates the cursor at `position` unless it exists (then it is left as it is); true when this call created it. */
  async createCursor(tx: Sql, name: string, position: number): Promise<boolean> {
    return (await tx.run(Q.initCursor, [name, position])) === 1;
  }

  async advanceCursor(tx: Sql, name: string, position: number): Promise<void> {
    await tx.run(Q.advanceCursor, [position, name]);
  }

  async putCid(tx: Sql, cidHash: string, cid: string): Promise<void> {
    await tx.run(Q.putCid, [cidHash, cid]);
  }

  async cid(cidHash: string, on: Sql = this.db): Promise<string | null> {
    return (await on.first(Q.getCid, [cidHash]))?.cid ?? null;
  }

  /** Claims up to `limit` due deliveries for `owner` until `leaseUntilMs`; returns those it won. */
  async claimDue(owner: string, nowMs: number, leaseUntilMs: number, limit: number): Promise<DueDelivery[]> {
    return this.db.transaction(async (tx) => {
      const candidates = await tx.all(Q.due, [nowMs, limit]);
      const won: DueDelivery[] = [];
      for (const c of candidates)
        if ((await tx.run(Q.claim, [owner, leaseUntilMs, c.delivery_id, nowMs])) === 1) won.push(c);
      return won;
    });
  }

  async recordSuccess(owner: string, deliveryId: string, status: number, nowMs: number): Promise<void> {
    await this.db.transaction((tx) => tx.run(Q.succeeded, [status, nowMs, deliveryId, owner]));
  }

  /**
   * Forgets finished deliveries created before `beforeMs`, then events nothing refers to any more.
   * Pending deliveries are kept whatever their age (a disabled endpoint's backlog waits for it).
   */
  async prune(beforeMs: number): Promise<{ deliveries: number; events: number }> {
    return this.db.transaction(async (tx) => ({
      deliveries: await tx.run(Q.pruneDeliveries, [beforeMs]),
      events: await tx.run(Q.pruneEvents, [beforeMs]),
    }));
  }

  /** Gives a claimed delivery back untried (the instance is stopping): due again at once, for anyone. */
  async release(owner: string, deliveryId: string): Promise<void> {
    await this.db.transaction((tx) => tx.run(Q.release, [deliveryId, owner]));
  }

  /**
   * Records a failed attempt: retried at `nextAttemptMs`, or given up (`gaveUp`). When it gives up and
   * the endpoint has had no success since this delivery first failed, the endpoint is disabled with
   * `reason`; returns true when this call disabled it.
   */
  async recordFailure(
    owner: string,
    d: { deliveryId: string; endpointId: string; firstFailureMs: number },
    attempt: { status: number | null; error: string; nowMs: number; nextAttemptMs: number; gaveUp: boolean },
    reason: string,
  ): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await tx.run(Q.failed, [
        attempt.gaveUp ? "failed" : "pending",
        attempt.status,
        attempt.error,
        attempt.nowMs,
        d.firstFailureMs,
        attempt.nextAttemptMs,
        d.deliveryId,
        owner,
      ]);
      if (!attempt.gaveUp) return false;
      const ok = Number((await tx.first(Q.successesSince, [d.endpointId, d.firstFailureMs]))?.n ?? 0);
      if (ok > 0) return false;
      return (await tx.run(Q.disableEndpoint, [reason, attempt.nowMs, d.endpointId])) === 1;
    });
  }

  async countDeliveries(endpointId: string): Promise<number> {
    return Number((await this.db.first(Q.countDeliveries, [endpointId]))?.n ?? 0);
  }

  listDeliveries(endpointId: string, limit: number, offset: number): Promise<DeliveryView[]> {
    return this.db.all(Q.listDeliveries, [endpointId, limit, offset]) as Promise<DeliveryView[]>;
  }

  getDelivery(endpointId: string, deliveryId: string): Promise<DeliveryView | undefined> {
    return this.db.first(Q.getDelivery, [deliveryId, endpointId]) as Promise<DeliveryView | undefined>;
  }

  /** Makes a delivery due now; false when an instance is delivering it at this moment. */
  async resend(endpointId: string, deliveryId: string, nowMs: number): Promise<boolean> {
    return (await this.db.transaction((tx) => tx.run(Q.resend, [nowMs, deliveryId, endpointId]))) === 1;
  }
}
