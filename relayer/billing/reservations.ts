/**
 * Reservations: the worst case of every execution in flight, held against the account's balance and
 * the key's spend cap from admission until the run's charge replaces it (docs/billing.md, "Runs in
 * flight are reserved"). Checking "can it afford one second?" and charging after the run let N
 * concurrent runs each spend up to their time limit against the same last cents; a reservation makes
 * the N-th run see what the N−1 before it may still cost.
 *
 * This module is the database side only: the atomic "check and reserve" on each engine, and the
 * statements that shrink, renew and delete rows. Metering (metering.ts) decides when to call them and
 * keeps this instance's own view (charges not yet committed, reservations whose row has expired).
 *
 * Atomicity. SQLite: one BEGIN IMMEDIATE transaction (the file's write lock, across processes too).
 * PostgreSQL: one round trip, one prepared statement calling `sigil_reserve` (migration 20; one
 * implicit transaction): this instance's settled rows shrunk to their charges (riding along, see
 * below); an advisory lock per account, so one account's admissions take turns across instances; a
 * sweep of the account's expired rows; then the balance, the key's spend and the live reservations
 * read, and ours inserted only if it fits. Those reads start after the lock is ours (a VOLATILE
 * function takes a fresh snapshot per statement), so they see every reservation admitted before. A flush that replaces a reservation by its charge
 * commits both in one transaction, so any snapshot sees one or the other. Under concurrency the
 * admissions of one instance go together in one `sigil_reserve_batch` call (migration 22,
 * `reservationBatching`), each answered as if sent alone right after the ones before it; since
 * migration 25 the batch reads each account's standing and live leases once and checks its items
 * against running totals.
 *
 * Durability. The admission commits with `synchronous_commit = off` (for that transaction only): it
 * is visible to every instance at once, as any commit, but does not wait for the write-ahead log to
 * reach the disk while it holds the account's lock (a flush per admission, 1–5 ms on a loaded
 * machine, serialised per account). A crash of the database server can lose the rows admitted in its
 * last fraction of a second: those runs then stop counting against the balance and the cap until
 * they settle (a few runs too many possible in that moment, never a charge lost: charges commit
 * synchronously, in the flush). docs/consistency.md, "Reservations of runs in flight".
 */
import { randomUUID } from "node:crypto";
import { type DataLayer, type Sql, prepare } from "../db";
import { isPostgresLayer, sameDatabase } from "../db/engine";
import { type BatchAnswer, StatementBatcher, retryingDeadlocks } from "../db/batching";
import type { BatchedLease, RidingAdmission } from "../db/riding";
import type { Principal } from "./principal";

/** A run's reservation, as this instance holds it until a committed flush deletes its row. */
export interface Reservation {
  readonly id: string;
  readonly principal: Principal;
  /** The normalized key address (lower case). */
  readonly keyAddress: string;
  /** The time limit the run was admitted with: its charge never exceeds this limit's price. */
  readonly timeLimitMs: number;
  /** What admission reserved: the limit's price. */
  readonly worstCents: number;
  /** What the row holds: the worst case while the run is in flight, its charge once settled. */
  cents: number;
  /** After this (ms, this instance's clock), no instance counts the row any more. */
  expiresMs: number;
  /** running: in flight; settled: its charge (or release) waits for the next flush. */
  state: "running" | "settled";
}

/** What stands against a new reservation, as the database has it (committed state only). */
export interface Standing {
  balance_cents: number;
  spent_cents: number;
  cap_cents: number | null;
  /** Live (unexpired) reservations of the account, and of this key within the account. */
  reserved_account_cents: number;
  reserved_key_cents: number;
}

/** This instance's additions to the database's view (charges not committed yet, rows that expired). */
export interface LocalExtra {
  account: number;
  key: number;
}

export type Verdict = "fits" | "cap" | "balance";

/** The rule, written once: the cap first (the narrower, key-specific refusal), then the balance. */
export function verdict(s: Standing, extra: LocalExtra, cents: number): Verdict {
  if (s.cap_cents !== null && s.spent_cents + extra.key + s.reserved_key_cents + cents > s.cap_cents)
    return "cap";
  if (s.balance_cents - extra.account - s.reserved_account_cents < cents) return "balance";
  return "fits";
}

