/**
 * Creating or editing a trigger: the kind's own fields, the action, its PKPs and default `js_params`,
 * the usage key it runs as, limits and retry; a preview of the JSON that is sent. Every refusal of the
 * service is shown next to the field its `details.field` names (or above the buttons when it names
 * none), and the form keeps what was typed.
 */
import { useState } from "react";
import type { Trigger } from "../../../sdk";
import type { PinnedAction, ShownError } from "../api";
import {
  addressTopic,
  bodyOf,
  fieldOfError,
  KIND_LABELS,
  nextRuns,
  utc,
  type Kind,
  type TriggerFormState,
} from "../triggerForm";
import { ErrorNote, Field, short } from "./ui";

export interface FormChoices {
  pinned: PinnedAction[];
  pkps: Array<{ pkp_id: string; name?: string | null }>;
  keys: Array<{ id: string; name?: string | null }>;
  /** The chains the service reaches (GET /config), for a chain-event trigger's chain. */
  chains?: Array<{ chain_id: number; name: string; confirmations: number }>;
}

export function TriggerForm({
  initial,
  existing,
  choices,
  pending,
  error,
  onSubmit,
  onCancel,
}: {
  initial: TriggerFormState;
  /** The trigger being edited (absent: a new one). */
  existing?: Trigger;
  choices: FormChoices;
  pending: boolean;
  /** The service's last refusal of this form. */
  error: ShownError | null;
  onSubmit: (body: ReturnType<typeof bodyOf>["body"]) => void;
  onCancel: () => void;
}) {
  const [f, setF] = useState(initial);
  const [tried, setTried] = useState(false);
  const set = <K extends keyof TriggerFormState>(k: K, v: TriggerFormState[K]) => setF({ ...f, [k]: v });
  const { body, errors } = bodyOf(f, existing);
  // The service's refusal belongs to the field it names, until that field is edited again.
  const [apiFieldDismissed, setDismissed] = useState<string | null>(null);
  const apiField = fieldOfError(error?.details);
  const fieldError = (name: string): string | undefined => {
    if (tried && errors[name]) return errors[name];
    if (name === "js_params" && errors.js_params) return errors.js_params;
    if (error && apiField === name && apiFieldDismissed !== name) return error.message;
    return undefined;
  };
  const edit = <K extends keyof TriggerFormState>(k: K, v: TriggerFormState[K], apiName: string) => {
    set(k, v);
    if (apiField === apiName) setDismissed(apiName);
  };
  const unplaced = error && (apiField === null || !KNOWN_FIELDS.has(apiField)) ? error : null;

  const submit = () => {
    setTried(true);
    setDismissed(null);
    if (Object.keys(errors).length === 0) onSubmit(body);
  };

  const cidChoices = choices.pinned.map((p) => p.cid);
  if (f.cid && !cidChoices.includes(f.cid)) cidChoices.unshift(f.cid);
  const keyChoices = choices.keys;

  return (
    <form
      className="card"
      aria-label={existing ? `Edit trigger ${existing.name}` : "New trigger"}
      data-testid="trigger-form"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <h2>{existing ? `Edit “${existing.name}”` : "New trigger"}</h2>
      <Field label="Name" error={fieldError("name")}>
        {(p) => <input {...p} value={f.name} onChange={(e) => edit("name", e.target.value, "name")} />}
      </Field>
      <fieldset>
        <legend>What fires it</legend>
        {existing ? (
          <p>
            Kind: <strong>{KIND_LABELS[f.kind]}</strong> <span className="muted">(fixed at creation)</span>
          </p>
        ) : (
          <div className="row wrap" role="radiogroup" aria-label="Kind">
            {(Object.keys(KIND_LABELS) as Kind[]).map((k) => (
              <label key={k}>
                <input
                  type="radio"
                  name="trigger-kind"
                  value={k}
                  checked={f.kind === k}
                  onChange={() => set("kind", k)}
                />{" "}
                {KIND_LABELS[k]}
              </label>
            ))}
          </div>
        )}
        {f.kind === "schedule" ? <ScheduleFields f={f} edit={edit} fieldError={fieldError} /> : null}
        {f.kind === "webhook" ? <WebhookFields f={f} edit={edit} fieldError={fieldError} /> : null}
        {f.kind === "chain_event" ? (
          <ChainEventFields f={f} edit={edit} fieldError={fieldError} chains={choices.chains ?? []} />
        ) : null}
      </fieldset>

      <fieldset>
        <legend>What it runs</legend>
        <Field label="Action (CID)" error={fieldError("cid")} hint="One of the account's pinned actions">
          {(p) =>
            cidChoices.length ? (
              <select {...p} value={f.cid} onChange={(e) => edit("cid", e.target.value, "cid")}>
                <option value="">Choose an action…</option>
                {cidChoices.map((c) => (
                  <option key={c} value={c}>
                    {c}
                  </option>
                ))}
              </select>
            ) : (
              <input
                {...p}
                value={f.cid}
                spellCheck={false}
                placeholder="Qm… (pin the code on the Actions page first)"
                onChange={(e) => edit("cid", e.target.value, "cid")}
              />
            )
          }
        </Field>
        <fieldset
          className="nested"
          aria-describedby={fieldError("pkp_ids") ? "trigger-pkps-error" : undefined}
        >
          <legend>PKPs it may use</legend>
          {choices.pkps.length === 0 ? <p className="muted">This account has no PKPs.</p> : null}
          {choices.pkps.map((p) => (
            <label key={p.pkp_id} className="check">
              <input
                type="checkbox"
                checked={f.pkpIds.includes(p.pkp_id)}
                onChange={(e) =>
                  edit(
                    "pkpIds",
                    e.target.checked ? [...f.pkpIds, p.pkp_id] : f.pkpIds.filter((x) => x !== p.pkp_id),
                    "pkp_ids",
                  )
                }
              />{" "}
              {p.name || "unnamed"} <code title={p.pkp_id}>{short(p.pkp_id)}</code>
            </label>
          ))}
          {fieldError("pkp_ids") ? (
            <small id="trigger-pkps-error" className="field-error" role="alert">
              {fieldError("pkp_ids")}
            </small>
          ) : null}
        </fieldset>
        <Field
          label="Default js_params (JSON)"
          hint="The run adds `trigger` (the firing) to these"
          error={fieldError("js_params")}
        >
          {(p) => (
            <textarea
              {...p}
              rows={4}
              spellCheck={false}
              value={f.jsParams}
              onChange={(e) => edit("jsParams", e.target.value, "js_params")}
            />
          )}
        </Field>
        <Field
          label="Runs as usage key"
          error={fieldError("run_as.key_address")}
          hint="The trigger names the key's address only: the service never holds the key, and checks it at every run (revoke it and the trigger stops)"
        >
          {(p) => (
            <select
              {...p}
              value={f.keyAddress}
              onChange={(e) => edit("keyAddress", e.target.value, "run_as.key_address")}
            >
              <option value="">Choose a usage key…</option>
              {keyChoices.map((k) => (
                <option key={k.id} value={k.id}>
                  {k.name || "unnamed"} ({k.id})
                </option>
              ))}
              {f.keyAddress && !keyChoices.some((k) => k.id.toLowerCase() === f.keyAddress.toLowerCase()) ? (
                <option value={f.keyAddress}>no longer a key of this account ({f.keyAddress})</option>
              ) : null}
            </select>
          )}
        </Field>
      </fieldset>

      <fieldset>
        <legend>Limits and retry</legend>
        <div className="row wrap">
          <Field label="Runs per minute" hint="1 to 600" error={fieldError("limits.runs_per_minute")}>
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={f.runsPerMinute}
                onChange={(e) => edit("runsPerMinute", e.target.value, "limits.runs_per_minute")}
              />
            )}
          </Field>
          <Field label="Queued runs at most" hint="1 to 1000" error={fieldError("limits.max_queued_runs")}>
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={f.maxQueuedRuns}
                onChange={(e) => edit("maxQueuedRuns", e.target.value, "limits.max_queued_runs")}
              />
            )}
          </Field>
          <Field label="Concurrency" error={fieldError("limits.concurrency")}>
            {(p) => (
              <select
                {...p}
                value={f.concurrency}
                onChange={(e) =>
                  edit("concurrency", e.target.value as "serial" | "parallel", "limits.concurrency")
                }
              >
                <option value="serial">one run at a time</option>
                <option value="parallel">runs may overlap</option>
              </select>
            )}
          </Field>
          <Field label="Attempts in all" hint="1 to 10" error={fieldError("retry.max_attempts")}>
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={f.maxAttempts}
                onChange={(e) => edit("maxAttempts", e.target.value, "retry.max_attempts")}
              />
            )}
          </Field>
          <Field
            label="First retry after (ms)"
            hint="Doubled each time; 100 ms to 1 h"
            error={fieldError("retry.backoff_ms")}
          >
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={f.backoffMs}
                onChange={(e) => edit("backoffMs", e.target.value, "retry.backoff_ms")}
              />
            )}
          </Field>
        </div>
      </fieldset>

      <details>
        <summary>The JSON that will be sent</summary>
        <pre className="code" data-testid="trigger-preview">
          {JSON.stringify(body, null, 2)}
        </pre>
      </details>
      {unplaced ? <ErrorNote error={unplaced} /> : null}
      <div className="row">
        <button type="submit" className="primary" disabled={pending}>
          {pending ? "Saving…" : existing ? "Save trigger" : "Create trigger"}
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** Every field the form has an input for: an error naming another one is shown above the buttons. */
const KNOWN_FIELDS = new Set([
  "name",
  "cid",
  "pkp_ids",
  "js_params",
  "run_as.key_address",
  "schedule.cron",
  "schedule.missed",
  "webhook.hmac.header",
  "webhook.hmac.prefix",
  "webhook.hmac.encoding",
  "chain_event.chain_id",
  "chain_event.address",
  "chain_event.event",
  "chain_event.topic0",
  "chain_event.topics",
  "chain_event.topics[0]",
  "chain_event.topics[1]",
  "chain_event.topics[2]",
  "chain_event.from_block",
  "limits.runs_per_minute",
  "limits.max_queued_runs",
  "limits.concurrency",
  "retry.max_attempts",
  "retry.backoff_ms",
]);

