/**
 * The account's pinned actions (newest first): CID with a copy button, size and date; "Load" puts the
 * CID into the runner. A service without the list endpoint gets a note, not an error.
 */
import { useEffect, useRef } from "react";
import { listPinnedActions, type Session } from "../api";
import { CopyButton, Empty, ErrorNote, Loading, short } from "./ui";
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
      {list.loading && !list.data ? <Loading what="pinned actions" /> : null}
      <ErrorNote error={list.error} />
      {list.data && list.data.items.length === 0 ? <Empty>Nothing pinned yet.</Empty> : null}
      {list.data && list.data.items.length > 0 ? (
        <table data-testid="pinned-actions" className="reflow">
          <caption className="sr-only">Pinned actions, newest first</caption>
          <thead>
            <tr>
              <th scope="col">CID</th>
              <th scope="col">Size</th>
              <th scope="col">Pinned</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.data.items.map((a) => (
              <tr key={a.cid}>
                <td data-label="CID">
                  <code title={a.cid}>{short(a.cid, 12)}</code> <CopyButton value={a.cid} label="CID" />
                </td>
                <td data-label="Size">{size(a.bytes)}</td>
                <td data-label="Pinned">{new Date(a.pinned_at).toLocaleString()}</td>
                <td>
                  <button type="button" className="small" onClick={() => onRun(a.cid)}>
                    Load <span className="sr-only">into the runner: {a.cid}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
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
