/**
 * One versioned schema for both engines, written with kysely's schema builder (compiled per engine)
 * and applied by one runner. Each migration runs once, in order, in one transaction together with the
 * bump of `schema_version`, so a crash mid-migration leaves the database at the previous version.
 * Append new migrations; never edit one that has shipped: SQLite files written by earlier builds
 * are at version 1 and move on from there.
 *
 * Several instances starting at the same moment: on PostgreSQL the runner holds a session-level
 * advisory lock for the whole run, so one instance migrates and the others wait, then find nothing
 * to do. On SQLite each migration's BEGIN IMMEDIATE takes the file's write lock, and the version is
 * re-read under it.
 */
import { randomBytes } from "node:crypto";
import { type Compilable, type Kysely, sql } from "kysely";
import { type DataLayer, type Sql, isPostgresLayer } from "./engine";
import { type EngineKind, compilerFor } from "./prepared";
import type { Schema } from "./schema";

export interface MigrationContext {
  kind: EngineKind;
  /** Builds statements (never runs them): pass what it builds to `run`. */
  db: Kysely<Schema>;
  run(statement: Compilable<unknown> | string): Promise<void>;
}

export interface Migration {
  version: number;
  description: string;
  up(m: MigrationContext): Promise<void>;
}

/** pg_advisory_lock key: the first 8 bytes of sha256("sigil:migrations"), fixed so every build agrees. */
export const MIGRATION_LOCK_KEY = "7265386312408375157";

const ms = (kind: EngineKind) => (kind === "postgres" ? "bigint" : "integer");

/**
 * Migration 20 (PostgreSQL only): the two admissions of a run as PL/pgSQL functions
 * (relayer/billing/reservations.ts and relayer/db/sharedLimits.ts call them, alone or one riding in
 * the other's round trip: relayer/db/riding.ts). Sent as literal multi-statement scripts, their
 * statements were parsed and planned afresh on every request (~0.5 ms of the server's CPU per
 * execution, docs/performance.md); a function's statements are planned once per connection and then
 * reused. Their logic is the scripts' own, statement for statement: VOLATILE functions take a fresh
 * snapshot for each statement they run (READ COMMITTED), so a count after the advisory lock still sees
 * every row committed before the lock was ours. `#variable_conflict use_column` and qualified columns:
 * the output columns share names with table columns.
 */
const ADMISSION_FUNCTIONS: readonly string[] = [
  // Settled rows shrink to their charges (only ever downwards); rows another transaction holds (a
  // flush deleting them) are skipped, never waited for, so an admission carrying shrinks cannot
  // deadlock with a flush. One primary-key update per row (a join with the arrays was planned for any
  // number of rows: slower). Asynchronous commit, as the admission's: a shrink lost in a crash of the
  // server leaves the worst case counting, a refusal a moment early at most.
  `CREATE OR REPLACE FUNCTION sigil_shrink(p_ids text[], p_cents bigint[]) RETURNS int
   LANGUAGE plpgsql VOLATILE AS $fn$
   BEGIN
     PERFORM set_config('synchronous_commit', 'off', true);
     FOR i IN 1 .. COALESCE(cardinality(p_ids), 0) LOOP
       UPDATE billing_reservations r SET cents = p_cents[i]
        WHERE r.reservation_id = (SELECT q.reservation_id FROM billing_reservations q
                                   WHERE q.reservation_id = p_ids[i] FOR UPDATE SKIP LOCKED)
          AND r.cents > p_cents[i];
     END LOOP;
     RETURN COALESCE(cardinality(p_ids), 0);
   END $fn$`,
  `CREATE OR REPLACE FUNCTION sigil_reserve(
     p_id text, p_account text, p_key text, p_cents bigint, p_expires_ms bigint, p_now_ms bigint,
     p_extra_account bigint, p_extra_key bigint, p_shrink_ids text[], p_shrink_cents bigint[])
   RETURNS TABLE (balance_cents bigint, spent_cents bigint, cap_cents bigint,
                  reserved_account_cents bigint, reserved_key_cents bigint, admitted int)
   LANGUAGE plpgsql VOLATILE ROWS 1 AS $fn$
   #variable_conflict use_column
   BEGIN
     -- The admission commits asynchronously (relayer/billing/reservations.ts, "Durability").
     PERFORM set_config('synchronous_commit', 'off', true);
     -- This instance's settled rows shrink to their charges first.
     PERFORM sigil_shrink(p_shrink_ids, p_shrink_cents);
     PERFORM pg_advisory_xact_lock(hashtext('sigil:reservations:' || p_account));
     DELETE FROM billing_reservations WHERE reservation_id IN (
       SELECT q.reservation_id FROM billing_reservations q
        WHERE q.account_id = p_account AND q.expires_ms <= p_now_ms FOR UPDATE SKIP LOCKED);
     balance_cents := COALESCE((SELECT a.balance_cents FROM accounts a WHERE a.account_id = p_account), 0);
     SELECT k.spent_cents, k.cap_cents INTO spent_cents, cap_cents
       FROM key_spend k WHERE k.key_address = p_key AND k.account_id = p_account;
     spent_cents := COALESCE(spent_cents, 0);
     SELECT COALESCE(SUM(q.cents), 0)::bigint,
            COALESCE(SUM(q.cents) FILTER (WHERE q.key_address = p_key), 0)::bigint
       INTO reserved_account_cents, reserved_key_cents
       FROM billing_reservations q WHERE q.account_id = p_account AND q.expires_ms > p_now_ms;
     IF (cap_cents IS NULL OR spent_cents + p_extra_key + reserved_key_cents + p_cents <= cap_cents)
        AND balance_cents - p_extra_account - reserved_account_cents >= p_cents THEN
       INSERT INTO billing_reservations (reservation_id, account_id, key_address, cents, expires_ms, created_ms)
       VALUES (p_id, p_account, p_key, p_cents, p_expires_ms, p_now_ms);
       admitted := 1;
     ELSE
       admitted := 0;
     END IF;
     RETURN NEXT;
   END $fn$`,
  // The reservation's undo where an admission riding with it refused (relayer/db/riding.ts).
  `CREATE OR REPLACE FUNCTION sigil_unreserve(p_id text, p_drop boolean) RETURNS int
   LANGUAGE plpgsql VOLATILE AS $fn$
   BEGIN
     IF NOT p_drop THEN RETURN 0; END IF;
     DELETE FROM billing_reservations WHERE reservation_id = p_id;
     RETURN 1;
   END $fn$`,
  `CREATE OR REPLACE FUNCTION sigil_lease(
     p_account text, p_lease text, p_cap int, p_lease_ms bigint, p_releases text[], p_go boolean)
   RETURNS TABLE (n int, admitted int)
   LANGUAGE plpgsql VOLATILE ROWS 1 AS $fn$
   #variable_conflict use_column
   DECLARE
     now_ms bigint;
   BEGIN
     -- The lock and the count-and-insert only where the host admitted (p_go); releases go either way.
     IF p_go THEN
       PERFORM pg_advisory_xact_lock(hashtext('sigil:executions:' || p_account));
     END IF;
     now_ms := (extract(epoch from clock_timestamp()) * 1000)::bigint;
     -- Two statements, not one with OR: each keeps one plan on its own index.
     IF cardinality(p_releases) > 0 THEN
       DELETE FROM execution_leases l WHERE l.lease_id = ANY (p_releases);
     END IF;
     DELETE FROM execution_leases l WHERE l.account_id = p_account AND l.expires_ms < now_ms;
     SELECT COUNT(*)::int INTO n FROM execution_leases l WHERE l.account_id = p_account;
     IF p_go AND n < p_cap THEN
       INSERT INTO execution_leases (lease_id, account_id, expires_ms) VALUES (p_lease, p_account, now_ms + p_lease_ms);
       admitted := 1;
     ELSE
       admitted := 0;
     END IF;
     RETURN NEXT;
   END $fn$`,
];

/**
 * Migration 21: the per-request admissions of several concurrent requests of one instance in one
 * statement (relayer/db/batching.ts). Each processes its items in order, under the same locks as the
 * single-item functions, taken in one global order (by lock key, rows by bucket name) so that two
 * batches never wait on each other in a cycle.
 */