type Edit = <K extends keyof TriggerFormState>(k: K, v: TriggerFormState[K], apiName: string) => void;
interface KindProps {
  f: TriggerFormState;
  edit: Edit;
  fieldError: (name: string) => string | undefined;
}

function ScheduleFields({ f, edit, fieldError }: KindProps) {
  const next = nextRuns(f.cron);
  return (
    <>
      <Field
        label="Cron (five fields, UTC)"
        hint="minute hour day-of-month month day-of-week; the shortest interval is one minute"
        error={fieldError("schedule.cron")}
      >
        {(p) => (
          <input
            {...p}
            value={f.cron}
            spellCheck={false}
            onChange={(e) => edit("cron", e.target.value, "schedule.cron")}
          />
        )}
      </Field>
      <p data-testid="cron-preview" aria-live="polite" className="muted">
        {"times" in next ? `Next, in UTC: ${next.times.map((t) => utc(t)).join("; ")}.` : next.problem}
      </p>
      <Field label="After downtime" error={fieldError("schedule.missed")}>
        {(p) => (
          <select
            {...p}
            value={f.missed}
            onChange={(e) => edit("missed", e.target.value as "skip" | "run_once", "schedule.missed")}
          >
            <option value="skip">skip the missed times</option>
            <option value="run_once">run the latest missed time once</option>
          </select>
        )}
      </Field>
    </>
  );
}

