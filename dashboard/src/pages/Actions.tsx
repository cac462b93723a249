/**
 * Write, pin and run actions; the account's pinned actions, any of which loads into the runner. The
 * CID is asked of the API as you type (debounced): the service's answer is the one that counts, and
 * computing it here would put an IPFS importer on the page.
 */
import { useEffect, useRef, useState } from "react";
import { collect, describeError, type Session, type ShownError } from "../api";
import { CodeEditor } from "../components/CodeEditor";
import { PinnedActions } from "../components/PinnedActions";
import { CopyButton, ErrorNote, Field } from "../components/ui";
import { useAction, useLoad } from "../useLoad";
import { isCid, parseJson } from "../validate";

const STARTER = `async function main({ pkpId, message }) {
  const signature = await Actions.signMessage({ pkpId, message });
  return { message, signature, address: await Actions.getAddress({ pkpId }) };
}
`;

type RunResult = Awaited<ReturnType<Session["sigil"]["execute"]>>;

export default function Actions({ session }: { session: Session }) {
  const { sigil } = session;
  const [code, setCode] = useState(STARTER);
  const [cid, setCid] = useState<string | null>(null);
  const [cidError, setCidError] = useState<ShownError | null>(null);
  const [pinned, setPinned] = useState<string | null>(null);
  // A CID chosen in the pinned list, for the runner (the counter makes choosing the same one again count).
  const [toRun, setToRun] = useState<{ cid: string; n: number } | null>(null);
  const pin = useAction();

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
              onClick={() => void pin.run(() => sigil.pinAction(code)).then((r) => r && setPinned(r.cid))}
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
  const [source, setSource] = useState<"editor" | "cid">("editor");
  const [cidInput, setCidInput] = useState("");
  const [pkpId, setPkpId] = useState("");
  const [params, setParams] = useState('{ "message": "hello" }');
  const [errors, setErrors] = useState<{ cid?: string; pkp?: string; params?: string }>({});
  const [result, setResult] = useState<RunResult | null>(null);
  const run = useAction();
  const runnerSection = useRef<HTMLElement | null>(null);

  useEffect(() => {
    if (!toRun) return;
    setSource("cid");
    setCidInput(toRun.cid);
    setErrors({});
    // Where the user's eyes should go next: the runner, with the CID filled in.
    requestAnimationFrame(() => runnerSection.current?.scrollIntoView({ block: "start" }));
  }, [toRun]);

  return (
    <section className="card" aria-labelledby="run-title" ref={runnerSection}>
      <h2 id="run-title">Run</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const next: typeof errors = {};
          if (source === "cid" && !isCid(cidInput.trim())) next.cid = "Not a CID (Qm… or b…).";
          if (!/^0x[0-9a-fA-F]{64}$/.test(pkpId)) next.pkp = "Choose a PKP (its id is 0x and 64 hex digits).";
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
          setResult(null);
          void run
            .run(() =>
              sigil.execute(
                source === "cid"
                  ? { cid: cidInput.trim(), pkp_id: pkpId, js_params }
                  : { code: editorCode, pkp_id: pkpId, js_params },
              ),
            )
            .then((r) => r && setResult(r));
        }}
      >
        <fieldset className="row">
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
                  {(k.name || "unnamed") + " " + k.address}
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
        <button type="submit" className="primary" disabled={run.pending}>
          {run.pending ? "Running…" : "Run"}
        </button>
      </form>
      <div data-testid="run-error">
        <ErrorNote error={run.error} />
      </div>
      {result ? (
        <dl className="result" data-testid="run-result">
          <dt>has_error</dt>
          <dd data-testid="has-error">{String(result.has_error)}</dd>
          {result.error ? (
            <>
              <dt>error</dt>
              <dd>
                {result.error.message} <code>{result.error.code}</code>
              </dd>
            </>
          ) : null}
          <dt>Duration</dt>
          <dd>{Math.round(result.execution_ms)} ms</dd>
          <dt>Cost</dt>
          <dd>{result.charged_cents} ¢</dd>
          <dt>Response</dt>
          <dd>
            <pre data-testid="run-response">{JSON.stringify(result.response, null, 2)}</pre>
          </dd>
          <dt>Logs</dt>
          <dd>
            <pre>{result.logs || "(none)"}</pre>
          </dd>
        </dl>
      ) : null}
    </section>
  );
}
