/**
 * The Activity page: the account's audit log, newest first, with the API's filters, "older" paging
 * through its cursor, every field of an entry in a detail view, and the verifiable export (download,
 * and a check in the browser: components/AuditExport.tsx). Loaded lazily, with the SDK's verifier, so
 * none of it weighs on the first page.
 */
import { useCallback, useEffect, useRef, useState } from "react";
import { describeError, type Session, type ShownError } from "../api";
import {
  auditPage,
  auditQuery,
  KIND_LABELS,
  NO_FILTER,
  outcomeOf,
  principalOf,
  rangeError,
  summaryOf,
  type AuditFilter,
  type AuditItem,
  type AuditKind,
  type AuditOutcome,
} from "../audit";
import { AuditErrorNote } from "../components/AuditErrorNote";
import { AuditExport } from "../components/AuditExport";
import { AuditEntryDetail } from "../components/AuditEntryDetail";
import { DataTable } from "../components/DataTable";
import { Field, short } from "../components/ui";
import "../activity.css";

const OUTCOME_BADGE: Record<AuditOutcome, string> = { ok: "succeeded", error: "failed", refused: "refused" };

interface Listing {
  items: AuditItem[];
  next: string | null;
  loading: boolean;
  error: ShownError | null;
}

export default function Activity({ session }: { session: Session }) {
  const { sigil } = session;
  const [draft, setDraft] = useState<AuditFilter>(NO_FILTER);
  const [applied, setApplied] = useState<AuditFilter>(NO_FILTER);
  const [list, setList] = useState<Listing>({ items: [], next: null, loading: true, error: null });
  const [selected, setSelected] = useState<AuditItem | null>(null);
  // An answer for an older filter (or after the page was left) is dropped: a slow one never wins.
  const generation = useRef(0);

  const load = useCallback(
    (filter: AuditFilter, cursor?: string) => {
      const mine = ++generation.current;
      setList((l) => ({ ...l, loading: true, error: null, ...(cursor ? {} : { items: [], next: null }) }));
      auditPage(sigil, auditQuery(filter), cursor).then(
        (page) => {
          if (mine !== generation.current) return;
          setList((l) => ({
            items: cursor ? [...l.items, ...page.items] : page.items,
            next: page.next_cursor,
            loading: false,
            error: null,
          }));
        },
        (e: unknown) => {
          if (mine !== generation.current) return;
          setList((l) => ({ ...l, loading: false, error: describeError(e) }));
        },
      );
    },
    [sigil],
  );

  useEffect(() => {
    load(applied);
    return () => {
      generation.current++;
    };
  }, [applied, load]);

  const badRange = rangeError(draft.from, draft.to);
  const filtered = Object.keys(auditQuery(applied)).length > 0;
  const set = (k: keyof AuditFilter) => (e: { target: { value: string } }) =>
    setDraft((d) => ({ ...d, [k]: e.target.value }));

  // The log is not this key's to read: the explanation alone, no filters or export that cannot work.
  if (list.error?.code === "owner_only") return <AuditErrorNote error={list.error} />;

  return (
    <>
      <p className="muted">
        Every run, write, refusal and billing event of the account, hash-chained and signed by the service's
        attested identity key. Download an export below to keep it and check it offline.
      </p>
      <form
        className="inline-form"
        aria-label="Filter the activity"
        onSubmit={(e) => {
          e.preventDefault();
          if (badRange) return;
          setSelected(null);
          setApplied({ ...draft });
        }}
      >
        <Field label="From" hint="Your local time">
          {(p) => <input {...p} type="datetime-local" value={draft.from} onChange={set("from")} />}
        </Field>
        <Field label="To" error={badRange} hint="Your local time, not included">
          {(p) => <input {...p} type="datetime-local" value={draft.to} onChange={set("to")} />}
        </Field>
        <Field label="Type">
          {(p) => (
            <select {...p} value={draft.type} onChange={set("type")}>
              <option value="">any</option>
              {(Object.keys(KIND_LABELS) as AuditKind[]).map((k) => (
                <option key={k} value={k}>
                  {KIND_LABELS[k]}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Outcome">
          {(p) => (
            <select {...p} value={draft.outcome} onChange={set("outcome")}>
              <option value="">any</option>
              <option value="ok">ok</option>
              <option value="error">error</option>
              <option value="refused">refused</option>
            </select>
          )}
        </Field>
        <Field label="Usage key" hint="Its address (0x…)">
          {(p) => <input {...p} value={draft.usage_key} spellCheck={false} onChange={set("usage_key")} />}
        </Field>
        <Field label="Action CID">
          {(p) => <input {...p} value={draft.cid} spellCheck={false} onChange={set("cid")} />}
        </Field>
        <Field label="PKP id">
          {(p) => <input {...p} value={draft.pkp} spellCheck={false} onChange={set("pkp")} />}
        </Field>
        <button type="submit" className="primary" disabled={!!badRange}>
          Apply filters
        </button>
        <button
          type="button"
          onClick={() => {
            setDraft(NO_FILTER);
            setSelected(null);
            setApplied(NO_FILTER);
          }}
        >
          Clear
        </button>
      </form>

      <DataTable
        // While the first page loads the list is not known yet (an earlier filter's rows are gone).
        rows={list.loading && list.items.length === 0 ? undefined : list.items}
        loading={list.loading}
        loadingWhat="activity"
        errorNote={<AuditErrorNote error={list.error} />}
        empty={
          list.error
            ? null
            : filtered
              ? "No entry matches these filters."
              : "No activity yet: runs, writes and refusals appear here as they happen."
        }
        caption="Activity, newest first"
        testId="activity-table"
        rowKey={(e) => e.seq}
        rowAttributes={(e) => ({ "data-seq": e.seq, "data-kind": e.kind })}
        columns={[
          { header: "Seq", cell: (e) => e.seq },
          {
            header: "Time",
            cell: (e) => <time dateTime={e.time}>{new Date(e.time_ms).toLocaleString()}</time>,
          },
          { header: "Type", cell: (e) => KIND_LABELS[e.kind] ?? e.kind },
          {
            header: "Outcome",
            cell: (e) => <span className={`badge badge-${OUTCOME_BADGE[outcomeOf(e)]}`}>{outcomeOf(e)}</span>,
          },
          { header: "Who", cell: (e) => shortAll(principalOf(e)) },
          { header: "What", cell: (e) => <code>{shortAll(summaryOf(e))}</code> },
          {
            header: "Details",
            srOnlyHeader: true,
            cell: (e) => (
              <button
                type="button"
                className="small"
                aria-label={`Details of entry ${e.seq}`}
                aria-pressed={selected?.seq === e.seq}
                onClick={() => setSelected(selected?.seq === e.seq ? null : e)}
              >
                Details
              </button>
            ),
          },
        ]}
        nextPage={{
          load: list.next ? () => load(applied, list.next ?? undefined) : undefined,
          loading: list.loading,
          label: "Older entries",
          loadingLabel: "Loading older entries…",
          endNote: <>The oldest entry {filtered ? "that matches " : ""}is shown.</>,
        }}
      />

      {selected ? <AuditEntryDetail entry={selected} onClose={() => setSelected(null)} /> : null}

      <AuditExport session={session} />
    </>
  );
}

/** Long hex words (addresses, CIDs are not hex and stay) shortened for the table; the detail has them whole. */
function shortAll(text: string): string {
  return text.replace(/0x[0-9a-fA-F]{24,}/g, (h) => short(h));
}
