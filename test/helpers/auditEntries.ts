/** Audit-log entries for tests of the log's store and chain (test/audit/*). */
import type { PendingEntry } from "../../relayer/audit/entries";

/** The i-th refusal entry of `account`: a usage key refused a scope, at a time that orders by i. */
export function refusalEntry(i: number, account: string): PendingEntry {
  return {
    account,
    kind: "refusal",
    timeMs: 1_700_000_000_000 + i,
    data: {
      request_id: `r${i}`,
      method: "POST",
      route: "/core/v1/groups",
      key_hash_prefix: "0x12345678",
      principal: { kind: "usage_key", address: "0x" + "ab".repeat(20) },
      code: "scope_denied",
      suppressed: 0,
    },
    principal: "0x" + "ab".repeat(20),
    cid: null,
    pkps: [],
    outcome: "refused",
  };
}
