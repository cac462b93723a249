/**
 * Write, pin and run actions; the account's pinned actions, any of which loads into the runner. The
 * CID is asked of the API as you type (debounced): the service's answer is the one that counts, and
 * computing it here would put an IPFS importer on the page.
 */
import { useEffect, useRef, useState } from "react";
import { collect, describeError, listPinnedActions, type Session, type ShownError } from "../api";
import { CodeEditor } from "../components/CodeEditor";
import { PinnedActions } from "../components/PinnedActions";
import { CopyButton, ErrorNote, Field, short } from "../components/ui";
import { startRun, useRecentRuns, type RunRecord } from "../recentRuns";
import { useToast } from "../components/Toasts";
import { useAction, useLoad } from "../useLoad";
import { isCid, parseJson } from "../validate";

const STARTER = `async function main({ pkpId, message }) {
  const signature = await Actions.signMessage({ pkpId, message });
  return { message, signature, address: await Actions.getAddress({ pkpId }) };
}
`;

export default function Actions({ session }: { session: Session }) {
  const { sigil } = session;
  const [code, setCode] = useState(STARTER);
  const [cid, setCid] = useState<string | null>(null);
  const [cidError, setCidError] = useState<ShownError | null>(null);
  const [pinned, setPinned] = useState<string | null>(null);
  // A CID chosen in the pinned list, for the runner (the counter makes choosing the same one again count).
  const [toRun, setToRun] = useState<{ cid: string; n: number } | null>(null);
  const pin = useAction();
  const toast = useToast();

  useEffect(() => {
    let current = true;
    setCid(null);
    if (!code.trim()) return;
    const t = setTimeout(() => {
      sigil.actionCid(code).then(
        (r) => current && (setCid(r.cid), setCidError(null)),
        (e: unknown) => current && setCidError(describeError(e)),
      );
    }, 300);
    return () => {
      current = false;
      clearTimeout(t);
    };
  }, [code, sigil]);

  return (
    <>
      <section className="card" aria-labelledby="editor-title">
        <h2 id="editor-title">Code</h2>
        <CodeEditor value={STARTER} onChange={setCode} label="Action code" />
        <p>
          CID: <code data-testid="live-cid">{code.trim() ? (cid ?? "computing…") : "(empty)"}</code>{" "}
          {cid ? <CopyButton value={cid} label="CID" /> : null}
        </p>
        <ErrorNote error={cidError} />
        {session.kind === "account" ? (
          <div className="row">
            <button
              type="button"
              className="primary"
              disabled={pin.pending || !code.trim()}
              onClick={() =>
                void pin
                  .run(() => sigil.pinAction(code))
                  .then((r) => {
                    if (!r) return;
                    setPinned(r.cid);
                    toast(`Action pinned (${short(r.cid, 8)}).`);
                  })
              }
            >
              {pin.pending ? "Pinning…" : "Pin action"}
            </button>
            {pinned ? (
              <span role="status">
                Pinned <code data-testid="pinned-cid">{pinned}</code>
              </span>
            ) : null}
          </div>
        ) : null}
        <ErrorNote error={pin.error} />
      </section>
      {session.kind === "account" ? (
        <PinnedActions
          session={session}
          reloadKey={pinned}
          onRun={(c) => setToRun((prev) => ({ cid: c, n: (prev?.n ?? 0) + 1 }))}
        />
      ) : null}
      <Runner session={session} editorCode={code} toRun={toRun} />
    </>
  );
}

/** The runner's default time limit: well below the service's (30 s), so a runaway loop costs a few cents. */
export const DEFAULT_TIME_LIMIT_S = 5;