function WebhookFields({ f, edit, fieldError }: KindProps) {
  return (
    <>
      <p className="muted">
        The trigger gets a public URL of its own once it is created; a POST to it starts a run.
      </p>
      <label className="check">
        <input
          type="checkbox"
          checked={f.hmac}
          onChange={(e) => edit("hmac", e.target.checked, "webhook.hmac.header")}
        />{" "}
        Require an HMAC-SHA256 signature of the body (the secret is shown once, after saving)
      </label>
      {f.hmac ? (
        <div className="row wrap">
          <Field label="Signature header" error={fieldError("webhook.hmac.header")}>
            {(p) => (
              <input
                {...p}
                value={f.hmacHeader}
                spellCheck={false}
                onChange={(e) => edit("hmacHeader", e.target.value, "webhook.hmac.header")}
              />
            )}
          </Field>
          <Field label="Signature prefix" error={fieldError("webhook.hmac.prefix")}>
            {(p) => (
              <input
                {...p}
                value={f.hmacPrefix}
                spellCheck={false}
                onChange={(e) => edit("hmacPrefix", e.target.value, "webhook.hmac.prefix")}
              />
            )}
          </Field>
          <Field label="Signature encoding" error={fieldError("webhook.hmac.encoding")}>
            {(p) => (
              <select
                {...p}
                value={f.hmacEncoding}
                onChange={(e) =>
                  edit("hmacEncoding", e.target.value as "hex" | "base64", "webhook.hmac.encoding")
                }
              >
                <option value="hex">hex</option>
                <option value="base64">base64</option>
              </select>
            )}
          </Field>
        </div>
      ) : null}
    </>
  );
}

