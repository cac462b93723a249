/**
 * A group's signing policy on the group page: the policy it names (CID and document), an editor whose
 * schema errors are shown inline (the API's `invalid_policy` details), a preview of what the edited
 * policy decides for an operation (`POST /policies/evaluate`: nothing signed, nothing written), then
 * setting or clearing it. In API mode setting is an upload and a path-A write, confirmed first; for a
 * ChainSecured account it is the owner's `setGroupPolicy` transaction, previewed like every other owner
 * write (sent by a wallet, or downloaded as a Safe Transaction Builder file). A wallet session may only
 * read, so there the owner names a policy already uploaded (by its CID) instead of uploading one.
 */
import { useState } from "react";
import type { Session, ShownError } from "../api";
import {
  exampleOperation,
  firstPolicy,
  KIND_LABELS,
  OPERATION_KINDS,
  type OperationKind,
} from "../policyExamples";
import { useAction, useLoad } from "../useLoad";
import { isCid } from "../validate";
import type { ChainOwner } from "../useOwnerTransactions";
import { ownerTx, type OwnerTx } from "../wallet";
import { useToast } from "./Toasts";
import { ConfirmButton, CopyButton, ErrorNote, Field, Loading } from "./ui";

interface Decision {
  allowed: boolean;
  rule: string;
  operation: string;
  field?: string;
  value?: string;
  reason: string;
}

/** A JSON text as an object, or the reason it is not one. */
function parseObject(text: string, what: string): { value: Record<string, unknown> } | { error: string } {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v !== "object" || v === null || Array.isArray(v))
      return { error: `${what} must be a JSON object.` };
    return { value: v as Record<string, unknown> };
  } catch (e) {
    return { error: `${what} is not valid JSON: ${(e as Error).message}` };
  }
}

/** The schema's problems from an `invalid_policy` answer (each with its JSON path), else none. */
function schemaProblems(error: ShownError | null): string[] {
  if (error?.code !== "invalid_policy") return [];
  const list = error.details?.errors;
  return Array.isArray(list) ? list.map(String) : [error.message];
}

