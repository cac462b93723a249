/**
 * The account's audit log as the Activity page reads it: one page of `GET /core/v1/audit` at a time
 * (the page pages with the cursor itself, "older" on demand, where the SDK's `auditEntries` follows
 * every cursor), the page's filter form turned into the API's query, and a browser download of an
 * export. The service decides who may read the log; this file only asks.
 */
import type { Sigil } from "../../sdk";

export type AuditKind = "execution" | "write" | "chain_write" | "refusal" | "billing";
export type AuditOutcome = "ok" | "error" | "refused";

/** An entry as `GET /core/v1/audit` answers it (the export's lines carry the same fields but `time`). */
export interface AuditItem {
  account: string;
  seq: number;
  prev_hash: string;
  hash: string;
  kind: AuditKind;
  time_ms: number;
  /** ISO 8601. */
  time: string;
  data: Record<string, unknown>;
}

export interface AuditPage {
  items: AuditItem[];
  next_cursor: string | null;
}

/** The filter form as typed: empty means "any". Times are `<input type="datetime-local">` values. */
export interface AuditFilter {
  from: string;
  to: string;
  type: AuditKind | "";
  usage_key: string;
  cid: string;
  pkp: string;
  outcome: AuditOutcome | "";
}

export const NO_FILTER: AuditFilter = {
  from: "",
  to: "",
  type: "",
  usage_key: "",
  cid: "",
  pkp: "",
  outcome: "",
};

export const KIND_LABELS: Record<AuditKind, string> = {
  execution: "Execution",
  write: "Write",
  chain_write: "Owner transaction",
  refusal: "Refusal",
  billing: "Billing",
};

/** A datetime-local value (the browser's time zone) as ISO 8601 in UTC; "" stays "". */
export function localToIso(value: string): string {
  if (!value) return "";
  const t = new Date(value);
  return Number.isNaN(t.getTime()) ? value : t.toISOString();
}

/** The filter form as the API's query: trimmed, empty fields left out, times in ISO 8601. */
export function auditQuery(f: AuditFilter): Record<string, string> {
  const q: Record<string, string> = {
    from: localToIso(f.from),
    to: localToIso(f.to),
    type: f.type,
    usage_key: f.usage_key.trim(),
    cid: f.cid.trim(),
    pkp: f.pkp.trim(),
    outcome: f.outcome,
  };
  return Object.fromEntries(Object.entries(q).filter(([, v]) => v !== ""));
}

/** A range the form can see is wrong before anything is sent (`from` must come before `to`). */
export function rangeError(from: string, to: string): string | null {
  if (from && to && new Date(from).getTime() >= new Date(to).getTime())
    return "The end of the range must come after its start.";
  return null;
}

type Untyped = (path: string, init?: { params?: unknown }) => Promise<unknown>;

/** One page of entries, newest first; `cursor` (a page's `next_cursor`) gives the next older page. */
export async function auditPage(
  sigil: Sigil,
  query: Record<string, string>,
  cursor?: string,
  limit = 50,
): Promise<AuditPage> {
  const get = sigil.get as unknown as Untyped;
  return (await get("/core/v1/audit", {
    params: { query: { ...query, limit, ...(cursor ? { cursor } : {}) } },
  })) as AuditPage;
}

/** What an entry did, in a few words, for the table (every field is in the detail view). */
export function outcomeOf(e: AuditItem): AuditOutcome {
  if (e.kind === "refusal" || e.kind === "billing") return "refused";
  return e.data.has_error === true ? "error" : "ok";
}

export function summaryOf(e: AuditItem): string {
  const d = e.data;
  const s = (v: unknown) =>
    typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v);
  switch (e.kind) {
    case "execution":
      return `${s(d.cid)}${d.has_error ? ` · ${s(d.error_code) || "error"}` : ""}`;
    case "write":
    case "chain_write":
      return s(d.operation);
    case "refusal":
      return `${s(d.method)} ${s(d.route)} · ${s(d.code)}`;
    case "billing":
      return s(d.event);
  }
}

/** Who acted, as the table shows it: `usage key 0x…`, `account key`, `owner wallet 0x…`. */
export function principalOf(e: AuditItem): string {
  const p = e.data.principal as { kind?: string; address?: string } | undefined;
  if (!p?.kind) return "";
  const label: Record<string, string> = {
    account_key: "account key",
    usage_key: "usage key",
    wallet_session: "owner wallet",
    chain_sender: "chain sender",
  };
  return p.kind === "account_key" ? label[p.kind] : `${label[p.kind] ?? p.kind} ${p.address ?? ""}`.trim();
}

/** Hands `text` to the browser as a file download (an object URL, revoked once clicked). */
export function downloadText(fileName: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = fileName;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}