function Runner({
  session,
  editorCode,
  toRun,
}: {
  session: Session;
  editorCode: string;
  toRun: { cid: string; n: number } | null;
}) {
  const { sigil } = session;
  const pkps = useLoad(() => collect(sigil.pkps()));
  const pinned = useLoad(() =>
    session.kind === "account" ? listPinnedActions(sigil, 0, 100).then((r) => r.items) : Promise.resolve([]),
  );
  const config = useLoad(() => sigil.config());
  const [source, setSource] = useState<"editor" | "cid">("editor");
  const [cidInput, setCidInput] = useState("");
  const [pkpId, setPkpId] = useState("");
  const [params, setParams] = useState('{ "message": "hello" }');
  const [limit, setLimit] = useState(String(DEFAULT_TIME_LIMIT_S));
  const [errors, setErrors] = useState<{ cid?: string; pkp?: string; params?: string; limit?: string }>({});
  const runs = useRecentRuns();
  const runnerSection = useRef<HTMLElement | null>(null);

  useEffect(() => {
    if (!toRun) return;
    setSource("cid");
    setCidInput(toRun.cid);
    setErrors({});
    // Where the user's eyes should go next: the runner, with the CID filled in.
    requestAnimationFrame(() => runnerSection.current?.scrollIntoView({ block: "start" }));
  }, [toRun]);

  const maxS = Math.floor(
    ((config.data as { limits?: { wall_time_ms?: number } } | undefined)?.limits?.wall_time_ms ?? 30_000) /
      1000,
  );
  const perSecond = (config.data?.prices as { execution_cents_per_second?: number } | null | undefined)
    ?.execution_cents_per_second;
  const limitS = Number(limit);
  const limitOk = Number.isFinite(limitS) && limitS > 0 && limitS <= maxS;
  const latest = runs[0];
  const running = latest?.status === "running";

  return (
    <section className="card" aria-labelledby="run-title" ref={runnerSection}>
      <h2 id="run-title">Run</h2>
      {session.kind === "account" ? (
        <p className="muted">
          With the account key you run any code with any PKP of the account, no group needed. A usage key runs
          what its groups list.
        </p>
      ) : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const next: typeof errors = {};
          if (source === "cid" && !isCid(cidInput.trim())) next.cid = "Not a CID (Qm… or b…).";
          if (!/^0x[0-9a-fA-F]{64}$/.test(pkpId)) next.pkp = "Choose a PKP.";
          if (!limitOk) next.limit = `A number of seconds from 0.1 to ${maxS} (this service's limit).`;
          const parsed = parseJson(params);
          if (!parsed.ok) next.params = parsed.error;
          else if (
            parsed.value !== undefined &&
            (typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value))
          )
            next.params = "Params must be a JSON object.";
          setErrors(next);
          if (Object.keys(next).length || !parsed.ok) return;
          // pkpId goes into the params too: the usual action reads it from there.
          const js_params = { pkpId, ...((parsed.value as object | undefined) ?? {}) };
          const timeout_ms = Math.round(limitS * 1000);
          const pkp = pkps.data?.find((k) => k.pkp_id === pkpId);
          startRun(
            {
              what: source === "cid" ? cidInput.trim() : "the code in the editor",
              pkpName: pkp?.name || short(pkp?.address ?? pkpId),
              timeoutMs: timeout_ms,
            },
            () =>
              sigil.execute(
                source === "cid"
                  ? { cid: cidInput.trim(), pkp_id: pkpId, js_params, timeout_ms }
                  : { code: editorCode, pkp_id: pkpId, js_params, timeout_ms },
              ) as Promise<NonNullable<RunRecord["result"]>>,
            describeError,
          );
        }}
      >
        <fieldset className="row wrap">
          <legend>Run</legend>
          <label className="check">
            <input
              type="radio"
              name="source"
              checked={source === "editor"}
              onChange={() => setSource("editor")}
            />
            the code in the editor
          </label>
          <label className="check">
            <input type="radio" name="source" checked={source === "cid"} onChange={() => setSource("cid")} />a
            pinned action by CID
          </label>
        </fieldset>
        {source === "cid" ? (
          <>
            {pinned.data?.length ? (
              <Field label="Pinned action">
                {(p) => (
                  <select {...p} value={cidInput} onChange={(e) => setCidInput(e.target.value)}>
                    <option value="">Choose a pinned action</option>
                    {pinned.data!.map((a) => (
                      <option key={a.cid} value={a.cid}>
                        {short(a.cid, 12)} · {a.bytes} bytes · pinned{" "}
                        {a.pinned_at.slice(0, 16).replace("T", " ")}
                      </option>
                    ))}
                  </select>
                )}
              </Field>
            ) : null}
            <Field label="Action CID" error={errors.cid}>
              {(p) => (
                <input
                  {...p}
                  spellCheck={false}
                  value={cidInput}
                  onChange={(e) => setCidInput(e.target.value)}
                />
              )}
            </Field>
          </>
        ) : null}
        <Field
          label="PKP"
          error={errors.pkp ?? (pkps.error ? `${pkps.error.message} (${pkps.error.code})` : undefined)}
        >
          {(p) => (
            <select {...p} value={pkpId} onChange={(e) => setPkpId(e.target.value)}>
              <option value="">
                {pkps.loading ? "Loading PKPs…" : pkps.data?.length ? "Choose a PKP" : "No PKPs"}
              </option>
              {(pkps.data ?? []).map((k) => (
                <option key={k.pkp_id} value={k.pkp_id}>
                  {(k.name || "unnamed") + " · " + short(k.address)}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Params (JSON object)" error={errors.params}>
          {(p) => (
            <textarea
              {...p}
              rows={3}
              spellCheck={false}
              value={params}
              onChange={(e) => setParams(e.target.value)}
            />
          )}
        </Field>
        <Field
          label="Time limit (seconds)"
          error={errors.limit}
          hint={`The run is stopped after this long; at most ${maxS} s.`}
        >
          {(p) => (
            <input
              {...p}
              type="number"
              min={0.1}
              max={maxS}
              step={0.1}
              inputMode="decimal"
              value={limit}
              onChange={(e) => setLimit(e.target.value)}
            />
          )}
        </Field>
        <p data-testid="worst-case" className="muted">
          {limitOk && typeof perSecond === "number"
            ? `This run costs at most ${formatCents(Math.ceil(limitS) * perSecond)} (${Math.ceil(limitS)} s × ${formatCents(perSecond)} per started second).`
            : limitOk
              ? "Runs are free on this service."
              : ""}
        </p>
        <button type="submit" className="primary" disabled={running}>
          {running ? "Running…" : "Run"}
        </button>
      </form>
      {latest ? <RunView run={latest} /> : null}
      {runs.length > 1 ? <RecentRuns runs={runs.slice(1)} /> : null}
    </section>
  );
}

function formatCents(n: number): string {
  return `${n} ${n === 1 ? "cent" : "cents"}`;
}

const STATUS_LABEL: Record<RunRecord["status"], string> = {
  running: "Running",
  succeeded: "Succeeded",
  failed: "Failed",
  refused: "Refused",
};

export function StatusBadge({ status }: { status: RunRecord["status"] }) {
  return (
    <span className={`badge badge-${status}`} data-testid="run-status">
      {STATUS_LABEL[status]}
    </span>
  );
}

function RunView({ run }: { run: RunRecord }) {
  const r = run.result;
  return (
    <div aria-live="polite">
      {run.status === "refused" ? (
        <div data-testid="run-error">
          <ErrorNote error={run.error ?? null} />
        </div>
      ) : null}
      {run.status === "running" ? (
        <p role="status">
          <StatusBadge status="running" /> {run.what} with {run.pkpName}…
        </p>
      ) : null}
      {r ? (
        <dl className="result" data-testid="run-result">
          <dt>Status</dt>
          <dd>
            <StatusBadge status={run.status} />
          </dd>
          {r.error ? (
            <>
              <dt>Error</dt>
              <dd>
                {r.error.message} <code>{r.error.code}</code>
                {r.error.code === "timeout" ? (
                  <span className="muted"> (the time limit was {run.timeoutMs / 1000} s)</span>
                ) : null}
              </dd>
            </>
          ) : null}
          <dt>Duration</dt>
          <dd>{Math.round(r.execution_ms)} ms</dd>
          <dt>Cost</dt>
          <dd data-testid="run-cost">{formatCents(r.charged_cents)}</dd>
          <dt>Response</dt>
          <dd>
            <pre data-testid="run-response">{JSON.stringify(r.response, null, 2)}</pre>
          </dd>
          <dt>Logs</dt>
          <dd>
            <pre>{r.logs || "(none)"}</pre>
          </dd>
        </dl>
      ) : null}
    </div>
  );
}

function RecentRuns({ runs }: { runs: RunRecord[] }) {
  return (
    <section aria-labelledby="recent-runs-title">
      <h3 id="recent-runs-title">Earlier runs in this tab</h3>
      <ul className="runs" data-testid="recent-runs">
        {runs.map((r) => (
          <li key={r.id}>
            <StatusBadge status={r.status} /> {new Date(r.startedAt).toLocaleTimeString()} ·{" "}
            {r.what.startsWith("Qm") || r.what.startsWith("b") ? <code>{short(r.what, 8)}</code> : r.what}{" "}
            with {r.pkpName}
            {r.result ? ` · ${formatCents(r.result.charged_cents)}` : ""}
            {r.error ? ` · ${r.error.code}` : ""}
          </li>
        ))}
      </ul>
    </section>
  );
}