export function GroupPolicy({
  session,
  groupId,
  groupName,
  policyCid,
  chainId,
  owner,
  propose,
  onChanged,
}: {
  session: Session;
  groupId: number;
  groupName: string;
  policyCid: string | null;
  chainId: number;
  owner: ChainOwner | null;
  propose: (txs: OwnerTx[]) => void;
  onChanged: () => void;
}) {
  const { sigil } = session;
  const current = useLoad(async () => (policyCid ? (await sigil.policy(policyCid)).policy : null));
  const [text, setText] = useState<string | null>(null);
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [kind, setKind] = useState<OperationKind>("transaction");
  const [opText, setOpText] = useState(() => exampleOperation("transaction", chainId));
  const [opError, setOpError] = useState<string | null>(null);
  const [at, setAt] = useState("");
  const [decision, setDecision] = useState<Decision | null>(null);
  /** The uploaded CID waiting for the path-A confirmation (API mode). */
  const [uploaded, setUploaded] = useState<string | null>(null);
  /** A wallet session (read-only): the CID of a policy uploaded elsewhere, to propose. */
  const [cidText, setCidText] = useState("");
  const [cidError, setCidError] = useState<string | null>(null);
  const readOnly = session.kind === "owner";
  const preview = useAction();
  const upload = useAction();
  const write = useAction();
  const toast = useToast();
  const title = groupName || String(groupId);

  if (current.loading && !current.data && policyCid) return <Loading what="the group's policy" />;
  const editorText = text ?? (current.data ? JSON.stringify(current.data, null, 2) : firstPolicy(chainId));
  // Schema problems come from whichever call last saw the document.
  const problems = [...schemaProblems(preview.error), ...schemaProblems(upload.error)];

  /** The editor's document, or null with the inline error set. */
  const policyDoc = () => {
    const parsed = parseObject(editorText, "The policy");
    setJsonError("error" in parsed ? parsed.error : null);
    return "error" in parsed ? null : parsed.value;
  };

  const runPreview = () => {
    setDecision(null);
    const policy = policyDoc();
    const op = parseObject(opText.trim() === "" ? "{}" : opText, "The operation");
    setOpError("error" in op ? op.error : null);
    if (!policy || "error" in op) return;
    if (at.trim() && Number.isNaN(new Date(at).getTime())) {
      setOpError("The time must be an ISO 8601 time, e.g. 2026-01-05T09:30:00Z.");
      return;
    }
    const body = {
      policy,
      operation: { kind, ...op.value },
      ...(at.trim() ? { at: at.trim() } : {}),
    } as unknown as Parameters<typeof sigil.evaluatePolicy>[0];
    void preview.run(() => sigil.evaluatePolicy(body)).then((d) => d && setDecision(d as Decision));
  };

  const setPolicy = () => {
    setUploaded(null);
    const policy = policyDoc();
    if (!policy) return;
    void upload
      .run(() => sigil.uploadPolicy(policy as Parameters<typeof sigil.uploadPolicy>[0]))
      .then((r) => {
        if (!r) return;
        if (owner) proposeSet(r.cid);
        else setUploaded(r.cid);
      });
  };

  /** The owner's setGroupPolicy transaction, previewed (and, for a Safe, downloadable). */
  const proposeSet = (cid: string) =>
    propose([
      ownerTx(`Set the policy of group ${title}`, owner!.chainId, owner!.registry, "setGroupPolicy", [
        groupId,
        cid,
      ]),
    ]);

  /**
   * A wallet session may only read: it names a policy uploaded with the account key or the CLI, which
   * is read back (a GET) and shown in the editor before the transaction is proposed.
   */
  const proposeByCid = () => {
    const cid = cidText.trim();
    setCidError(isCid(cid) ? null : "A CID (Qm… or b…) of a policy uploaded to this service.");
    if (!isCid(cid)) return;
    void upload
      .run(() => sigil.policy(cid))
      .then((r) => {
        if (!r) return;
        setText(JSON.stringify(r.policy, null, 2));
        proposeSet(r.cid);
      });
  };

  const applyPathA = (cid: string | null) =>
    void write
      .run(() => sigil.setGroupPolicy(groupId, cid))
      .then((r) => {
        if (!r) return;
        toast(cid ? `Policy of group “${title}” set.` : `Policy of group “${title}” cleared.`);
        setUploaded(null);
        setText(null);
        onChanged();
      });

  return (
    <section className="card" aria-label={`Policy of group ${groupId}`} data-testid="group-policy">
      <h3>Signing policy</h3>
      {policyCid ? (
        <p>
          Current policy: <code data-testid="policy-cid">{policyCid}</code>{" "}
          <CopyButton value={policyCid} label="policy CID" />
        </p>
      ) : (
        <p className="muted" data-testid="policy-none">
          No policy: this group's PKPs sign whatever its actions ask.
        </p>
      )}
      <ErrorNote error={current.error} />
      <Field
        label="Policy document (JSON)"
        hint="Rules: allow or deny, per operation; deny wins, and what no rule allows is refused"
        error={jsonError}
      >
        {(p) => (
          <textarea
            {...p}

            rows={14}
            spellCheck={false}
            value={editorText}
            onChange={(e) => {
              setText(e.target.value);
              setDecision(null);
              setUploaded(null);
            }}
          />
        )}
      </Field>
      {problems.length ? (
        <div className="error" role="alert" data-testid="policy-problems">
          <p>The policy does not follow the schema:</p>
          <ul>
            {problems.map((m) => (
              <li key={m}>
                <code>{m}</code>
              </li>
            ))}
          </ul>
        </div>
      ) : null}

      {readOnly ? (
        <div data-testid="policy-read-only">
          <p className="muted">
            Signed in with a wallet, this page may only read: the preview and uploading a document need the
            account key (or <code>npx sigil policies upload</code>). Name a policy already uploaded, and your
            wallet or Safe sets it.
          </p>
          <Field label="CID of an uploaded policy" error={cidError}>
            {(p) => (
              <input {...p} value={cidText} spellCheck={false} onChange={(e) => setCidText(e.target.value)} />
            )}
          </Field>
        </div>
      ) : (
        <fieldset>
          <legend>Preview: what would this policy decide?</legend>
          <Field label="Operation">
            {(p) => (
              <select
                {...p}
                value={kind}
                onChange={(e) => {
                  const k = e.target.value as OperationKind;
                  setKind(k);
                  setOpText(exampleOperation(k, chainId));
                  setDecision(null);
                }}
              >
                {OPERATION_KINDS.map((k) => (
                  <option key={k} value={k}>
                    {KIND_LABELS[k]}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field
            label="Operation fields (JSON)"
            hint="Without `kind`: the picker above sets it"
            error={opError}
          >
            {(p) => (
              <textarea
                {...p}

                rows={6}
                spellCheck={false}
                value={opText}
                onChange={(e) => {
                  setOpText(e.target.value);
                  setDecision(null);
                }}
              />
            )}
          </Field>
          <Field label="At (optional, UTC)" hint="ISO 8601; time rules are evaluated as of this moment">
            {(p) => <input {...p} value={at} placeholder="now" onChange={(e) => setAt(e.target.value)} />}
          </Field>
          <button type="button" disabled={preview.pending} onClick={runPreview}>
            {preview.pending ? "Checking…" : "Preview"}
          </button>
          {preview.error?.code !== "invalid_policy" ? <ErrorNote error={preview.error} /> : null}
          {decision ? (
            <dl
              className={decision.allowed ? "result" : "result error"}
              data-testid="policy-decision"
              role="status"
            >
              <dt>Decision</dt>
              <dd data-testid="policy-verdict">{decision.allowed ? "Allowed" : "Denied"}</dd>
              <dt>Deciding rule</dt>
              <dd>
                <code data-testid="policy-rule">{decision.rule}</code>
              </dd>
              {decision.field ? (
                <>
                  <dt>Condition</dt>
                  <dd>
                    <code>{decision.field}</code> = <code>{decision.value}</code>
                  </dd>
                </>
              ) : null}
              <dt>Why</dt>
              <dd>{decision.reason}</dd>
            </dl>
          ) : null}
        </fieldset>
      )}

      <div className="row">
        <button
          type="button"
          className="primary"
          disabled={upload.pending || write.pending}
          onClick={readOnly ? proposeByCid : setPolicy}
        >
          {upload.pending
            ? readOnly
              ? "Reading…"
              : "Uploading…"
            : owner
              ? "Set policy (owner transaction)…"
              : "Set policy…"}
        </button>
        {policyCid ? (
          <ConfirmButton
            label="Clear policy"
            question={`Clear the policy of group ${title}? Its PKPs then sign whatever its actions ask.`}
            confirmLabel="Clear policy"
            disabled={write.pending}
            onConfirm={() =>
              owner
                ? propose([
                    ownerTx(
                      `Clear the policy of group ${title}`,
                      owner.chainId,
                      owner.registry,
                      "setGroupPolicy",
                      [groupId, ""],
                    ),
                  ])
                : applyPathA(null)
            }
          />
        ) : null}
      </div>
      {upload.error?.code !== "invalid_policy" ? <ErrorNote error={upload.error} /> : null}
      {uploaded ? (
        <div className="card" role="group" aria-label="Confirm the policy" data-testid="policy-confirm">
          <p>
            Uploaded as <code data-testid="uploaded-cid">{uploaded}</code>. Set it as the policy of group{" "}
            {title}? From the next signature on, its PKPs sign only what it allows.
          </p>
          <div className="row">
            <button
              type="button"
              className="primary"
              disabled={write.pending}
              onClick={() => applyPathA(uploaded)}
            >
              {write.pending ? "Setting… (waiting for the chain)" : "Confirm: set policy"}
            </button>
            <button type="button" onClick={() => setUploaded(null)}>
              Cancel
            </button>
          </div>
        </div>
      ) : null}
      <ErrorNote error={write.error} />
    </section>
  );
}