const BATCH_FUNCTIONS: readonly string[] = [
  // Items: (p_accounts[i], p_leases[i]). One row per item, in order: the leases counted before it
  // (its account's live leases plus those admitted before it in this batch) and whether it was admitted.
  `CREATE OR REPLACE FUNCTION sigil_lease_batch(
     p_accounts text[], p_leases text[], p_cap int, p_lease_ms bigint, p_releases text[])
   RETURNS TABLE (n int, admitted int)
   LANGUAGE plpgsql VOLATILE AS $fn$
   #variable_conflict use_column
   DECLARE
     now_ms bigint;
     lock_key int;
   BEGIN
     FOR lock_key IN SELECT DISTINCT hashtext('sigil:executions:' || a) AS k FROM unnest(p_accounts) a ORDER BY k LOOP
       PERFORM pg_advisory_xact_lock(lock_key);
     END LOOP;
     now_ms := (extract(epoch from clock_timestamp()) * 1000)::bigint;
     IF cardinality(p_releases) > 0 THEN
       DELETE FROM execution_leases l WHERE l.lease_id = ANY (p_releases);
     END IF;
     DELETE FROM execution_leases l WHERE l.account_id = ANY (p_accounts) AND l.expires_ms < now_ms;
     RETURN QUERY
     WITH items AS (
       SELECT u.a AS account_id, u.l AS lease_id, u.ord FROM unnest(p_accounts, p_leases) WITH ORDINALITY AS u(a, l, ord)),
     base AS (
       SELECT d.account_id, (SELECT COUNT(*) FROM execution_leases e WHERE e.account_id = d.account_id)::int AS live
         FROM (SELECT DISTINCT i.account_id FROM items i) d),
     ranked AS (
       SELECT i.account_id, i.lease_id, i.ord, b.live,
              (row_number() OVER (PARTITION BY i.account_id ORDER BY i.ord))::int AS rn
         FROM items i JOIN base b ON b.account_id = i.account_id),
     ins AS (
       INSERT INTO execution_leases (lease_id, account_id, expires_ms)
       SELECT r.lease_id, r.account_id, now_ms + p_lease_ms FROM ranked r WHERE r.live + r.rn <= p_cap
       RETURNING 1)
     SELECT (r.live + LEAST(r.rn - 1, GREATEST(p_cap - r.live, 0)))::int,
            CASE WHEN r.live + r.rn <= p_cap THEN 1 ELSE 0 END
       FROM ranked r ORDER BY r.ord;
   END $fn$`,
  // Token takes, flattened: entry j takes one token from bucket p_buckets[j] (capacity p_caps[j],
  // refill p_rates[j] per ms) for item p_items[j]; an item's entries are consecutive, in its order, and
  // each is taken only if the item's earlier ones were. One row per item, in order: how many of its
  // tokens were taken (all of them, or those before its refusal). Every bucket's row is locked first,
  // in bucket order (a bucket seen for the first time starts full); each is refilled once, the items
  // are counted against it in order, and it is written once.
  `CREATE OR REPLACE FUNCTION sigil_take_batch(
     p_items int[], p_buckets text[], p_caps float8[], p_rates float8[])
   RETURNS TABLE (item int, taken int)
   LANGUAGE plpgsql VOLATILE AS $fn$
   #variable_conflict use_column
   DECLARE
     now_ms bigint := (extract(epoch from clock_timestamp()) * 1000)::bigint;
     v_names text[];
     v_tokens float8[];
     v_used boolean[];
     j int;
     k int;
     refused boolean := false;
   BEGIN
     INSERT INTO rate_buckets (bucket, tokens, updated_ms)
     SELECT DISTINCT ON (u.b) u.b, u.c, now_ms FROM unnest(p_buckets, p_caps) AS u(b, c) ORDER BY u.b
     ON CONFLICT (bucket) DO NOTHING;
     PERFORM 1 FROM rate_buckets r WHERE r.bucket = ANY (p_buckets) ORDER BY r.bucket FOR UPDATE;
     now_ms := (extract(epoch from clock_timestamp()) * 1000)::bigint;
     SELECT array_agg(r.bucket ORDER BY r.bucket),
            array_agg(LEAST(u.c, r.tokens + (now_ms - r.updated_ms) * u.rate) ORDER BY r.bucket),
            array_agg(false ORDER BY r.bucket)
       INTO v_names, v_tokens, v_used
       FROM rate_buckets r
       JOIN (SELECT DISTINCT ON (x.b) x.b, x.c, x.rate FROM unnest(p_buckets, p_caps, p_rates) AS x(b, c, rate)) u
         ON u.b = r.bucket;
     item := NULL;
     FOR j IN 1 .. COALESCE(cardinality(p_items), 0) LOOP
       IF item IS DISTINCT FROM p_items[j] THEN
         IF item IS NOT NULL THEN RETURN NEXT; END IF;
         item := p_items[j];
         taken := 0;
         refused := false;
       END IF;
       IF NOT refused THEN
         k := array_position(v_names, p_buckets[j]);
         IF v_tokens[k] >= 1 THEN
           v_tokens[k] := v_tokens[k] - 1;
           v_used[k] := true;
           taken := taken + 1;
         ELSE
           refused := true;
         END IF;
       END IF;
     END LOOP;
     IF item IS NOT NULL THEN RETURN NEXT; END IF;
     UPDATE rate_buckets r SET tokens = u.t, updated_ms = now_ms
       FROM unnest(v_names, v_tokens, v_used) AS u(b, t, took) WHERE r.bucket = u.b AND u.took;
   END $fn$`,
];

/**
 * Migration 22: the reservations of several concurrent runs of one instance in one statement, each
 * with its execution lease riding (relayer/billing/reservations.ts, relayer/db/batching.ts). The check
 * and insert of one reservation is `sigil_reserve_item`, the same for a reservation alone
 * (`sigil_reserve`, whose body it replaces: unchanged behaviour) and in a batch. A batch shrinks every
 * item's settled rows once, takes every reservation lock and then every execution lock its items
 * need, each set in lock-key order (so batches never wait on each other in a cycle, and a lone
 * admission, which takes its account's reservation lock before its execution lock, fits that order),
 * sweeps the accounts' expired rows once, then admits the items in order: each sees the rows the
 * items before it inserted, so it gets the answer it would have had alone, sent just after them.
 */
