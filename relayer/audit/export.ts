/**
 * The JSON Lines export (docs/audit-log.md, "Export"): a header line, the chain's entries in order, then
 * the signed checkpoints over them. A time range is widened to the checkpoints around it, so that what
 * is exported always verifies on its own: it starts right after a signed checkpoint (or at the genesis)
 * and ends on one (the export signs the head first if entries were chained since the last checkpoint).
 */
import { canonicalJson } from "../../enclave";
import { EXPORT_FORMAT } from "./format";
import type { AuditStore } from "./store";

export interface ExportRange {
  fromMs?: number;
  toMs?: number;
}

async function firstSeqAtOrAfter(store: AuditStore, account: string, ms: number): Promise<number | null> {
  const [row] = (await store.db.exec(
    store.db.kind === "postgres"
      ? "SELECT MIN(seq) AS s FROM audit_entries WHERE account_id = $1 AND time_ms >= $2"
      : "SELECT MIN(seq) AS s FROM audit_entries WHERE account_id = ? AND time_ms >= ?",
    [account, ms],
  )) as Array<{ s: number | null }>;
  return row?.s === null || row?.s === undefined ? null : Number(row.s);
}

async function lastSeqBefore(store: AuditStore, account: string, ms: number): Promise<number | null> {
  const [row] = (await store.db.exec(
    store.db.kind === "postgres"
      ? "SELECT MAX(seq) AS s FROM audit_entries WHERE account_id = $1 AND time_ms < $2"
      : "SELECT MAX(seq) AS s FROM audit_entries WHERE account_id = ? AND time_ms < ?",
    [account, ms],
  )) as Array<{ s: number | null }>;
  return row?.s === null || row?.s === undefined ? null : Number(row.s);
}

/** The export's lines, each a string ending in "\n". */
export async function* exportLines(
  store: AuditStore,
  account: string,
  identity: string,
  range: ExportRange = {},
  now = Date.now(),
): AsyncGenerator<string> {
  await store.checkpointNow(account);
  yield (
    canonicalJson({
      type: "header",
      format: EXPORT_FORMAT,
      account,
      identity,
      exported_at_ms: now,
    }) + "\n"
  );
  const first = await store.firstSeq(account);
  if (first === null) return;
  const checkpoints = await store.checkpoints(account);
  let start = first;
  if (range.fromMs !== undefined) {
    const s0 = await firstSeqAtOrAfter(store, account, range.fromMs);
    if (s0 === null) start = Number.MAX_SAFE_INTEGER;
    else {
      const before = checkpoints.filter((c) => c.seq < s0).map((c) => c.seq);
      start = Math.max(first, before.length ? Math.max(...before) + 1 : 1);
    }
  }
  let end = Number.MAX_SAFE_INTEGER;
  if (range.toMs !== undefined) {
    const s1 = (await lastSeqBefore(store, account, range.toMs)) ?? 0;
    const after = checkpoints.filter((c) => c.seq >= s1).map((c) => c.seq);
    end = after.length ? Math.min(...after) : Number.MAX_SAFE_INTEGER;
  }
  if (start <= end) {
    for await (const e of store.entries(account, start)) {
      if (e.seq > end) break;
      yield canonicalJson({ type: "entry", ...e }) + "\n";
    }
  }
  for (const c of checkpoints) {
    // Every checkpoint up to the range's end, even past the last entry found: if entries were cut from
    // the end of the chain, the verifier sees a signed head that the export cannot reach.
    if (c.seq < start - 1 || c.seq > end) continue;
    yield canonicalJson({ type: "checkpoint", ...c }) + "\n";
  }
}
