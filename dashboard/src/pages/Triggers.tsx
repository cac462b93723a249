/**
 * Triggers: schedules, inbound webhooks and chain events that run an action as one of the account's
 * usage keys. Three views chosen by the hash: the list (`#/triggers`), a new trigger
 * (`#/triggers/new`) and one trigger with its run history (`#/triggers/<id>`). The account key and
 * the owner signed in with a wallet manage them (for a wallet session, triggers are the one change the
 * service takes: they are its own records, not registry writes). A webhook secret lives in this component's state only: shown once, gone on reload.
 */
import { useState } from "react";
import type { Trigger, TriggerRun } from "../../../sdk";
import { collect, listPinnedActions, type Session } from "../api";
import { ConfirmButton, CopyButton, ErrorNote, Loading, ShownOnce, short } from "../components/ui";
import { TriggerForm, type FormChoices } from "../components/TriggerForm";
import { DataTable } from "../components/DataTable";
import { runsPage, TriggerRuns } from "../components/TriggerRuns";
import { useToast } from "../components/Toasts";
import { emptyForm, formOf, KIND_LABELS, utc } from "../triggerForm";
import { useAction, useLoad } from "../useLoad";

type View = { view: "list" } | { view: "new" } | { view: "detail"; id: string };

function viewOf(hash: string): View {
  const rest = hash.replace(/^#\/?triggers\/?/, "").split("?")[0];
  if (rest === "new") return { view: "new" };
  if (/^trg_[0-9a-f]+$/.test(rest)) return { view: "detail", id: rest };
  return { view: "list" };
}

const go = (path: string) => {
  window.location.hash = `#/triggers${path}`;
};

/** The choices the form offers and the names the list shows (keys by address, PKPs by id). */
function useChoices(session: Session) {
  const { sigil } = session;
  return useLoad(async (): Promise<FormChoices & { chainId: number }> => {
    const [pinned, pkps, keys, config] = await Promise.all([
      // The owner's wallet session may not list pins: its form takes the action's CID as typed.
      session.kind === "account" ? listPinnedActions(sigil).then((p) => p.items) : Promise.resolve([]),
      collect(sigil.pkps()),
      collect(sigil.usageKeys()),
      sigil.config(),
    ]);
    return { pinned, pkps, keys, chainId: config.chain_id, chains: config.chains };
  });
}

export default function Triggers({ session, hash }: { session: Session; hash: string }) {
  const v = viewOf(hash);
  const choices = useChoices(session);
  // The webhook secret of the trigger just made (or given an HMAC): this tab, this view, once.
  const [secret, setSecret] = useState<{ id: string; value: string } | null>(null);
  // The account key and the owner's wallet session manage triggers (a trigger is a record of the
  // service, never a registry write: docs/triggers.md); the page is not offered to usage keys.
  const readOnly = session.kind !== "account" && session.kind !== "owner";

  if (secret)
    return (
      <ShownOnce
        title="Your webhook secret"
        note="This is the only time it is shown. Sigil keeps it sealed and never shows it again: store it where the sender of the webhook keeps its secrets."
        value={secret.value}
        onDone={() => {
          setSecret(null);
          go(`/${secret.id}`);
        }}
      />
    );
  return (
    <>
      <ErrorNote error={choices.error} />
      {readOnly ? (
        <p className="muted" data-testid="triggers-read-only">
          This key only reads triggers: the account key or the owner's wallet manages them.
        </p>
      ) : null}
      {v.view === "list" ? (
        <TriggerList session={session} choices={choices.data} readOnly={readOnly} />
      ) : null}
      {v.view === "new" && !readOnly ? (
        choices.data ? (
          <CreateTrigger session={session} choices={choices.data} onSecret={setSecret} />
        ) : (
          <Loading what="your actions, PKPs and keys" />
        )
      ) : null}
      {v.view === "detail" ? (
        <TriggerDetail
          // Another trigger's hash is another view: nothing of the previous one (its answer, an edit) stays.
          key={v.id}
          session={session}
          id={v.id}
          choices={choices.data}
          readOnly={readOnly}
          onSecret={setSecret}
        />
      ) : null}
    </>
  );
}

function CreateTrigger({
  session,
  choices,
  onSecret,
}: {
  session: Session;
  choices: FormChoices & { chainId: number };
  onSecret: (s: { id: string; value: string }) => void;
}) {
  const create = useAction();
  const toast = useToast();
  return (
    <TriggerForm
      initial={emptyForm(choices.chainId)}
      choices={choices}
      pending={create.pending}
      error={create.error}
      onCancel={() => go("")}
      onSubmit={(body) =>
        void create
          .run(() =>
            session.sigil.triggers.create(body as Parameters<typeof session.sigil.triggers.create>[0]),
          )
          .then((t) => {
            if (!t) return;
            toast(`Trigger “${t.name}” created.`);
            if (typeof t.webhook_secret === "string") onSecret({ id: t.id, value: t.webhook_secret });
            else go(`/${t.id}`);
          })
      }
    />
  );
}

/** What fires it, in a line: the cron and its next run, the webhook URL, or the chain, contract and event. */
function FiresOn({ t }: { t: Trigger }) {
  if (t.schedule)
    return (
      <>
        <code>{t.schedule.cron}</code>
        <br />
        <small className="muted">
          {t.schedule.next_run_at ? `next ${utc(t.schedule.next_run_at)}` : "never again"}
        </small>
      </>
    );
  if (t.webhook)
    return (
      <>
        <code className="wrap-anywhere" data-testid="webhook-url">
          {t.webhook.url}
        </code>{" "}
        <CopyButton value={t.webhook.url} label={`webhook URL of ${t.name}`} />
        <br />
        <small className="muted">{t.webhook.hmac ? `HMAC in ${t.webhook.hmac.header}` : "no HMAC"}</small>
      </>
    );
  if (t.chain_event)
    return (
      <>
        chain {t.chain_event.chain_id},{" "}
        <code title={t.chain_event.address}>{short(t.chain_event.address)}</code>
        <br />
        <small>
          <code>{t.chain_event.event ?? t.chain_event.topic0}</code>
        </small>
      </>
    );
  return null;
}

function State({ t }: { t: Trigger }) {
  if (t.paused === "insufficient_credits")
    return (
      <span data-testid="trigger-state">
        <span className="badge badge-refused">paused: out of credits</span>{" "}
        <a href="#/billing">Add credits</a>
      </span>
    );
  return (
    <span data-testid="trigger-state" className={t.enabled ? "badge badge-succeeded" : "badge badge-refused"}>
      {t.enabled ? "enabled" : "disabled"}
    </span>
  );
}

function KeyName({ address, choices }: { address: string; choices: FormChoices | undefined }) {
  const k = choices?.keys.find((x) => x.id.toLowerCase() === address.toLowerCase());
  return (
    <>
      {k ? k.name || "unnamed" : <span className="muted">not a key of this account now</span>}
      <br />
      <code title={address}>{short(address)}</code>
    </>
  );
}

function TriggerList({
  session,
  choices,
  readOnly,
}: {
  session: Session;
  choices: FormChoices | undefined;
  readOnly: boolean;
}) {
  const { sigil } = session;
  const list = useLoad(async () => {
    const triggers = await collect(sigil.triggers.list());
    // Each trigger's newest run: one small read each (an account has at most 50 triggers).
    const last = await Promise.all(
      triggers.map(async (t) => (await runsPage(sigil, t.id, 0, "", 1)).items[0] ?? null),
    );
    return triggers.map((t, i) => ({ t, last: last[i] }));
  });
  return (
    <>
      {readOnly ? null : (
        <button type="button" className="primary" onClick={() => go("/new")}>
          New trigger
        </button>
      )}
      <DataTable
        rows={list.data}
        loading={list.loading}
        loadingWhat="triggers"
        errorNote={<ErrorNote error={list.error} />}
        empty="No triggers yet. A trigger runs an action on a schedule, a webhook or a chain event."
        caption="Triggers"
        testId="triggers-table"
        rowKey={({ t }) => t.id}
        rowAttributes={({ t }) => ({ "data-trigger-id": t.id })}
        columns={[
          { header: "Name", cell: ({ t }) => <a href={`#/triggers/${t.id}`}>{t.name}</a> },
          { header: "Kind", cell: ({ t }) => KIND_LABELS[t.kind] },
          { header: "Fired by", cell: ({ t }) => <FiresOn t={t} /> },
          { header: "Action", cell: ({ t }) => <code title={t.cid}>{short(t.cid, 8)}</code> },
          {
            header: "Runs as",
            cell: ({ t }) => <KeyName address={t.run_as.key_address} choices={choices} />,
          },
          { header: "State", cell: ({ t }) => <State t={t} /> },
          { header: "Last run", cell: ({ last }) => <LastRun last={last} /> },
        ]}
      />
    </>
  );
}

/** A trigger's newest run in the list: its status, and the error or skip reason that explains it. */
function LastRun({ last }: { last: TriggerRun | null }) {
  if (!last) return <span className="muted">never</span>;
  return (
    <>
      {last.status}
      {last.error && last.error.code !== last.skip_reason ? (
        <>
          {" "}
          <code>{last.error.code}</code>
        </>
      ) : null}
      {last.skip_reason ? (
        <>
          {" "}
          <code>{last.skip_reason}</code>
        </>
      ) : null}
    </>
  );
}

function TriggerDetail({
  session,
  id,
  choices,
  readOnly,
  onSecret,
}: {
  session: Session;
  id: string;
  choices: (FormChoices & { chainId: number }) | undefined;
  readOnly: boolean;
  onSecret: (s: { id: string; value: string }) => void;
}) {
  const { sigil } = session;
  const trigger = useLoad(() => sigil.triggers.get(id));
  const [editing, setEditing] = useState(false);
  const [runsKey, setRunsKey] = useState(0);
  const act = useAction();
  const save = useAction();
  const toast = useToast();
  const t = trigger.data;

  const after = (message: string) => (r: unknown) => {
    if (r === undefined) return;
    toast(message);
    trigger.reload();
  };

  return (
    <>
      <p>
        <a href="#/triggers">All triggers</a>
      </p>
      {trigger.loading && !t ? <Loading what="the trigger" /> : null}
      <ErrorNote error={trigger.error} />
      <ErrorNote error={act.error} />
      {t && editing && choices ? (
        <TriggerForm
          initial={formOf(t)}
          existing={t}
          choices={choices}
          pending={save.pending}
          error={save.error}
          onCancel={() => setEditing(false)}
          onSubmit={(body) =>
            void save
              .run(() => sigil.triggers.update(t.id, body))
              .then((u) => {
                if (!u) return;
                setEditing(false);
                toast(`Trigger “${u.name}” saved.`);
                trigger.reload();
                if (typeof u.webhook_secret === "string") onSecret({ id: u.id, value: u.webhook_secret });
              })
          }
        />
      ) : null}
      {t && !editing ? (
        <section className="card" aria-labelledby="trigger-title">
          <h2 id="trigger-title">{t.name}</h2>
          <dl className="result" data-testid="trigger-settings">
            <dt>Kind</dt>
            <dd>{KIND_LABELS[t.kind]}</dd>
            <dt>State</dt>
            <dd>
              <State t={t} />
            </dd>
            <dt>Fired by</dt>
            <dd>
              <FiresOn t={t} />
              {t.schedule ? (
                <> (after downtime: {t.schedule.missed === "skip" ? "skip" : "run the latest once"})</>
              ) : null}
              {t.chain_event ? (
                <>
                  <br />
                  topics:{" "}
                  {t.chain_event.topics.length
                    ? t.chain_event.topics.map((x) => x ?? "any").join(", ")
                    : "any"}
                  ; from block {t.chain_event.from_block}
                </>
              ) : null}
            </dd>
            <dt>Action</dt>
            <dd>
              <code>{t.cid}</code>
            </dd>
            <dt>PKPs</dt>
            <dd>{t.pkp_ids.length ? t.pkp_ids.map((p) => <code key={p}>{short(p)} </code>) : "none"}</dd>
            <dt>Runs as</dt>
            <dd>
              <KeyName address={t.run_as.key_address} choices={choices} />{" "}
              <small className="muted">(named by address; the service never holds the key)</small>
            </dd>
            <dt>Default js_params</dt>
            <dd>
              <pre className="code">{JSON.stringify(t.js_params, null, 2)}</pre>
            </dd>
            <dt>Limits</dt>
            <dd>
              {t.limits.runs_per_minute} runs a minute, {t.limits.max_queued_runs} queued at most,{" "}
              {t.limits.concurrency === "serial" ? "one at a time" : "overlapping"}; {t.retry.max_attempts}{" "}
              attempts, first retry after {t.retry.backoff_ms} ms
            </dd>
            <dt>Created</dt>
            <dd>{utc(t.created_at)}</dd>
          </dl>
          {readOnly ? null : (
            <div className="row wrap">
              <button type="button" className="small" disabled={!choices} onClick={() => setEditing(true)}>
                Edit
              </button>
              <button
                type="button"
                className="small"
                disabled={act.pending}
                onClick={() =>
                  void act
                    .run(() => (t.enabled ? sigil.triggers.disable(t.id) : sigil.triggers.enable(t.id)))
                    .then(after(t.enabled ? "Trigger disabled." : "Trigger enabled."))
                }
              >
                {t.enabled ? "Disable" : "Enable"}
              </button>
              <button
                type="button"
                className="small"
                disabled={act.pending}
                onClick={() =>
                  void act
                    .run(() => sigil.triggers.fire(t.id))
                    .then((r) => {
                      if (!r) return;
                      toast(`Fired: run ${r.run_id} queued.`);
                      setRunsKey((k) => k + 1);
                    })
                }
              >
                Fire now
              </button>
              <ConfirmButton
                label="Delete"
                question={`Delete trigger “${t.name}” and its run history? Its webhook URL stops answering.`}
                confirmLabel="Delete trigger"
                disabled={act.pending}
                onConfirm={() =>
                  void act
                    .run(() => sigil.triggers.remove(t.id))
                    .then((r) => {
                      if (!r) return;
                      toast(`Trigger “${t.name}” deleted.`);
                      go("");
                    })
                }
              />
            </div>
          )}
        </section>
      ) : null}
      {t ? <TriggerRuns sigil={sigil} triggerId={t.id} reloadKey={runsKey} /> : null}
    </>
  );
}