const RESERVE_BATCH_FUNCTIONS: readonly string[] = [
  // The check and insert (the caller holds the account's reservation lock). The standing is read in
  // one statement, so from one snapshot: a flush that commits a charge and deletes its reservation
  // (one transaction) is seen wholly or not at all. (Migration 20's three reads took three
  // snapshots: a flush committing between the balance read and the sums' missed the charge.)
  `CREATE OR REPLACE FUNCTION sigil_reserve_item(
     p_id text, p_account text, p_key text, p_cents bigint, p_expires_ms bigint, p_now_ms bigint,
     p_extra_account bigint, p_extra_key bigint)
   RETURNS TABLE (balance_cents bigint, spent_cents bigint, cap_cents bigint,
                  reserved_account_cents bigint, reserved_key_cents bigint, admitted int)
   LANGUAGE plpgsql VOLATILE ROWS 1 AS $fn$
   #variable_conflict use_column
   BEGIN
     SELECT COALESCE((SELECT a.balance_cents FROM accounts a WHERE a.account_id = p_account), 0),
            COALESCE(k.spent_cents, 0), k.cap_cents, s.account_cents, s.key_cents
       INTO balance_cents, spent_cents, cap_cents, reserved_account_cents, reserved_key_cents
       FROM (SELECT COALESCE(SUM(q.cents), 0)::bigint AS account_cents,
                    COALESCE(SUM(q.cents) FILTER (WHERE q.key_address = p_key), 0)::bigint AS key_cents
               FROM billing_reservations q WHERE q.account_id = p_account AND q.expires_ms > p_now_ms) s
       LEFT JOIN key_spend k ON k.key_address = p_key AND k.account_id = p_account;
     IF (cap_cents IS NULL OR spent_cents + p_extra_key + reserved_key_cents + p_cents <= cap_cents)
        AND balance_cents - p_extra_account - reserved_account_cents >= p_cents THEN
       INSERT INTO billing_reservations (reservation_id, account_id, key_address, cents, expires_ms, created_ms)
       VALUES (p_id, p_account, p_key, p_cents, p_expires_ms, p_now_ms);
       admitted := 1;
     ELSE
       admitted := 0;
     END IF;
     RETURN NEXT;
   END $fn$`,
  `CREATE OR REPLACE FUNCTION sigil_reserve(
     p_id text, p_account text, p_key text, p_cents bigint, p_expires_ms bigint, p_now_ms bigint,
     p_extra_account bigint, p_extra_key bigint, p_shrink_ids text[], p_shrink_cents bigint[])
   RETURNS TABLE (balance_cents bigint, spent_cents bigint, cap_cents bigint,
                  reserved_account_cents bigint, reserved_key_cents bigint, admitted int)
   LANGUAGE plpgsql VOLATILE ROWS 1 AS $fn$
   #variable_conflict use_column
   BEGIN
     -- The admission commits asynchronously (relayer/billing/reservations.ts, "Durability").
     PERFORM set_config('synchronous_commit', 'off', true);
     -- This instance's settled rows shrink to their charges first.
     PERFORM sigil_shrink(p_shrink_ids, p_shrink_cents);
     PERFORM pg_advisory_xact_lock(hashtext('sigil:reservations:' || p_account));
     DELETE FROM billing_reservations WHERE reservation_id IN (
       SELECT q.reservation_id FROM billing_reservations q
        WHERE q.account_id = p_account AND q.expires_ms <= p_now_ms FOR UPDATE SKIP LOCKED);
     RETURN QUERY SELECT * FROM sigil_reserve_item(p_id, p_account, p_key, p_cents, p_expires_ms, p_now_ms,
                                                   p_extra_account, p_extra_key);
   END $fn$`,
  // Items: position i of every p_ array but the shrinks and releases (carried once for all). An
  // item's lease (p_leases[i] not null: its id, account, cap and duration) is admitted with
  // sigil_lease only where its reservation fitted, and the reservation is deleted again where the
  // lease was refused. One row per item, in order (item: its 1-based position): the standing its
  // reservation was checked against, whether it fitted, and its lease's count and verdict (null
  // where no lease was tried).
  `CREATE OR REPLACE FUNCTION sigil_reserve_batch(
     p_ids text[], p_accounts text[], p_keys text[], p_cents bigint[], p_expires_ms bigint[],
     p_now_ms bigint[], p_extra_account bigint[], p_extra_key bigint[],
     p_shrink_ids text[], p_shrink_cents bigint[],
     p_leases text[], p_lease_accounts text[], p_lease_caps int[], p_lease_ms bigint[], p_releases text[])
   RETURNS TABLE (item int, balance_cents bigint, spent_cents bigint, cap_cents bigint,
                  reserved_account_cents bigint, reserved_key_cents bigint, admitted int,
                  lease_running int, lease_admitted int)
   LANGUAGE plpgsql VOLATILE AS $fn$
   #variable_conflict use_column
   DECLARE
     lock_key int;
     r record;
     l record;
   BEGIN
     PERFORM set_config('synchronous_commit', 'off', true);
     PERFORM sigil_shrink(p_shrink_ids, p_shrink_cents);
     FOR lock_key IN SELECT DISTINCT hashtext('sigil:reservations:' || a) AS k FROM unnest(p_accounts) a ORDER BY k LOOP
       PERFORM pg_advisory_xact_lock(lock_key);
     END LOOP;
     FOR lock_key IN SELECT DISTINCT hashtext('sigil:executions:' || u.a) AS k
                       FROM unnest(p_lease_accounts, p_leases) AS u(a, lease) WHERE u.lease IS NOT NULL ORDER BY k LOOP
       PERFORM pg_advisory_xact_lock(lock_key);
     END LOOP;
     IF cardinality(p_releases) > 0 THEN
       DELETE FROM execution_leases e WHERE e.lease_id = ANY (p_releases);
     END IF;
     -- The earliest clock of the batch: a row expired for every item (each counts only rows live at its own).
     DELETE FROM billing_reservations WHERE reservation_id IN (
       SELECT q.reservation_id FROM billing_reservations q
        WHERE q.account_id = ANY (p_accounts)
          AND q.expires_ms <= (SELECT min(x) FROM unnest(p_now_ms) x) FOR UPDATE SKIP LOCKED);
     FOR i IN 1 .. COALESCE(cardinality(p_ids), 0) LOOP
       SELECT * INTO r FROM sigil_reserve_item(p_ids[i], p_accounts[i], p_keys[i], p_cents[i],
                                               p_expires_ms[i], p_now_ms[i], p_extra_account[i], p_extra_key[i]);
       item := i;
       balance_cents := r.balance_cents;
       spent_cents := r.spent_cents;
       cap_cents := r.cap_cents;
       reserved_account_cents := r.reserved_account_cents;
       reserved_key_cents := r.reserved_key_cents;
       admitted := r.admitted;
       lease_running := NULL;
       lease_admitted := NULL;
       IF r.admitted = 1 AND p_leases[i] IS NOT NULL THEN
         SELECT * INTO l FROM sigil_lease(p_lease_accounts[i], p_leases[i], p_lease_caps[i], p_lease_ms[i], '{}'::text[], true);
         lease_running := l.n;
         lease_admitted := l.admitted;
         IF l.admitted <> 1 THEN
           DELETE FROM billing_reservations q WHERE q.reservation_id = p_ids[i];
         END IF;
       END IF;
       RETURN NEXT;
     END LOOP;
   END $fn$`,
];

/**
 * Migration 25: `sigil_reserve_batch` reads what stands against its items once, instead of once per
 * item. Migration 22's batch called `sigil_reserve_item` and `sigil_lease` for each item, each
 * re-reading what the item before it had just read (the account's balance, the key's spend, the sum of
 * the account's live reservations, the count of its live leases), and inserted one row per call: the
 * admission's per-item work was most of the server's CPU per execution (docs/performance.md,
 * "PostgreSQL: the server's CPU per execution"). Now, under the same locks, taken in the same order:
 *
 * - the standing of each (account, key) pair of the batch once, in one statement, so from one
 *   snapshot, as `sigil_reserve_item` reads it for one item (a flush that commits a charge and deletes
 *   its reservation is seen wholly or not at all);
 * - the live leases of every account with a lease in the batch, counted once after one sweep;
 * - the items checked in order against running totals (the rows of the items admitted before them
 *   added), with the rule of `sigil_reserve_item` and `sigil_lease`, and a reservation whose lease is
 *   refused never inserted (before, inserted and deleted again);
 * - the admitted reservations and leases inserted in one statement each.
 *
 * Each item still gets the answer it would have had alone, sent just after the items before it: the
 * locks keep every other admission out, and what others can commit meanwhile (a flush's charge with
 * its reservation's delete, a top-up) only ever frees room, so each pair's read is its standing at one
 * moment inside the batch, and the batch's own rows (added to every pair of their account) are the
 * only ones inserted since. Each item counts only the reservations live at its own clock (`p_now_ms[i]`):
 * when a live row expires between the batch's earliest and latest clock, or an item's own row would
 * expire within the batch's clocks, the sums differ per item, and the batch takes migration 22's path,
 * one `sigil_reserve_item` (and `sigil_lease`) per item, unchanged. The leases are counted at one clock
 * for the batch, as `sigil_lease_batch` (migration 21) does.
 */