function ChainEventFields({
  f,
  edit,
  fieldError,
  chains,
}: KindProps & { chains: NonNullable<FormChoices["chains"]> }) {
  const [helper, setHelper] = useState("");
  const helperTopic = addressTopic(helper);
  return (
    <>
      <div className="row wrap">
        <Field
          label="Chain id"
          hint={
            chains.length
              ? "Configured: " +
                chains.map((c) => `${c.chain_id} (${c.name}, ${c.confirmations} confirmations)`).join(", ")
              : "A chain the service is configured for"
          }
          error={fieldError("chain_event.chain_id")}
        >
          {(p) => (
            <>
              <input
                {...p}
                inputMode="numeric"
                list="trigger-chains"
                value={f.chainId}
                onChange={(e) => edit("chainId", e.target.value, "chain_event.chain_id")}
              />
              <datalist id="trigger-chains">
                {chains.map((c) => (
                  <option key={c.chain_id} value={c.chain_id}>
                    {c.name}
                  </option>
                ))}
              </datalist>
            </>
          )}
        </Field>
        <Field label="Contract address" error={fieldError("chain_event.address")}>
          {(p) => (
            <input
              {...p}
              value={f.address}
              spellCheck={false}
              placeholder="0x…"
              onChange={(e) => edit("address", e.target.value, "chain_event.address")}
            />
          )}
        </Field>
      </div>
      <Field
        label="Event signature"
        hint="e.g. Transfer(address indexed from, address indexed to, uint256 value)"
        error={fieldError("chain_event.event") ?? fieldError("chain_event.topic0")}
      >
        {(p) => (
          <input
            {...p}
            value={f.event}
            spellCheck={false}
            onChange={(e) => edit("event", e.target.value, "chain_event.event")}
          />
        )}
      </Field>
      {[0, 1, 2].map((i) => (
        <Field
          key={i}
          label={`Topic ${i + 1} filter`}
          hint="Empty: any; else 0x + 64 hex digits"
          error={
            fieldError(`chain_event.topics[${i}]`) ?? (i === 0 ? fieldError("chain_event.topics") : undefined)
          }
        >
          {(p) => (
            <input
              {...p}
              value={f.topics[i]}
              spellCheck={false}
              onChange={(e) => {
                const topics = [...f.topics] as TriggerFormState["topics"];
                topics[i] = e.target.value;
                edit("topics", topics, `chain_event.topics[${i}]`);
              }}
            />
          )}
        </Field>
      ))}
      <div className="row wrap">
        <Field label="Address to turn into a topic" hint="An indexed address argument, e.g. Transfer's `to`">
          {(p) => (
            <input
              {...p}
              value={helper}
              spellCheck={false}
              placeholder="0x…"
              onChange={(e) => setHelper(e.target.value)}
            />
          )}
        </Field>
        {[0, 1, 2].map((i) => (
          <button
            key={i}
            type="button"
            className="small"
            disabled={!helperTopic}
            onClick={() => {
              const topics = [...f.topics] as TriggerFormState["topics"];
              topics[i] = helperTopic ?? "";
              edit("topics", topics, `chain_event.topics[${i}]`);
            }}
          >
            Use as topic {i + 1}
          </button>
        ))}
      </div>
      <Field
        label="From block"
        hint="Empty: the chain's head when the trigger is made"
        error={fieldError("chain_event.from_block")}
      >
        {(p) => (
          <input
            {...p}
            inputMode="numeric"
            value={f.fromBlock}
            onChange={(e) => edit("fromBlock", e.target.value, "chain_event.from_block")}
          />
        )}
      </Field>
    </>
  );
}
