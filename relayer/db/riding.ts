/**
 * An admission that rides in another admission's round trip on PostgreSQL: its statements are
 * appended to the host's simple-protocol script, so both run in one implicit transaction and one
 * round trip (an execution's reservation carries its lease: relayer/execution/admission.ts).
 *
 * The two stay all-or-nothing together: the rider's statements take effect only where the host
 * admitted (`hostAdmitted`, an SQL condition the host hands in), and the host undoes its own
 * admission, in the same transaction, where the rider's `admitted` condition is false. Each side
 * reads only its own results and throws only its own refusal, so the errors are those of two separate
 * admissions made one after the other.
 */
import type { DataLayer } from "./engine";

export interface RidingAdmission {
  /** The database its statements belong to: it rides only in a script run there (sameDatabase). */
  readonly db: DataLayer;
  /**
   * Its statements, in effect only where `hostAdmitted` holds (evaluated after the host's own
   * statements). Called at most once; from then on this instance's state assumes they will run.
   */
  statements(hostAdmitted: string): string[];
  /** An SQL condition, true after its statements exactly when it admitted. */
  readonly admitted: string;
  /**
   * The script committed: its statements' rows, in order, and whether the host had admitted. Returns
   * whether it admitted too (always false when the host did not).
   */
  ran(results: unknown[][], hostAdmitted: boolean): boolean;
  /** The refusal to throw when the host admitted and this did not (after `ran` answered false). */
  refusal(): Error;
  /** The script failed: puts back what `statements` took from this instance's state. */
  abandon(): void;
}