const RESERVE_BATCH_ONE_READ: readonly string[] = [
  `CREATE OR REPLACE FUNCTION sigil_reserve_batch(
     p_ids text[], p_accounts text[], p_keys text[], p_cents bigint[], p_expires_ms bigint[],
     p_now_ms bigint[], p_extra_account bigint[], p_extra_key bigint[],
     p_shrink_ids text[], p_shrink_cents bigint[],
     p_leases text[], p_lease_accounts text[], p_lease_caps int[], p_lease_ms bigint[], p_releases text[])
   RETURNS TABLE (item int, balance_cents bigint, spent_cents bigint, cap_cents bigint,
                  reserved_account_cents bigint, reserved_key_cents bigint, admitted int,
                  lease_running int, lease_admitted int)
   LANGUAGE plpgsql VOLATILE
   -- One plan per statement and connection: the custom plans PL/pgSQL would otherwise choose for
   -- these array-driven statements were planned afresh at every call (0.6 ms for the standing's).
   SET plan_cache_mode = force_generic_plan
   AS $fn$
   #variable_conflict use_column
   DECLARE
     n int := COALESCE(cardinality(p_ids), 0);
     min_now bigint := (SELECT min(x) FROM unnest(p_now_ms) x);
     max_now bigint := (SELECT max(x) FROM unnest(p_now_ms) x);
     lock_key int;
     r record;
     l record;
     -- The standing of each (account, key) pair of the batch, at position pk (s_pairs: a pair's name).
     s_accounts text[];
     s_keys text[];
     s_balance bigint[];
     s_spent bigint[];
     s_cap bigint[];
     s_reserved_account bigint[];
     s_reserved_key bigint[];
     s_pairs text[];
     v_balance bigint;
     v_spent bigint;
     v_cap bigint;
     v_account_cents bigint;
     v_key_cents bigint;
     v_straddling bigint;
     -- Live reservations whose expiry falls within the batch's clocks (counted by some items only).
     straddling bigint := 0;
     -- Live leases per account with a lease in the batch.
     l_accounts text[];
     l_live int[];
     lease_now bigint;
     stands boolean[] := array_fill(false, ARRAY[n]);
     leased boolean[] := array_fill(false, ARRAY[n]);
     fits boolean;
     pk int;
     a int;
   BEGIN
     PERFORM set_config('synchronous_commit', 'off', true);
     PERFORM sigil_shrink(p_shrink_ids, p_shrink_cents);
     FOR lock_key IN SELECT DISTINCT hashtext('sigil:reservations:' || x) AS k FROM unnest(p_accounts) x ORDER BY k LOOP
       PERFORM pg_advisory_xact_lock(lock_key);
     END LOOP;
     FOR lock_key IN SELECT DISTINCT hashtext('sigil:executions:' || u.a) AS k
                       FROM unnest(p_lease_accounts, p_leases) AS u(a, lease) WHERE u.lease IS NOT NULL ORDER BY k LOOP
       PERFORM pg_advisory_xact_lock(lock_key);
     END LOOP;
     IF cardinality(p_releases) > 0 THEN
       DELETE FROM execution_leases e WHERE e.lease_id = ANY (p_releases);
     END IF;
     -- The earliest clock of the batch: a row expired for every item (each counts only rows live at its own).
     DELETE FROM billing_reservations WHERE reservation_id IN (
       SELECT q.reservation_id FROM billing_reservations q
        WHERE q.account_id = ANY (p_accounts) AND q.expires_ms <= min_now FOR UPDATE SKIP LOCKED);

     SELECT array_agg(d.a ORDER BY d.a, d.k), array_agg(d.k ORDER BY d.a, d.k)
       INTO s_accounts, s_keys
       FROM (SELECT DISTINCT u.a, u.k FROM unnest(p_accounts, p_keys) AS u(a, k)) d;
     s_pairs := ARRAY(SELECT x.a || chr(31) || x.k FROM unnest(s_accounts, s_keys) AS x(a, k));
     -- Each pair's standing in one statement (one snapshot), as sigil_reserve_item reads it, its sums
     -- at the latest clock of the batch; rows live at the earliest but not at the latest counted apart.
     FOR pk IN 1 .. cardinality(s_pairs) LOOP
       SELECT COALESCE((SELECT c.balance_cents FROM accounts c WHERE c.account_id = s_accounts[pk]), 0),
              COALESCE(ks.spent_cents, 0), ks.cap_cents, s.account_cents, s.key_cents, s.straddling
         INTO v_balance, v_spent, v_cap, v_account_cents, v_key_cents, v_straddling
         FROM (SELECT COALESCE(SUM(q.cents) FILTER (WHERE q.expires_ms > max_now), 0)::bigint AS account_cents,
                      COALESCE(SUM(q.cents) FILTER (WHERE q.expires_ms > max_now AND q.key_address = s_keys[pk]), 0)::bigint AS key_cents,
                      COUNT(*) FILTER (WHERE q.expires_ms <= max_now) AS straddling
                 FROM billing_reservations q WHERE q.account_id = s_accounts[pk] AND q.expires_ms > min_now) s
         LEFT JOIN key_spend ks ON ks.key_address = s_keys[pk] AND ks.account_id = s_accounts[pk];
       s_balance[pk] := v_balance;
       s_spent[pk] := v_spent;
       s_cap[pk] := v_cap;
       s_reserved_account[pk] := v_account_cents;
       s_reserved_key[pk] := v_key_cents;
       straddling := straddling + v_straddling;
     END LOOP;

     IF straddling > 0 OR EXISTS (SELECT 1 FROM unnest(p_expires_ms) x WHERE x <= max_now) THEN
       -- Migration 22's path: each item reads its own standing at its own clock.
       FOR i IN 1 .. n LOOP
         SELECT * INTO r FROM sigil_reserve_item(p_ids[i], p_accounts[i], p_keys[i], p_cents[i],
                                                 p_expires_ms[i], p_now_ms[i], p_extra_account[i], p_extra_key[i]);
         item := i;
         balance_cents := r.balance_cents;
         spent_cents := r.spent_cents;
         cap_cents := r.cap_cents;
         reserved_account_cents := r.reserved_account_cents;
         reserved_key_cents := r.reserved_key_cents;
         admitted := r.admitted;
         lease_running := NULL;
         lease_admitted := NULL;
         IF r.admitted = 1 AND p_leases[i] IS NOT NULL THEN
           SELECT * INTO l FROM sigil_lease(p_lease_accounts[i], p_leases[i], p_lease_caps[i], p_lease_ms[i], '{}'::text[], true);
           lease_running := l.n;
           lease_admitted := l.admitted;
           IF l.admitted <> 1 THEN
             DELETE FROM billing_reservations q WHERE q.reservation_id = p_ids[i];
           END IF;
         END IF;
         RETURN NEXT;
       END LOOP;
       RETURN;
     END IF;

     IF EXISTS (SELECT 1 FROM unnest(p_leases) x WHERE x IS NOT NULL) THEN
       lease_now := (extract(epoch from clock_timestamp()) * 1000)::bigint;
       DELETE FROM execution_leases e
        WHERE e.account_id IN (SELECT u.a FROM unnest(p_lease_accounts, p_leases) AS u(a, lease) WHERE u.lease IS NOT NULL)
          AND e.expires_ms < lease_now;
       SELECT array_agg(d.a ORDER BY d.a),
              array_agg((SELECT COUNT(*) FROM execution_leases e WHERE e.account_id = d.a)::int ORDER BY d.a)
         INTO l_accounts, l_live
         FROM (SELECT DISTINCT u.a FROM unnest(p_lease_accounts, p_leases) AS u(a, lease) WHERE u.lease IS NOT NULL) d;
     END IF;

     FOR i IN 1 .. n LOOP
       pk := array_position(s_pairs, p_accounts[i] || chr(31) || p_keys[i]);
       item := i;
       balance_cents := s_balance[pk];
       spent_cents := s_spent[pk];
       cap_cents := s_cap[pk];
       reserved_account_cents := s_reserved_account[pk];
       reserved_key_cents := s_reserved_key[pk];
       -- sigil_reserve_item's rule.
       fits := (s_cap[pk] IS NULL OR s_spent[pk] + p_extra_key[i] + s_reserved_key[pk] + p_cents[i] <= s_cap[pk])
               AND s_balance[pk] - p_extra_account[i] - s_reserved_account[pk] >= p_cents[i];
       admitted := CASE WHEN fits THEN 1 ELSE 0 END;
       lease_running := NULL;
       lease_admitted := NULL;
       IF fits AND p_leases[i] IS NOT NULL THEN
         -- sigil_lease's rule: the live leases before this one, admitted below the cap.
         a := array_position(l_accounts, p_lease_accounts[i]);
         lease_running := l_live[a];
         IF l_live[a] < p_lease_caps[i] THEN
           l_live[a] := l_live[a] + 1;
           lease_admitted := 1;
           leased[i] := true;
         ELSE
           lease_admitted := 0;
           fits := false; -- the reservation goes with its refused lease
         END IF;
       END IF;
       IF fits THEN
         stands[i] := true;
         FOR j IN 1 .. cardinality(s_accounts) LOOP
           IF s_accounts[j] = p_accounts[i] THEN
             s_reserved_account[j] := s_reserved_account[j] + p_cents[i];
             IF s_keys[j] = p_keys[i] THEN
               s_reserved_key[j] := s_reserved_key[j] + p_cents[i];
             END IF;
           END IF;
         END LOOP;
       END IF;
       RETURN NEXT;
     END LOOP;

     INSERT INTO billing_reservations (reservation_id, account_id, key_address, cents, expires_ms, created_ms)
     SELECT u.id, u.a, u.k, u.c, u.e, u.t
       FROM unnest(p_ids, p_accounts, p_keys, p_cents, p_expires_ms, p_now_ms, stands) AS u(id, a, k, c, e, t, ok)
      WHERE u.ok;
     INSERT INTO execution_leases (lease_id, account_id, expires_ms)
     SELECT u.lease, u.a, lease_now + u.ms
       FROM unnest(p_leases, p_lease_accounts, p_lease_ms, leased) AS u(lease, a, ms, ok)
      WHERE u.ok;
   END $fn$`,
];

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "accounts, ledger, payment intents, webhook events, per-key spend, simulated processor",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // One row per database: ties Stripe intents to this ledger (metadata.ledger_id), so two
      // deployments sharing a Stripe account never credit each other's payments.
      await run(db.schema.createTable("ledger_meta").addColumn("ledger_id", "text", (c) => c.notNull()));
      await run(
        db.schema
          .createTable("accounts")
          .addColumn("account_id", "text", (c) => c.primaryKey())
          .addColumn("balance_cents", big, (c) => c.notNull().defaultTo(0))
          .addColumn("created_at", big, (c) => c.notNull()),
      );
      // Every balance change is one row here, written in the same transaction as the balance.
      // The UNIQUE reference is what makes crediting and charging idempotent, across instances too.
      await run(
        db.schema
          .createTable("ledger_entries")
          .addColumn("id", kind === "postgres" ? "bigserial" : "integer", (c) =>
            kind === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement(),
          )
          .addColumn("account_id", "text", (c) => c.notNull().references("accounts.account_id"))
          .addColumn("kind", "text", (c) => c.notNull().check(sql`kind IN ('credit', 'debit')`))
          .addColumn("amount_cents", big, (c) => c.notNull().check(sql`amount_cents > 0`))
          .addColumn("balance_after_cents", big, (c) => c.notNull())
          .addColumn("reference", "text", (c) => c.notNull().unique())
          .addColumn("key_address", "text")
          .addColumn("operation", "text", (c) => c.notNull())
          .addColumn("created_at", big, (c) => c.notNull()),
      );
      await run(
        db.schema.createIndex("ledger_entries_by_account").on("ledger_entries").columns(["account_id", "id"]),
      );
      await run(
        db.schema
          .createTable("payment_intents")
          .addColumn("payment_intent_id", "text", (c) => c.primaryKey())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("amount_cents", big, (c) => c.notNull())
          .addColumn("currency", "text", (c) => c.notNull())
          .addColumn("status", "text", (c) => c.notNull())
          .addColumn("last_error", "text")
          .addColumn("status_event_at", big, (c) => c.notNull().defaultTo(0))
          .addColumn("credited_cents", big)
          .addColumn("credited_at", big)
          .addColumn("created_at", big, (c) => c.notNull())
          .addColumn("updated_at", big, (c) => c.notNull()),
      );
      await run(
        db.schema
          .createIndex("payment_intents_uncredited")
          .on("payment_intents")
          .columns(["credited_at", "status"]),
      );
      await run(
        db.schema
          .createTable("webhook_events")
          .addColumn("event_id", "text", (c) => c.primaryKey())
          .addColumn("type", "text", (c) => c.notNull())
          .addColumn("outcome", "text", (c) => c.notNull())
          .addColumn("received_at", big, (c) => c.notNull()),
      );
      await run(
        db.schema
          .createTable("key_spend")
          .addColumn("key_address", "text", (c) => c.primaryKey())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("spent_cents", big, (c) => c.notNull().defaultTo(0))
          .addColumn("cap_cents", big),
      );
      // The simulated processor's own state ("its Stripe"), kept in the same database so intents
      // survive restarts of the embedded default.
      await run(
        db.schema
          .createTable("sim_intents")
          .addColumn("id", "text", (c) => c.primaryKey())
          .addColumn("client_secret", "text", (c) => c.notNull())
          .addColumn("amount_cents", big, (c) => c.notNull())
          .addColumn("currency", "text", (c) => c.notNull())
          .addColumn("status", "text", (c) => c.notNull())
          .addColumn("metadata", "text", (c) => c.notNull())
          .addColumn("last_error", "text")
          .addColumn("created_at", big, (c) => c.notNull()),
      );
      await run(
        db.schema
          .createTable("sim_idempotency")
          .addColumn("idempotency_key", "text", (c) => c.primaryKey())
          .addColumn("request_hash", "text", (c) => c.notNull())
          .addColumn("intent_id", "text", (c) => c.notNull()),
      );
      await run(db.insertInto("ledger_meta").values({ ledger_id: "ldg_" + randomBytes(12).toString("hex") }));
    },
  },
  {
    version: 2,
    description: "idempotency records, shared rate-limit buckets, execution leases (used on PostgreSQL)",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // The same shape as the unversioned relayer.sqlite of releases before migration 12 kept its records
      // in (imported on the first start after the upgrade: relayer/db/legacyFiles.ts).
      await run(
        db.schema
          .createTable("idempotency")
          .ifNotExists()
          .addColumn("scope", "text", (c) => c.notNull())
          .addColumn("key", "text", (c) => c.notNull())
          .addColumn("fingerprint", "text", (c) => c.notNull())
          .addColumn("status", "integer", (c) => c.notNull())
          .addColumn("body", "text", (c) => c.notNull())
          .addColumn("created_ms", big, (c) => c.notNull())
          .addPrimaryKeyConstraint("idempotency_pk", ["scope", "key"]),
      );
      await run(
        db.schema.createIndex("idempotency_created").ifNotExists().on("idempotency").column("created_ms"),
      );
      await run(
        db.schema
          .createTable("rate_buckets")
          .addColumn("bucket", "text", (c) => c.primaryKey())
          .addColumn("tokens", kind === "postgres" ? "double precision" : "real", (c) => c.notNull())
          .addColumn("updated_ms", big, (c) => c.notNull()),
      );
      await run(
        db.schema
          .createTable("execution_leases")
          .addColumn("lease_id", "text", (c) => c.primaryKey())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("expires_ms", big, (c) => c.notNull()),
      );
      await run(
        db.schema.createIndex("execution_leases_by_account").on("execution_leases").column("account_id"),
      );
    },
  },
  {
    version: 3,
    description: "outgoing webhooks: endpoints, events, deliveries, scanner cursors, action CIDs",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // The secret is sealed by the enclave (relayer/webhooks/secrets.ts): the database alone reveals none.
      await run(
        db.schema
          .createTable("webhook_endpoints")
          .addColumn("endpoint_id", "text", (c) => c.primaryKey())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("url", "text", (c) => c.notNull())
          .addColumn("event_types", "text", (c) => c.notNull())
          .addColumn("description", "text", (c) => c.notNull())
          .addColumn("enabled", "integer", (c) => c.notNull())
          .addColumn("secret_sealed", "text", (c) => c.notNull())
          .addColumn("previous_secret_sealed", "text")
          .addColumn("previous_secret_expires_ms", big)
          .addColumn("disabled_reason", "text")
          .addColumn("disabled_ms", big)
          .addColumn("created_ms", big, (c) => c.notNull())
          .addColumn("updated_ms", big, (c) => c.notNull()),
      );
      await run(
        db.schema.createIndex("webhook_endpoints_by_account").on("webhook_endpoints").column("account_id"),
      );
      // One row per event, whichever instance saw it first: the UNIQUE id is what makes the chain
      // scanners of several instances (and of one instance after a restart) emit each event once.
      await run(
        db.schema
          .createTable("webhook_outbox_events")
          .addColumn("event_id", "text", (c) => c.primaryKey())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("type", "text", (c) => c.notNull())
          .addColumn("payload", "text", (c) => c.notNull())
          .addColumn("created_ms", big, (c) => c.notNull()),
      );
      // One row per (endpoint, event). A delivery is due when `status` is pending and
      // `next_attempt_ms` has passed; an instance owns it while `lease_expires_ms` is in the future.
      await run(
        db.schema
          .createTable("webhook_deliveries")
          .addColumn("delivery_id", "text", (c) => c.primaryKey())
          .addColumn("endpoint_id", "text", (c) => c.notNull())
          .addColumn("event_id", "text", (c) => c.notNull())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("status", "text", (c) =>
            c.notNull().check(sql`status IN ('pending', 'succeeded', 'failed')`),
          )
          .addColumn("attempts", "integer", (c) => c.notNull())
          .addColumn("next_attempt_ms", big, (c) => c.notNull())
          .addColumn("first_failure_ms", big)
          .addColumn("lease_owner", "text")
          .addColumn("lease_expires_ms", big, (c) => c.notNull())
          .addColumn("last_status", "integer")
          .addColumn("last_error", "text")
          .addColumn("last_attempt_ms", big)
          .addColumn("created_ms", big, (c) => c.notNull())
          .addUniqueConstraint("webhook_deliveries_once", ["endpoint_id", "event_id"]),
      );
      await run(
        db.schema
          .createIndex("webhook_deliveries_due")
          .on("webhook_deliveries")
          .columns(["status", "next_attempt_ms"]),
      );
      await run(
        db.schema
          .createIndex("webhook_deliveries_by_endpoint")
          .on("webhook_deliveries")
          .columns(["endpoint_id", "created_ms"]),
      );
      // Where each scanner stopped (the chain's block, the ledger's entry id), shared by every instance.
      await run(
        db.schema
          .createTable("webhook_cursors")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("position", big, (c) => c.notNull()),
      );
      // The registry's ActionRemoved carries only the CID's hash; the CID string comes from its ActionAdded.
      await run(
        db.schema
          .createTable("webhook_cids")
          .addColumn("cid_hash", "text", (c) => c.primaryKey())
          .addColumn("cid", "text", (c) => c.notNull()),
      );
    },
  },
  {
    version: 4,
    description: "ledger_entries.action_cid: the action an execution charge paid for (spend per action)",
    async up({ db, run }) {
      // Nullable: credits, writes and pins name no action, and rows written before this version
      // never recorded one (they stay NULL rather than being guessed).
      await run(db.schema.alterTable("ledger_entries").addColumn("action_cid", "text"));
    },
  },
  {
    version: 5,
    description: "pins: each account's pinned CIDs and their bytes, so pin quotas hold across instances",
    async up({ kind, db, run }) {
      // The same shape as the table the unversioned relayer.sqlite of earlier releases kept (imported on
      // upgrade: relayer/db/legacyFiles.ts).
      await run(
        db.schema
          .createTable("pins")
          .ifNotExists()
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("cid", "text", (c) => c.notNull())
          .addColumn("bytes", ms(kind), (c) => c.notNull())
          .addColumn("created_ms", ms(kind), (c) => c.notNull())
          .addPrimaryKeyConstraint("pins_pk", ["account_id", "cid"]),
      );
    },
  },
  {
    version: 6,
    description: "cross-instance write mark, shared signed-request nonces (used on PostgreSQL)",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // One row per chain and registry: the newest block a path-A write landed in (relayer/cluster).
      await run(
        db.schema
          .createTable("write_marks")
          .addColumn("scope", "text", (c) => c.primaryKey())
          .addColumn("block", big, (c) => c.notNull()),
      );
      // Nonces of signed requests, until their timestamp leaves the window (unix seconds). UNLOGGED on
      // PostgreSQL: a claim is on every signed request's path, and a WAL flush per claim cost ~4 ms
      // here (docs/consistency.md); what a crash of the database loses is at most 120 s of replay memory.
      const nonces = db.schema
        .createTable("signed_nonces")
        .addColumn("key_address", "text", (c) => c.notNull())
        .addColumn("nonce", "text", (c) => c.notNull())
        .addColumn("expires_s", big, (c) => c.notNull())
        .addPrimaryKeyConstraint("signed_nonces_pk", ["key_address", "nonce"]);
      if (kind === "postgres")
        await run(nonces.compile().sql.replace(/^create table/i, "create unlogged table"));
      else await run(nonces);
      await run(db.schema.createIndex("signed_nonces_expiry").on("signed_nonces").column("expires_s"));
    },
  },
  {
    version: 7,
    description: "billing catch-up of path-A writes: scan cursor per chain and forwarder, gas wallets",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // The first block the write catch-up (relayer/billing/catchUp.ts) has not scanned yet, one row
      // per `<chain id>:<forwarder>`. It only moves forward, in the transaction that charges what it
      // found, so a crash mid-pass rescans (the UNIQUE reference makes that harmless).
      await run(
        db.schema
          .createTable("write_catch_up_cursors")
          .addColumn("scope", "text", (c) => c.primaryKey())
          .addColumn("next_block", big, (c) => c.notNull())
          .addColumn("updated_at", big, (c) => c.notNull()),
      );
      // Every gas wallet an instance on this ledger has sent path-A writes from (each instance
      // registers its own at start): what makes a forward request billable, for every instance's
      // catch-up, also for writes of an instance that is gone.
      await run(
        db.schema
          .createTable("billing_gas_wallets")
          .addColumn("address", "text", (c) => c.primaryKey())
          .addColumn("instance_id", "text", (c) => c.notNull())
          .addColumn("registered_at", big, (c) => c.notNull()),
      );
    },
  },
  {
    version: 8,
    description: "rate-limit buckets and execution leases unlogged (PostgreSQL; nothing to do on SQLite)",
    async up({ kind, run }) {
      // Every request writes a bucket row and every execution two lease rows: logged, each of those
      // autocommits waited for a WAL flush (2.5–5 ms each here, the larger part of a PostgreSQL
      // request; docs/performance.md, "PostgreSQL per request"). Unlogged rows are as shared and as
      // consistent while the database runs; a crash of the database server empties both tables, i.e.
      // every bucket starts full again and running executions stop counting (docs/consistency.md).
      if (kind !== "postgres") return;
      await run("ALTER TABLE rate_buckets SET UNLOGGED");
      await run("ALTER TABLE execution_leases SET UNLOGGED");
    },
  },
  {
    version: 9,
    description: "wallet sign-in: spent sign-in nonces and signed-out sessions, shared by every instance",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // Nonces of sign-in messages (POST /core/v1/auth/siwe), until the message expires (unix seconds):
      // a sign-in message is accepted once across every instance (relayer/db/siweNonces.ts).
      await run(
        db.schema
          .createTable("siwe_nonces")
          .addColumn("owner", "text", (c) => c.notNull())
          .addColumn("nonce", "text", (c) => c.notNull())
          .addColumn("expires_s", big, (c) => c.notNull())
          .addPrimaryKeyConstraint("siwe_nonces_pk", ["owner", "nonce"]),
      );
      await run(db.schema.createIndex("siwe_nonces_expiry").on("siwe_nonces").column("expires_s"));
      // Signed-out sessions by session key, until the session would have expired (unix seconds).
      // revoked_ms (the database's clock on PostgreSQL) is what other instances re-read since
      // (relayer/db/siweRevocations.ts). Logged, unlike signed_nonces: a sign-out must survive a
      // crash of the database, and sign-outs are rare.
      await run(
        db.schema
          .createTable("siwe_revocations")
          .addColumn("session_key", "text", (c) => c.primaryKey())
          .addColumn("expires_s", big, (c) => c.notNull())
          .addColumn("revoked_ms", big, (c) => c.notNull()),
      );
      await run(db.schema.createIndex("siwe_revocations_expiry").on("siwe_revocations").column("expires_s"));
      await run(
        db.schema.createIndex("siwe_revocations_changed").on("siwe_revocations").column("revoked_ms"),
      );
    },
  },
  {
    version: 10,
    description: "idempotency claims: their holder, its heartbeat, and the forward requests it signed",
    async up({ kind, db, run }) {
      // Exactly once across a crash (relayer/idempotency.ts): a claim names the attempt holding it and
      // when it last proved alive, so another instance takes over a dead one's claim within a lease
      // instead of waiting five minutes; `writes` holds every signed forward request the attempt
      // recorded before broadcasting it, so the take-over reconciles with the chain instead of writing
      // again.
      await run(
        db.schema.alterTable("idempotency").addColumn("owner", "text", (c) => c.notNull().defaultTo("")),
      );
      await run(
        db.schema
          .alterTable("idempotency")
          .addColumn("heartbeat_ms", ms(kind), (c) => c.notNull().defaultTo(0)),
      );
      await run(
        db.schema.alterTable("idempotency").addColumn("writes", "text", (c) => c.notNull().defaultTo("")),
      );
    },
  },
  {
    version: 11,
    description:
      "billing reservations: the worst case of every execution in flight, held against caps and balance",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // One row per admitted run (relayer/billing/reservations.ts): its worst-case price, held against
      // the account's balance and the key's cap from admission until its charge replaces it (in the
      // same transaction), or until `expires_ms` if its instance died. Logged: a reservation must
      // survive a crash of the database like the charges it stands for.
      await run(
        db.schema
          .createTable("billing_reservations")
          .addColumn("reservation_id", "text", (c) => c.primaryKey())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("key_address", "text", (c) => c.notNull())
          .addColumn("cents", big, (c) => c.notNull().check(sql`cents >= 0`))
          .addColumn("expires_ms", big, (c) => c.notNull())
          .addColumn("created_ms", big, (c) => c.notNull()),
      );
      await run(
        db.schema
          .createIndex("billing_reservations_by_account")
          .on("billing_reservations")
          .columns(["account_id", "expires_ms"]),
      );
    },
  },
  {
    version: 12,
    description: "account profiles: the off-chain description and e-mail of each account",
    async up({ kind, db, run }) {
      // Personal data stays off chain (POST /core/v1/new_account). Until this version the embedded
      // default kept it in an unversioned relayer.sqlite of each instance; that file is imported on the
      // first start after the upgrade (relayer/db/legacyFiles.ts), and on PostgreSQL the profile is now
      // shared, so GET /core/v1/account answers the same description through every instance.
      await run(
        db.schema
          .createTable("account_profile")
          .addColumn("account_id", "text", (c) => c.primaryKey())
          .addColumn("description", "text", (c) => c.notNull())
          .addColumn("email", "text")
          .addColumn("created_ms", ms(kind), (c) => c.notNull()),
      );
    },
  },
  {
    version: 13,
    description: "pinned code: the bytes of every pinned CID, so every instance serves every pin",
    async up({ kind, db, run }) {
      // One row per CID whoever pinned it (content-addressed, like the per-instance content store it
      // backs; relayer/pinnedCode.ts). Who pinned it and what it counts against is in `pins`. The bytes
      // are exactly what the CID hashes, so a reader can verify them.
      await run(
        db.schema
          .createTable("pinned_code")
          .addColumn("cid", "text", (c) => c.primaryKey())
          .addColumn("code", kind === "postgres" ? "bytea" : "blob", (c) => c.notNull())
          .addColumn("created_ms", ms(kind), (c) => c.notNull()),
      );
    },
  },
  {
    version: 14,
    description:
      "audit log: entries awaiting their chain, the per-account hash chains, heads, signed checkpoints",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // The audit log (relayer/audit/, docs/audit-log.md). A request writes its entry here before it
      // answers, unchained (no lock, no read of the chain's head); one writer per account at a time
      // moves them into the account's chain behind the answers (`audit_heads` row lock).
      await run(
        db.schema
          .createTable("audit_pending")
          .addColumn("id", kind === "postgres" ? "bigserial" : "integer", (c) =>
            kind === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement(),
          )
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("time_ms", big, (c) => c.notNull())
          .addColumn("data", "text", (c) => c.notNull())
          .addColumn("principal", "text")
          .addColumn("cid", "text")
          .addColumn("pkps", "text", (c) => c.notNull())
          .addColumn("outcome", "text", (c) => c.notNull()),
      );
      await run(
        db.schema.createIndex("audit_pending_by_account").on("audit_pending").columns(["account_id", "id"]),
      );
      await run(
        db.schema
          .createTable("audit_entries")
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("seq", big, (c) => c.notNull())
          .addColumn("prev_hash", "text", (c) => c.notNull())
          .addColumn("hash", "text", (c) => c.notNull())
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("time_ms", big, (c) => c.notNull())
          .addColumn("data", "text", (c) => c.notNull())
          .addColumn("principal", "text")
          .addColumn("cid", "text")
          .addColumn("pkps", "text", (c) => c.notNull())
          .addColumn("outcome", "text", (c) => c.notNull())
          .addPrimaryKeyConstraint("audit_entries_pk", ["account_id", "seq"]),
      );
      await run(
        db.schema.createIndex("audit_entries_by_time").on("audit_entries").columns(["account_id", "time_ms"]),
      );
      await run(
        db.schema
          .createTable("audit_heads")
          .addColumn("account_id", "text", (c) => c.primaryKey())
          .addColumn("seq", big, (c) => c.notNull())
          .addColumn("hash", "text", (c) => c.notNull())
          .addColumn("checkpoint_seq", big, (c) => c.notNull())
          .addColumn("checkpoint_ms", big, (c) => c.notNull()),
      );
      await run(
        db.schema
          .createTable("audit_checkpoints")
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("seq", big, (c) => c.notNull())
          .addColumn("head_hash", "text", (c) => c.notNull())
          .addColumn("time_ms", big, (c) => c.notNull())
          .addColumn("signer", "text", (c) => c.notNull())
          .addColumn("signature", "text", (c) => c.notNull())
          .addPrimaryKeyConstraint("audit_checkpoints_pk", ["account_id", "seq"]),
      );
      // How far the registry's logs were read for path-B writes (relayer/audit/chainWrites.ts), per
      // chain and registry, shared by every instance.
      await run(
        db.schema
          .createTable("audit_chain_cursor")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("block", big, (c) => c.notNull()),
      );
    },
  },
  {
    version: 15,
    description: "policy windows: the uses of each signing-policy window, shared by every instance",
    async up({ kind, db, run }) {
      // One row per window counter (PKP, group, rule, chain, token; relayer/policyWindows.ts): the uses
      // still inside its period, as a JSON array of [reservation id, taken at ms, amount as a decimal
      // string]. One row, so taking a use is one conditional upsert under that row's lock on
      // PostgreSQL. Logged (not UNLOGGED like the rate buckets): a window must survive a crash.
      await run(
        db.schema
          .createTable("policy_windows")
          .addColumn("window_key", "text", (c) => c.primaryKey())
          .addColumn("uses", kind === "postgres" ? "jsonb" : "text", (c) => c.notNull())
          .addColumn("updated_ms", ms(kind), (c) => c.notNull()),
      );
    },
  },
  {
    version: 16,
    description: "triggers and their runs: what fires an action, and one row per firing",
    async up({ kind, db, run }) {
      const big = ms(kind);
      // One row per trigger (relayer/triggers/, docs/triggers.md). Specs that only one kind has are
      // JSON text; the webhook's HMAC secret is sealed by the enclave like webhook endpoint secrets.
      // `paused` is set when a run found the account's balance empty, cleared by a top-up.
      await run(
        db.schema
          .createTable("triggers")
          .addColumn("trigger_id", "text", (c) => c.primaryKey())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("enabled", "integer", (c) => c.notNull())
          .addColumn("paused", "text")
          .addColumn("cid", "text", (c) => c.notNull())
          .addColumn("pkp_ids", "text", (c) => c.notNull())
          .addColumn("js_params", "text", (c) => c.notNull())
          .addColumn("run_as", "text", (c) => c.notNull())
          .addColumn("schedule", "text")
          .addColumn("hook_id", "text", (c) => c.unique())
          .addColumn("hmac", "text")
          .addColumn("hmac_secret_sealed", "text")
          .addColumn("chain_event", "text")
          .addColumn("runs_per_minute", "integer", (c) => c.notNull())
          .addColumn("max_queued_runs", "integer", (c) => c.notNull())
          .addColumn("concurrency", "text", (c) => c.notNull())
          .addColumn("max_attempts", "integer", (c) => c.notNull())
          .addColumn("backoff_ms", big, (c) => c.notNull())
          // A schedule's last fired minute (ms): what "missed" firings after downtime are counted from.
          .addColumn("last_fired_ms", big)
          .addColumn("created_ms", big, (c) => c.notNull())
          .addColumn("updated_ms", big, (c) => c.notNull()),
      );
      await run(
        db.schema.createIndex("triggers_by_account").on("triggers").columns(["account_id", "created_ms"]),
      );
      // One row per firing: the UNIQUE pair is what stores a firing once, whichever instance (or
      // source) hands it over. A run is claimed under a lease (lease_owner, lease_expires_ms).
      await run(
        db.schema
          .createTable("trigger_runs")
          .addColumn("run_id", "text", (c) => c.primaryKey())
          .addColumn("trigger_id", "text", (c) => c.notNull())
          .addColumn("account_id", "text", (c) => c.notNull())
          .addColumn("firing_id", "text", (c) => c.notNull())
          .addColumn("status", "text", (c) => c.notNull())
          .addColumn("skip_reason", "text")
          .addColumn("attempt", "integer", (c) => c.notNull())
          .addColumn("next_attempt_ms", big, (c) => c.notNull())
          .addColumn("lease_owner", "text")
          .addColumn("lease_expires_ms", big)
          .addColumn("input", "text", (c) => c.notNull())
          .addColumn("input_summary", "text", (c) => c.notNull())
          .addColumn("response", "text")
          .addColumn("error_code", "text")
          .addColumn("error_message", "text")
          .addColumn("logs", "text")
          .addColumn("charged_cents", big, (c) => c.notNull())
          .addColumn("fired_ms", big, (c) => c.notNull())
          .addColumn("created_ms", big, (c) => c.notNull())
          .addColumn("started_ms", big)
          .addColumn("finished_ms", big)
          .addColumn("instance", "text")
          .addUniqueConstraint("trigger_runs_firing", ["trigger_id", "firing_id"]),
      );
      await run(
        db.schema
          .createIndex("trigger_runs_by_trigger")
          .on("trigger_runs")
          .columns(["trigger_id", "created_ms"]),
      );
      await run(
        db.schema.createIndex("trigger_runs_due").on("trigger_runs").columns(["status", "next_attempt_ms"]),
      );
    },
  },
  {
    version: 17,
    description: "chain-event triggers: how far each trigger's logs were read, shared by every instance",
    async up({ kind, db, run }) {
      // One row per chain-event trigger (relayer/triggers/chainEvents/cursors.ts): the last block read
      // for it, that block's hash (re-checked on every poll: a mismatch means a reorganisation deeper
      // than the confirmation depth, and the watcher rewinds), and the key of the spec it was read for
      // (an edited trigger starts over at its new from_block). Deliberately no foreign key: the trigger
      // table belongs to the trigger service, and a dangling row is only forgotten bookkeeping.
      await run(
        db.schema
          .createTable("trigger_chain_cursors")
          .addColumn("trigger_id", "text", (c) => c.primaryKey())
          .addColumn("chain_id", ms(kind), (c) => c.notNull())
          .addColumn("spec_key", "text", (c) => c.notNull())
          .addColumn("block", ms(kind), (c) => c.notNull())
          .addColumn("block_hash", "text")
          .addColumn("updated_ms", ms(kind), (c) => c.notNull()),
      );
      await run(
        db.schema
          .createIndex("trigger_chain_cursors_by_chain")
          .on("trigger_chain_cursors")
          .column("chain_id"),
      );
    },
  },
  {
    version: 19,
    description: "audit log: where a checkpoint was anchored on chain (optional, relayer/audit/anchor.ts)",
    async up({ kind, db, run }) {
      // Null until anchored. anchor_tx is first set to a claim ("claimed:<instance>") by the instance
      // that sends the anchor, so two instances never anchor the same checkpoint.
      for (const [name, type] of [
        ["anchor_chain_id", ms(kind)],
        ["anchor_contract", "text"],
        ["anchor_tx", "text"],
        ["anchor_block", ms(kind)],
      ] as const)
        await run(db.schema.alterTable("audit_checkpoints").addColumn(name, type));
    },
  },
  {
    version: 20,
    description:
      "PostgreSQL: a run's admission (reservation, execution lease) as functions, planned once per connection",
    async up({ kind, run }) {
      // SQLite runs the admission as prepared statements in one transaction already: nothing to do.
      if (kind !== "postgres") return;
      for (const statement of ADMISSION_FUNCTIONS) await run(statement);
    },
  },
  {
    version: 21,
    description:
      "PostgreSQL: concurrent requests' execution leases and rate-limit tokens admitted in batches",
    async up({ kind, run }) {
      if (kind !== "postgres") return;
      for (const statement of BATCH_FUNCTIONS) await run(statement);
    },
  },
  {
    version: 22,
    description:
      "PostgreSQL: concurrent runs' reservations (each with its execution lease) admitted in batches",
    async up({ kind, run }) {
      if (kind !== "postgres") return;
      for (const statement of RESERVE_BATCH_FUNCTIONS) await run(statement);
    },
  },
  {
    version: 23,
    description:
      "PostgreSQL: VACUUM never truncates audit_pending (a queue: its end is empty after every chaining)",
    async up({ kind, run }) {
      // Every request's entry is inserted at the table's end and deleted by the chainer within ~100 ms,
      // so each vacuum of the hot tables (every 2 s) found empty pages at the end and truncated them:
      // an exclusive lock the request path's INSERTs queue behind, a shared-invalidation message every
      // backend processes, and the pages extended again at once (docs/audit-log.md, "What it costs").
      if (kind !== "postgres") return;
      await run("ALTER TABLE audit_pending SET (vacuum_truncate = false)");
    },
  },
  {
    version: 24,
    description: "PostgreSQL: audit_pending keeps one index, (account_id, id), not also its primary key",
    async up({ kind, run }) {
      // Every query of the queue names the account (the chaining pass's read and its DELETE, the sweep's
      // DISTINCT), so (account_id, id) serves them all; the primary key's index on id alone was a second
      // index entry written, deleted and vacuumed for every entry of every request (docs/audit-log.md,
      // "What it costs"). The ids still come from their sequence, unique as before. SQLite's id is the
      // table's rowid, no index of its own: nothing to drop there.
      if (kind !== "postgres") return;
      await run("ALTER TABLE audit_pending DROP CONSTRAINT audit_pending_pkey");
    },
  },
  {
    version: 25,
    description: "PostgreSQL: a batch of reservations reads its accounts' standing and live leases once",
    async up({ kind, run }) {
      if (kind !== "postgres") return;
      for (const statement of RESERVE_BATCH_ONE_READ) await run(statement);
    },
  },
];