const Q = {
  standing: prepare("reservations.standing", (db, a) =>
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
      eb
        .selectFrom("billing_reservations")
        .select((e) => e.fn.coalesce(e.fn.sum<number>("cents"), e.lit(0)).as("s"))
        .where("account_id", "=", a(0))
        .where("expires_ms", ">", a(2))
        .as("reserved_account_cents"),
      eb
        .selectFrom("billing_reservations")
        .select((e) => e.fn.coalesce(e.fn.sum<number>("cents"), e.lit(0)).as("s"))
        .where("account_id", "=", a(0))
        .where("key_address", "=", a(1))
        .where("expires_ms", ">", a(2))
        .as("reserved_key_cents"),
    ]),
  ),
  insert: prepare("reservations.insert", (db, a) =>
    db.insertInto("billing_reservations").values({
      reservation_id: a(0),
      account_id: a(1),
      key_address: a(2),
      cents: a(3),
      expires_ms: a(4),
      created_ms: a(5),
    }),
  ),
  deleteExpired: prepare("reservations.deleteExpired", (db, a) =>
    db.deleteFrom("billing_reservations").where("account_id", "=", a(0)).where("expires_ms", "<=", a(1)),
  ),
  // Only ever downwards: a settled run's row shrinks from its worst case to its charge.
  shrink: prepare("reservations.shrink", (db, a) =>
    db
      .updateTable("billing_reservations")
      .set({ cents: a(1) })
      .where("reservation_id", "=", a(0))
      .where("cents", ">", a(1)),
  ),
  renew: prepare("reservations.renew", (db, a) =>
    db
      .updateTable("billing_reservations")
      .set({ expires_ms: a(1) })
      .where("reservation_id", "=", a(0))
      .where("expires_ms", ">", a(2)),
  ),
};

function toStanding(row: Record<string, unknown> | undefined): Standing {
  const n = (v: unknown) => (v === null || v === undefined ? 0 : Number(v));
  return {
    balance_cents: n(row?.balance_cents),
    spent_cents: n(row?.spent_cents),
    cap_cents: row?.cap_cents === null || row?.cap_cents === undefined ? null : Number(row.cap_cents),
    reserved_account_cents: n(row?.reserved_account_cents),
    reserved_key_cents: n(row?.reserved_key_cents),
  };
}

/** The committed state a check compares against (the same read as a reservation's, without the lock). */
export async function readStanding(
  db: Sql,
  accountId: string,
  key: string,
  nowMs: number,
): Promise<Standing> {
  return toStanding(await db.first(Q.standing, [accountId, key, nowMs]));
}

export interface ReserveRequest {
  principal: Principal;
  keyAddress: string;
  cents: number;
  timeLimitMs: number;
  expiresMs: number;
  nowMs: number;
  extra: LocalExtra;
  /**
   * Rows of this instance's settled runs to shrink to their charge first, in the same transaction
   * (SQLite) or round trip (PostgreSQL), instead of a commit of their own (see Metering.afterSettle).
   */
  shrinks?: ReadonlyArray<readonly [id: string, cents: number]>;
  /**
   * PostgreSQL: another admission of the same run (its execution lease) to make in the same round
   * trip and transaction: only if this reservation fits, and this reservation stands only if that
   * admits too (relayer/db/riding.ts). Ignored where it cannot ride (SQLite, another database).
   */
  along?: RidingAdmission;
}

/** reserve's answer: `refusedAlong` is the riding admission's refusal (the reservation fitted, then went with it). */
export interface ReserveOutcome {
  standing: Standing;
  reservation: Reservation | null;
  /** Whether `along` rode in this round trip (if not, the caller admits it on its own). */
  rode: boolean;
  refusedAlong?: Error;
}

/** Whether `along` can ride in a reservation's round trip on `db`. */
export function canRide(db: DataLayer, along: RidingAdmission | undefined): along is RidingAdmission {
  return along !== undefined && isPostgresLayer(db) && sameDatabase(db, along.db);
}

/**
 * Checks and, if it fits, records a reservation, atomically against every other reservation of the
 * account on any instance. Returns the standing it was checked against (before this reservation)
 * and the reservation, or null when it did not fit.
 */
