/**
 * Rows that ride on a statement this instance sends anyway (PostgreSQL): a batched admission statement
 * (`sigil_take_batch`, `sigil_lease_batch`, relayer/db/sharedLimits.ts) leaves an instance under load
 * every round trip, and rows waiting to be written (the audit log's entries, relayer/audit/store.ts)
 * board it as a data-modifying CTE: they commit in its transaction, with no round trip, statement or
 * commit of their own (docs/audit-log.md, "What it costs").
 *
 * The carrier must never fail for its passengers' sake, nor the passengers be lost or written twice for
 * the carrier's: when the statement fails with an error from the server (a SQLSTATE: the transaction
 * was rolled back, nothing of it applied), the passengers are handed back to their source, which
 * writes them another way, and the carrier runs again alone. When the outcome is unknown (the
 * connection broke before the answer), the passengers are failed, not retried: they may be committed.
 */
import { type DataLayer, sameDatabase } from "./engine";

export interface Boarding {
  /** One CTE (`name AS (INSERT …)`), its parameters numbered from the `firstParam` given to `board`. */
  cte: string;
  params: unknown[];
  /** The carrier committed: the passengers are written. */
  committed(): void;
  /** The carrier was rolled back (nothing of it applied): the passengers go another way. */
  notApplied(): void;
  /** The carrier's outcome is unknown: the passengers may or may not be written. */
  unknown(err: unknown): void;
}

export interface PassengerSource {
  /** The database its rows belong to: they ride only on a statement run there (sameDatabase). */
  readonly db: DataLayer;
  /** The rows waiting now, taken on board (null: none waiting). */
  board(firstParam: number): Boarding | null;
}

const sources = new Set<PassengerSource>();

/** Rows of `source` ride on carriers of its database from now on, until `stopCarrying`. */
export function carryPassengers(source: PassengerSource): void {
  sources.add(source);
}

export function stopCarrying(source: PassengerSource): void {
  sources.delete(source);
}

/** A server's error names its SQLSTATE: the statement's transaction was rolled back. */
const notApplied = (err: unknown) => /^[0-9A-Z]{5}$/.test(String((err as { code?: unknown }).code));

/**
 * Runs `text` (a prepared SELECT) on `db` with whatever passengers wait for that database, as one
 * statement. Its rows are the carrier's; with no passenger waiting it is `text` alone.
 */
export async function execCarrying(
  db: DataLayer,
  text: string,
  params: readonly unknown[],
): Promise<unknown[]> {
  let boarding: Boarding | null = null;
  for (const s of sources) {
    if (!sameDatabase(s.db, db)) continue;
    boarding = s.board(params.length + 1);
    if (boarding) break;
  }
  if (!boarding) return db.exec(text, params, { prepared: true });
  let rows: unknown[];
  try {
    rows = await db.exec(`WITH ${boarding.cte} ${text}`, [...params, ...boarding.params], { prepared: true });
  } catch (err) {
    if (!notApplied(err)) {
      boarding.unknown(err);
      throw err;
    }
    boarding.notApplied();
    // Perhaps the passengers' fault: the carrier's own work goes again, alone (nothing of it was applied).
    return db.exec(text, params, { prepared: true });
  }
  boarding.committed();
  return rows;
}
