/**
 * An admission that rides in another admission's round trip on PostgreSQL: its function call
 * (migration 20) joins the host's statement as a LATERAL item, so both run in one statement, one
 * implicit transaction and one round trip (an execution's reservation carries its lease:
 * relayer/execution/admission.ts). The statement's text depends only on whether a rider is present,
 * so it is a named prepared statement: parsed and planned once per pooled connection.
 *
 * The two stay all-or-nothing together: the rider's call takes effect only where the host admitted
 * (`hostAdmitted`, an SQL condition over the host's row that the host hands in), and the host undoes
 * its own admission, in the same statement, where the rider's `admitted` condition is false. Each side
 * reads only its own columns and throws only its own refusal, so the errors are those of two separate
 * admissions made one after the other.
 */
import type { DataLayer } from "./engine";

export interface RidingAdmission {
  /** The database its call belongs to: it rides only in a statement run there (sameDatabase). */
  readonly db: DataLayer;
  /**
   * Its FROM item (`fn(…) AS alias(columns…)`, joined LATERAL after the host's), in effect only where
   * `hostAdmitted` holds, and the values of its parameters, numbered from `$firstParam`. Called at
   * most once; from then on this instance's state assumes the call will run.
   */
  call(hostAdmitted: string, firstParam: number): { from: string; params: unknown[] };
  /** An SQL condition over its FROM item's columns, true exactly when it admitted. */
  readonly admitted: string;
  /**
   * The statement committed: its row (the host's columns and the rider's, whose names do not clash)
   * and whether the host had admitted. Returns whether it admitted too (always false when the host
   * did not).
   */
  ran(row: Record<string, unknown>, hostAdmitted: boolean): boolean;
  /** The refusal to throw when the host admitted and this did not (after `ran` answered false). */
  refusal(): Error;
  /**
   * An execution lease can also ride in a batch of reservations (`sigil_reserve_batch`, migration 22),
   * which calls `sigil_lease` itself for each item: these are that call's arguments. Called at most
   * once, instead of `call` (the same state is taken). The batch answers the lease's columns under the
   * names `call`'s FROM item has, so `ran`, `refusal` and `abandon` work unchanged.
   */
  batchLease?(): BatchedLease;
  /** The statement failed: puts back what `call` took from this instance's state. */
  abandon(): void;
}

/** A lease's arguments for `sigil_lease` inside `sigil_reserve_batch` (the releases are carried once per batch). */
export interface BatchedLease {
  readonly accountId: string;
  readonly leaseId: string;
  readonly cap: number;
  readonly leaseMs: number;
  /** This instance's released leases whose DELETE rides with this admission. */
  readonly releases: readonly string[];
}
