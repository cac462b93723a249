/**
 * A trigger's run history, newest first: a status filter, pages of 20, and each run's firing id, times,
 * status (with the skip reason or the error code), cost, and its logs and response behind a
 * disclosure. While a run on the page is queued or running the page asks again every two seconds, so a
 * "fire now" is followed to its end without a click.
 */
import { useEffect, useRef, useState } from "react";
import type { Sigil, TriggerRun, TriggerRunStatus } from "../../../sdk";
import { ErrorNote, Empty, Loading } from "./ui";
import { useLoad } from "../useLoad";
import { utcSeconds } from "../triggerForm";

const PAGE_SIZE = 20;
const STATUSES: TriggerRunStatus[] = ["queued", "running", "succeeded", "failed", "skipped"];
const BADGE: Record<TriggerRunStatus, string> = {
  queued: "badge badge-running",
  running: "badge badge-running",
  succeeded: "badge badge-succeeded",
  failed: "badge badge-failed",
  skipped: "badge badge-refused",
};

/** One page of a trigger's runs, newest first (the SDK's `runs` iterates them all). */
export function runsPage(
  sigil: Sigil,
  id: string,
  page: number,
  status: TriggerRunStatus | "",
  pageSize = PAGE_SIZE,
): Promise<{ items: TriggerRun[]; total: number }> {
  return sigil.get("/core/v1/triggers/{id}/runs", {
    params: {
      path: { id },
      query: { page_number: page, page_size: pageSize, ...(status ? { status } : {}) },
    },
  });
}

export function TriggerRuns({
  sigil,
  triggerId,
  reloadKey,
}: {
  sigil: Sigil;
  triggerId: string;
  reloadKey: number;
}) {
  const [status, setStatus] = useState<TriggerRunStatus | "">("");
  const [page, setPage] = useState(0);
  const runs = useLoad(() => runsPage(sigil, triggerId, page, status));
  const { reload } = runs;
  // useLoad read the first page on mount; a new filter, page or firing reads again.
  const mounted = useRef(false);
  useEffect(() => {
    if (mounted.current) reload();
    mounted.current = true;
  }, [reload, status, page, reloadKey]);
  const unfinished = runs.data?.items.some((r) => r.status === "queued" || r.status === "running") ?? false;
  useEffect(() => {
    if (!unfinished) return;
    const t = setTimeout(reload, 2000);
    return () => clearTimeout(t);
  }, [unfinished, runs.data, reload]);

  const total = runs.data?.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  return (
    <section className="card" aria-labelledby="runs-title">
      <h2 id="runs-title">Run history</h2>
      <div className="row wrap">
        <label htmlFor="runs-status">Status</label>
        <select
          id="runs-status"
          value={status}
          onChange={(e) => {
            setStatus(e.target.value as TriggerRunStatus | "");
            setPage(0);
          }}
        >
          <option value="">any</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
        <button type="button" className="small" onClick={reload}>
          Refresh
        </button>
      </div>
      {runs.loading && !runs.data ? <Loading what="runs" /> : null}
      <ErrorNote error={runs.error} />
      {runs.data && runs.data.items.length === 0 ? (
        <Empty>{status ? `No ${status} runs.` : "No runs yet."}</Empty>
      ) : null}
      {runs.data && runs.data.items.length > 0 ? (
        <table className="reflow" data-testid="trigger-runs">
          <caption className="sr-only">Runs, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Firing</th>
              <th scope="col">Times (UTC)</th>
              <th scope="col">Status</th>
              <th scope="col">Cost</th>
              <th scope="col">Details</th>
            </tr>
          </thead>
          <tbody>
            {runs.data.items.map((r) => (
              <tr key={r.id} data-run-id={r.id} data-status={r.status}>
                <td data-label="Firing">
                  <code>{r.firing_id}</code>
                  <br />
                  <small className="muted">
                    {r.input_summary} · attempt {r.attempt}
                  </small>
                </td>
                <td data-label="Times (UTC)">
                  <Times run={r} />
                </td>
                <td data-label="Status">
                  <span className={BADGE[r.status]}>{r.status}</span>
                  {r.skip_reason ? (
                    <>
                      {" "}
                      <code>{r.skip_reason}</code>
                    </>
                  ) : null}
                  {r.error ? (
                    <div>
                      {/* A skipped run's error repeats its skip reason: the code is shown once. */}
                      {r.error.code !== r.skip_reason ? <code>{r.error.code}</code> : null}{" "}
                      {r.error.message ?? ""}
                    </div>
                  ) : null}
                </td>
                <td data-label="Cost">{`${r.charged_cents} ¢`}</td>
                <td data-label="Details">
                  {r.logs || r.response !== null ? (
                    <details>
                      <summary>Logs and response</summary>
                      <h3 className="small-heading">Logs</h3>
                      <pre className="code">{r.logs || "(none)"}</pre>
                      <h3 className="small-heading">Response</h3>
                      <pre className="code">{JSON.stringify(r.response ?? null, null, 2)}</pre>
                    </details>
                  ) : (
                    <span className="muted">none</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {total > PAGE_SIZE ? (
        <div className="row">
          <button type="button" className="small" disabled={page === 0} onClick={() => setPage(page - 1)}>
            Newer runs
          </button>
          <span>
            Page {page + 1} of {pages}
          </span>
          <button
            type="button"
            className="small"
            disabled={page + 1 >= pages}
            onClick={() => setPage(page + 1)}
          >
            Older runs
          </button>
        </div>
      ) : null}
    </section>
  );
}

function Times({ run }: { run: TriggerRun }) {
  const t = (label: string, v: string | null | undefined) =>
    v ? (
      <div>
        <span className="muted">{label}</span> {utcSeconds(v)}
      </div>
    ) : null;
  return (
    <>
      {t("fired", run.fired_at)}
      {t("started", run.started_at)}
      {t("finished", run.finished_at)}
      {run.next_attempt_at && run.status === "queued" ? t("next attempt", run.next_attempt_at) : null}
    </>
  );
}
