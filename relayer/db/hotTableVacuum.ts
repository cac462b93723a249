/**
 * PostgreSQL only: the tables that every request inserts into and deletes from (or updates) are vacuumed
 * every few seconds by each instance, instead of waiting for autovacuum.
 *
 * Why. An execution's lease is a row inserted at admission and deleted when the run ends; a run's
 * reservation, a rate bucket's tokens, an audit entry's pending row are the same kind of churn. Every
 * deleted or updated row stays in the table and its indexes as a dead version until a vacuum, and each
 * admission's scans (the account's expired leases, its live leases counted) walk them all. Autovacuum
 * visits a database once a minute by default (`autovacuum_naptime`), so at a few hundred executions a
 * second a table of a few dozen live rows carries tens of thousands of dead ones, and the service slows
 * down as it runs. Measured (docs/performance.md, "Dead rows in the hot tables"): 12,000
 * one-signature executions at 50 clients, the server's CPU per execution 1.00 ms without these vacuums and
 * 0.64 ms with them; the two lease scans 0.42 ms → 0.04 ms per execution.
 *
 * A vacuum of such a table is cheap (it holds a few dozen live rows) and takes no lock that blocks reads
 * or writes. Several instances: `SKIP_LOCKED` skips a table another instance's vacuum is working on.
 */
import type { Logger } from "pino";
import type { DataLayer } from "./engine";

/** The tables written and emptied on every request's path. */
export const HOT_TABLES = [
  "execution_leases",
  "rate_buckets",
  "billing_reservations",
  "audit_pending",
  "policy_windows",
] as const;

/** Default period between two vacuums of the hot tables by one instance. */
export const DEFAULT_HOT_VACUUM_MS = 2_000;

/**
 * Starts the periodic vacuum on PostgreSQL (nothing on SQLite, whose deleted rows leave no versions
 * behind); returns its stop. `everyMs` 0 turns it off. A failed vacuum is logged and tried again next
 * period; a vacuum still running when the period ends is not overlapped by another.
 */
export function startHotTableVacuum(db: DataLayer, everyMs: number, logger: Logger): () => Promise<void> {
  if (db.kind !== "postgres" || everyMs <= 0) return async () => undefined;
  const statement = `VACUUM (SKIP_LOCKED) ${HOT_TABLES.join(", ")}`;
  let running: Promise<void> | null = null;
  let warned = false;
  const timer = setInterval(() => {
    if (running) return;
    running = db
      .exec(statement)
      .then(() => {
        warned = false;
      })
      .catch((err: unknown) => {
        // Once per run of failures: a database that refuses (permissions, shutting down) says so once.
        if (!warned) logger.warn({ err: (err as Error).message }, "vacuum of the hot tables failed; retried");
        warned = true;
      })
      .finally(() => {
        running = null;
      });
  }, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