export async function reserve(db: DataLayer, r: ReserveRequest): Promise<ReserveOutcome> {
  const id = randomUUID();
  for (const v of [r.cents, r.expiresMs, r.nowMs, r.extra.account, r.extra.key])
    if (!Number.isSafeInteger(v)) throw new Error(`reservation: not a safe integer: ${v}`);
  const made = (): Reservation => ({
    id,
    principal: r.principal,
    keyAddress: r.keyAddress,
    timeLimitMs: r.timeLimitMs,
    worstCents: r.cents,
    cents: r.cents,
    expiresMs: r.expiresMs,
    state: "running",
  });
  if (isPostgresLayer(db)) {
    const along = canRide(db, r.along) ? r.along : undefined;
    if (reservationBatching.enabled && (!along || along.batchLease)) {
      let row: Record<string, unknown>;
      const lease = along?.batchLease?.();
      try {
        row = await reserveBatcherOf(db).submit({ id, r, lease });
      } catch (err) {
        along?.abandon();
        throw err;
      }
      return outcomeOf(row, along, made);
    }
    const own = reserveParams(id, r);
    const ride = along?.call("r.admitted = 1", own.length + 1);
    let row: Record<string, unknown>;
    try {
      [row] = (await db.exec(
        along ? RESERVE_WITH_RIDER(ride!.from, along.admitted) : RESERVE,
        [...own, ...(ride?.params ?? [])],
        { prepared: true },
      )) as Array<Record<string, unknown>>;
    } catch (err) {
      along?.abandon();
      throw err;
    }
    return outcomeOf(row, along, made);
  }
  return db.transaction(async (tx) => {
    for (const [sid, cents] of r.shrinks ?? []) await tx.run(Q.shrink, [sid, cents]);
    // Rows of a crashed instance would otherwise stay in the table for ever (they stopped counting
    // at their expiry already).
    await tx.run(Q.deleteExpired, [r.principal.accountId, r.nowMs]);
    const standing = await readStanding(tx, r.principal.accountId, r.keyAddress, r.nowMs);
    if (verdict(standing, r.extra, r.cents) !== "fits") return { standing, reservation: null, rode: false };
    await tx.run(Q.insert, [id, r.principal.accountId, r.keyAddress, r.cents, r.expiresMs, r.nowMs]);
    return { standing, reservation: made(), rode: false };
  });
}

/** A PostgreSQL admission's answer row, as the caller gets it (the same from a batch as alone). */
function outcomeOf(
  row: Record<string, unknown>,
  along: RidingAdmission | undefined,
  made: () => Reservation,
): ReserveOutcome {
  const standing = toStanding(row);
  const fits = Number(row.admitted) === 1;
  if (!along) return { standing, reservation: fits ? made() : null, rode: false };
  const alongAdmitted = along.ran(row, fits);
  if (fits && !alongAdmitted)
    return { standing, reservation: null, rode: true, refusedAlong: along.refusal() };
  return { standing, reservation: fits ? made() : null, rode: true };
}

/**
 * Whether concurrent PostgreSQL admissions of one instance share one statement (`sigil_reserve_batch`,
 * migration 22; relayer/db/batching.ts): the reservations waiting while one is on its way go
 * together, each with its riding lease, each answered as if sent alone in the batch's order. Off: one
 * `sigil_reserve` call per admission (`npm run bench:postgres` turns it off to compare).
 */
export const reservationBatching = { enabled: true };

interface BatchItem {
  id: string;
  r: ReserveRequest;
  lease?: BatchedLease;
}
const reserveBatchers = new WeakMap<DataLayer, StatementBatcher<BatchItem, Record<string, unknown>>>();

/** The batcher of `db`'s admissions (created on first use; its `sizes` tell how much it grouped). */
export function reserveBatcherOf(db: DataLayer): StatementBatcher<BatchItem, Record<string, unknown>> {
  let b = reserveBatchers.get(db);
  if (!b) {
    b = new StatementBatcher((items) => reserveBatch(db, items));
    reserveBatchers.set(db, b);
  }
  return b;
}

/**
 * One `sigil_reserve_batch` call for the waiting admissions: every item's shrinks and its lease's
 * releases carried once, the items admitted in order; one row per item. A statement that fails
 * fails every item (nothing of it was applied: one transaction), after its deadlock retries.
 */
