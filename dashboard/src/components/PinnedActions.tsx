/**
 * The account's pinned actions (newest first): CID with a copy button, size and date; "Load" puts the
 * CID into the runner. A service without the list endpoint gets a note, not an error.
 */
import { useEffect, useRef } from "react";
import { listPinnedActions, type Session } from "../api";
import { DataTable } from "./DataTable";
import { CopyButton, ErrorNote, short } from "./ui";
import { useLoad } from "../useLoad";

const size = (bytes: number) =>
  bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(bytes < 10 * 1024 ? 1 : 0)} KB`;

export function PinnedActions({
  session,
  reloadKey,
  onRun,
}: {
  session: Session;
  /** Changes when the page pinned something, so the list shows it. */
  reloadKey: string | null;
  onRun: (cid: string) => void;
}) {
  const list = useLoad(() => listPinnedActions(session.sigil));
  const { reload } = list;
  // A pin made on this page: load the list again (the first load already ran on mount).
  useReloadOn(reloadKey, reload);
  return (
    <section className="card" aria-labelledby="pinned-title">
      <h2 id="pinned-title">Pinned actions</h2>
      <DataTable
        rows={list.data?.items}
        loading={list.loading}
        loadingWhat="pinned actions"
        errorNote={<ErrorNote error={list.error} />}
        empty="Nothing pinned yet."
        caption="Pinned actions, newest first"
        testId="pinned-actions"
        rowKey={(a) => a.cid}
        columns={[
          {
            header: "CID",
            cell: (a) => (
              <>
                <code title={a.cid}>{short(a.cid, 12)}</code> <CopyButton value={a.cid} label="CID" />
              </>
            ),
          },
          { header: "Size", cell: (a) => size(a.bytes) },
          { header: "Pinned", cell: (a) => new Date(a.pinned_at).toLocaleString() },
          {
            header: "Actions",
            srOnlyHeader: true,
            unlabelled: true,
            cell: (a) => (
              <button type="button" className="small" onClick={() => onRun(a.cid)}>
                Load <span className="sr-only">into the runner: {a.cid}</span>
              </button>
            ),
          },
        ]}
      />
    </section>
  );
}

function useReloadOn(key: string | null, reload: () => void) {
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    reload();
  }, [key, reload]);
}