/**
 * Applies every migration newer than the database's version; returns the version reached. Safe to
 * call on every start, from any number of instances at once.
 */
export async function migrate(
  layer: DataLayer,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number> {
  if (isPostgresLayer(layer)) {
    return layer.session(async (s) => {
      await s.exec("SELECT pg_advisory_lock($1::bigint)", [MIGRATION_LOCK_KEY]);
      try {
        return await migrateLocked(layer, s, migrations);
      } finally {
        await s.exec("SELECT pg_advisory_unlock($1::bigint)", [MIGRATION_LOCK_KEY]);
      }
    });
  }
  return migrateLocked(layer, layer, migrations);
}

async function migrateLocked(layer: DataLayer, s: Sql, migrations: readonly Migration[]): Promise<number> {
  await s.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  // An older build opening a database migrated by a newer one would read and write a schema it does
  // not know (a rollback of the code must not silently corrupt balances): refuse instead.
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const found = await readVersion(s);
  if (found > known)
    throw new Error(
      `billing database is at schema version ${found}, newer than this code knows (${known}); run a newer build`,
    );
  const db = compilerFor(layer.kind);
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if ((await readVersion(s)) >= m.version) continue;
    const apply = async (tx: Sql) => {
      // Re-read inside the transaction: two processes opening one SQLite file at once must not
      // both apply the same migration.
      if ((await readVersion(tx)) >= m.version) return;
      await m.up({
        kind: layer.kind,
        db,
        run: async (st) => {
          if (typeof st === "string") await tx.exec(st);
          else {
            const c = st.compile();
            await tx.exec(c.sql, c.parameters);
          }
        },
      });
      await tx.exec("DELETE FROM schema_version");
      await tx.exec(
        layer.kind === "postgres"
          ? "INSERT INTO schema_version (version) VALUES ($1)"
          : "INSERT INTO schema_version (version) VALUES (?)",
        [m.version],
      );
    };
    if (isPostgresLayer(layer)) {
      // The session holding the advisory lock runs the transaction itself.
      await s.exec("BEGIN");
      try {
        await apply(s);
        await s.exec("COMMIT");
      } catch (e) {
        await s.exec("ROLLBACK");
        throw e;
      }
    } else {
      await layer.transaction(apply);
    }
  }
  return readVersion(s);
}

export async function readVersion(s: Sql): Promise<number> {
  const rows = (await s.exec("SELECT MAX(version) AS v FROM schema_version")) as Array<{ v: number | null }>;
  return Number(rows[0]?.v ?? 0);
}