async function reserveBatch(
  db: DataLayer,
  items: readonly BatchItem[],
): Promise<Array<BatchAnswer<Record<string, unknown>>>> {
  const col = <T>(f: (i: BatchItem) => T) => items.map(f);
  const shrinks = items.flatMap((i) => i.r.shrinks ?? []);
  const rows = (await retryingDeadlocks(() =>
    db.exec(
      `SELECT * FROM sigil_reserve_batch($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
         $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::bigint[], $11::text[], $12::text[],
         $13::int[], $14::bigint[], $15::text[])`,
      [
        col((i) => i.id),
        col((i) => i.r.principal.accountId),
        col((i) => i.r.keyAddress),
        col((i) => i.r.cents),
        col((i) => i.r.expiresMs),
        col((i) => i.r.nowMs),
        col((i) => i.r.extra.account),
        col((i) => i.r.extra.key),
        shrinks.map(([sid]) => sid),
        shrinks.map(([, cents]) => cents),
        col((i) => i.lease?.leaseId ?? null),
        col((i) => i.lease?.accountId ?? null),
        col((i) => i.lease?.cap ?? null),
        col((i) => i.lease?.leaseMs ?? null),
        items.flatMap((i) => i.lease?.releases ?? []),
      ],
      { prepared: true },
    ),
  )) as Array<Record<string, unknown>>;
  const answers: Array<BatchAnswer<Record<string, unknown>>> = items.map(() => ({
    ok: false,
    error: new Error("sigil_reserve_batch did not answer this admission"),
  }));
  for (const row of rows) answers[Number(row.item) - 1] = { ok: true, value: row };
  return answers;
}

/**
 * The PostgreSQL admission, one round trip and one prepared statement: `sigil_reserve` (migration 20)
 * shrinks this instance's settled rows, takes the account's lock, sweeps its expired rows, and checks
 * and inserts the reservation; it answers one row, the standing and whether the row went in. Its
 * parameters: `reserveParams`.
 */
const RESERVE_CALL = `sigil_reserve($1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::bigint,
  $7::bigint, $8::bigint, $9::text[], $10::bigint[]) AS r`;
const RESERVE = `SELECT r.* FROM ${RESERVE_CALL}`;
/**
 * The same with another admission riding (relayer/db/riding.ts): its call joined after ours, taking
 * effect only where ours admitted; then `sigil_unreserve` deletes our row where the rider refused, in
 * the same transaction, so no other instance ever counts it. (The select list is computed after both
 * calls of its row.)
 */
const RESERVE_WITH_RIDER = (riderFrom: string, riderAdmitted: string) =>
  `SELECT *, sigil_unreserve($1::text, NOT (${riderAdmitted})) AS unreserved
     FROM ${RESERVE_CALL} CROSS JOIN LATERAL ${riderFrom}`;

function reserveParams(id: string, r: ReserveRequest): unknown[] {
  const shrinks = r.shrinks ?? [];
  return [
    id,
    r.principal.accountId,
    r.keyAddress,
    r.cents,
    r.expiresMs,
    r.nowMs,
    r.extra.account,
    r.extra.key,
    shrinks.map(([sid]) => sid),
    shrinks.map(([, cents]) => cents),
  ];
}

/**
 * Settled rows shrink to their charges, so others see the exact amounts before the flush. PostgreSQL:
 * all of them in one autocommitted call of `sigil_shrink` (migration 20; asynchronous commit, like an
 * admission: a shrink lost in a crash of the server leaves the worst case counting, a refusal a
 * moment early at most), a prepared statement.
 */
export async function shrinkSettled(
  db: DataLayer,
  shrinks: ReadonlyArray<readonly [id: string, cents: number]>,
): Promise<void> {
  if (shrinks.length === 0) return;
  if (isPostgresLayer(db)) {
    await db.exec(
      "SELECT sigil_shrink($1::text[], $2::bigint[])",
      [shrinks.map(([id]) => id), shrinks.map(([, cents]) => cents)],
      { prepared: true },
    );
    return;
  }
  for (const [id, cents] of shrinks) await db.run(Q.shrink, [id, cents]);
}

/** Moves a live row's expiry; false if the row is gone or had expired (then it counts nowhere). */
export async function renew(db: Sql, id: string, expiresMs: number, nowMs: number): Promise<boolean> {
  return (await db.run(Q.renew, [id, expiresMs, nowMs])) > 0;
}

/** Deletes rows by id, inside the flush that commits their charges (one statement for all of them). */
export async function deleteReservations(tx: Sql, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  if (tx.kind === "postgres")
    await tx.exec("DELETE FROM billing_reservations WHERE reservation_id = ANY($1::text[])", [ids], {
      prepared: true,
    });
  else
    await tx.exec(
      "DELETE FROM billing_reservations WHERE reservation_id IN (SELECT value FROM json_each(?))",
      [JSON.stringify(ids)],
    );
}
