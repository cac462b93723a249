/**
 * A trigger's run history, newest first: a status filter, pages of 20, and each run's firing id, times,
 * status (with the skip reason or the error code), cost, and its logs and response behind a
 * disclosure. While a run on the page is queued or running the page asks again every two seconds, so a
 * "fire now" is followed to its end without a click.
 */
import { useEffect, useRef, useState } from "react";
import type { Sigil, TriggerRun, TriggerRunStatus } from "../../../sdk";
import { DataTable } from "./DataTable";
import { ErrorNote } from "./ui";
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
      <DataTable
        rows={runs.data?.items}
        loading={runs.loading}
        loadingWhat="runs"
        errorNote={<ErrorNote error={runs.error} />}
        empty={status ? `No ${status} runs.` : "No runs yet."}
        caption="Runs, newest first"
        testId="trigger-runs"
        rowKey={(r) => r.id}
        rowAttributes={(r) => ({ "data-run-id": r.id, "data-status": r.status })}
        columns={[
          {
            header: "Firing",
            cell: (r) => (
              <>
                <code>{r.firing_id}</code>
                <br />
                <small className="muted">
                  {r.input_summary} · attempt {r.attempt}
                </small>
              </>
            ),
          },
          { header: "Times (UTC)", cell: (r) => <Times run={r} /> },
          { header: "Status", cell: (r) => <RunStatus run={r} /> },
          { header: "Cost", cell: (r) => `${r.charged_cents} ¢` },
          { header: "Details", cell: (r) => <RunDetails run={r} /> },
        ]}
      />
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

/** A run's status badge, with the skip reason or the error that explains it. */
function RunStatus({ run: r }: { run: TriggerRun }) {
  return (
    <>
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
          {r.error.code !== r.skip_reason ? <code>{r.error.code}</code> : null} {r.error.message ?? ""}
        </div>
      ) : null}
    </>
  );
}

/** A run's logs and response behind a disclosure, or "none". */
function RunDetails({ run: r }: { run: TriggerRun }) {
  if (!r.logs && r.response === null) return <span className="muted">none</span>;
  return (
    <details>
      <summary>Logs and response</summary>
      <h3 className="small-heading">Logs</h3>
      <pre className="code">{r.logs || "(none)"}</pre>
      <h3 className="small-heading">Response</h3>
      <pre className="code">{JSON.stringify(r.response ?? null, null, 2)}</pre>
    </details>
  );
}
