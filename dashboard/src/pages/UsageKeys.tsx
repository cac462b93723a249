import { useRef, useState } from "react";
import { Wallet, keccak256, toUtf8Bytes } from "ethers";
import { chainOwnerOf, useOwnerTransactions } from "../useOwnerTransactions";
import { collect, type Session } from "../api";
import { ConfirmButton, ErrorNote, Field, Loading, ShownOnce, short } from "../components/ui";
import { ScopeEditor } from "../components/ScopeEditor";
import { DataTable } from "../components/DataTable";
import { emptyScopes, grantsAnything, scopeSummary, scopesOf, type Scopes } from "../scopes";
import { useToast } from "../components/Toasts";
import { CopyButton } from "../components/ui";
import { useAction, useLoad } from "../useLoad";

interface Limits {
  expiration: string; // yyyy-mm-dd or ""
  spendCap: string; // cents or ""
}

/** The form's limits as the API wants them, or the inline error of the first bad one. */
function parseLimits(
  l: Limits,
):
  | { ok: true; expiration: number | null; spend_cap_cents: number | null }
  | { ok: false; field: keyof Limits; error: string } {
  let expiration: number | null = null;
  if (l.expiration) {
    const t = Date.parse(`${l.expiration}T23:59:59Z`);
    if (Number.isNaN(t)) return { ok: false, field: "expiration", error: "Not a date." };
    if (t <= Date.now())
      return { ok: false, field: "expiration", error: "The expiration must be in the future." };
    expiration = Math.floor(t / 1000);
  }
  let spend_cap_cents: number | null = null;
  if (l.spendCap.trim()) {
    if (!/^\d{1,9}$/.test(l.spendCap.trim()))
      return { ok: false, field: "spendCap", error: "A whole number of cents, e.g. 500." };
    spend_cap_cents = Number(l.spendCap.trim());
  }
  return { ok: true, expiration, spend_cap_cents };
}

function toBody(s: Scopes) {
  return { ...s.flags, ...s.groups };
}

/** The registry's KeyScopes tuple, in its field order. */
function scopesTuple(s: Scopes) {
  return [
    s.flags.can_create_groups,
    s.flags.can_delete_groups,
    s.flags.can_create_pkps,
    s.groups.manage_ipfs_ids_in_groups,
    s.groups.add_pkp_to_groups,
    s.groups.remove_pkp_from_groups,
    s.groups.execute_in_groups,
  ];
}

/**
 * A new usage key made in this page (a usage key is a secp256k1 key pair): the owner's transaction
 * registers its address and the keccak256 of its string, as the service does for keys it makes.
 */
function newLocalUsageKey(): { apiKey: string; address: string; keyHash: string } {
  const wallet = Wallet.createRandom();
  const apiKey = "uk_" + wallet.privateKey.slice(2);
  return { apiKey, address: wallet.address, keyHash: keccak256(toUtf8Bytes(apiKey)) };
}

function LimitsFields({
  value,
  onChange,
  errors,
}: {
  value: Limits;
  onChange: (l: Limits) => void;
  errors: Partial<Record<keyof Limits, string>>;
}) {
  return (
    <div className="row wrap">
      <Field label="Expires on" hint="Empty: never" error={errors.expiration}>
        {(p) => (
          <input
            {...p}
            type="date"
            value={value.expiration}
            onChange={(e) => onChange({ ...value, expiration: e.target.value })}
          />
        )}
      </Field>
      <Field label="Spend cap (cents)" hint="Empty: no cap" error={errors.spendCap}>
        {(p) => (
          <input
            {...p}
            inputMode="numeric"
            value={value.spendCap}
            onChange={(e) => onChange({ ...value, spendCap: e.target.value })}
          />
        )}
      </Field>
    </div>
  );
}

export function UsageKeys({ session }: { session: Session }) {
  const { sigil } = session;
  const data = useLoad(async () => {
    const [keys, groups, owner] = await Promise.all([
      collect(sigil.usageKeys()),
      collect(sigil.groups()),
      chainOwnerOf(session),
    ]);
    return { keys, groups, owner };
  });
  const owner = data.data?.owner ?? null;
  // A key made here waits for its owner transaction; it is shown once that transaction is mined.
  const awaitingKey = useRef<string | null>(null);
  const ownerTxs = useOwnerTransactions(session, owner, () => {
    data.reload();
    if (awaitingKey.current) setShown(awaitingKey.current);
    awaitingKey.current = null;
  });
  const [shown, setShown] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<string | null>(null);
  const revoke = useAction();
  const toast = useToast();
  const names = new Map((data.data?.groups ?? []).map((g) => [g.group_id, g.name] as const));

  if (shown) return <ShownOnce title="Your new usage key" value={shown} onDone={() => setShown(null)} />;
  return (
    <>
      {data.loading && !data.data ? <Loading what="usage keys" /> : null}
      <ErrorNote error={data.error} />
      <ErrorNote error={revoke.error} />
      {data.data ? (
        creating ? (
          <KeyForm
            mode="create"
            groups={data.data.groups}
            onCancel={() => setCreating(false)}
            owner={owner !== null}
            onSubmit={async (name, scopes, limits) => {
              if (owner) {
                const k = newLocalUsageKey();
                awaitingKey.current = k.apiKey;
                setCreating(false);
                ownerTxs.propose([
                  ownerTxs.tx(`Add usage key ${name}`, "addKey", [
                    k.address,
                    k.keyHash,
                    name,
                    "",
                    limits.expiration ?? 0,
                    scopesTuple(scopes),
                  ]),
                ]);
                return;
              }
              const r = await sigil.addUsageKey({ name, ...toBody(scopes), ...limits });
              setCreating(false);
              toast(`Usage key “${name}” created.`);
              data.reload();
              if (typeof r.usage_api_key === "string") setShown(r.usage_api_key);
            }}
          />
        ) : (
          <button type="button" className="primary" onClick={() => setCreating(true)}>
            New usage key
          </button>
        )
      ) : null}
      <DataTable
        rows={data.data?.keys}
        empty="No usage keys yet. A usage key is what you give a server."
        caption="Usage keys"
        rowKey={(k) => k.id}
        rowAttributes={(k) => ({ "data-key-id": k.id })}
        columns={[
          { header: "Name", cell: (k) => k.name || <span className="muted">unnamed</span> },
          {
            header: "Id",
            cell: (k) => (
              <>
                <code title={k.id}>{short(k.id)}</code>{" "}
                <CopyButton value={k.id} label={`id of ${k.name || "key"}`} />
              </>
            ),
          },
          {
            header: "Permissions",
            cellAttributes: () => ({ "data-testid": "scope-summary" }),
            cell: (k) => scopeSummary(scopesOf(k), names),
          },
          {
            header: "Expires",
            cell: (k) => (k.expiration ? new Date(k.expiration * 1000).toISOString().slice(0, 10) : "never"),
          },
          {
            header: "Spent / cap",
            cell: (k) =>
              `${k.spent_cents ?? 0}¢ / ${k.spend_cap_cents === null ? "no cap" : `${k.spend_cap_cents}¢`}`,
          },
          {
            header: "Operations",
            srOnlyHeader: true,
            unlabelled: true,
            className: "row",
            cell: (k) => (
              <>
                <button
                  type="button"
                  className="small"
                  onClick={() => setEditing(editing === k.id ? null : k.id)}
                >
                  {editing === k.id ? "Close" : "Edit"}
                </button>
                <ConfirmButton
                  label="Revoke"
                  question={`Revoke ${k.name || k.id}? Every request made with it fails from now on.`}
                  confirmLabel="Revoke key"
                  disabled={revoke.pending}
                  onConfirm={() =>
                    owner
                      ? ownerTxs.propose([ownerTxs.tx(`Revoke ${k.name || k.id}`, "removeKey", [k.id])])
                      : void revoke
                          .run(() => sigil.removeUsageKey({ id: k.id }))
                          .then((r) => {
                            if (!r) return;
                            toast(`Usage key “${k.name || short(k.id)}” revoked.`);
                            data.reload();
                          })
                  }
                />
              </>
            ),
          },
        ]}
      />
      {ownerTxs.view}
      {editing && data.data
        ? (() => {
            const k = data.data.keys.find((x) => x.id === editing);
            if (!k) return null;
            return (
              <KeyForm
                key={k.id}
                mode="edit"
                groups={data.data.groups}
                initial={{
                  name: k.name,
                  scopes: scopesOf(k),
                  limits: {
                    expiration: k.expiration ? new Date(k.expiration * 1000).toISOString().slice(0, 10) : "",
                    spendCap: k.spend_cap_cents === null ? "" : String(k.spend_cap_cents),
                  },
                }}
                onCancel={() => setEditing(null)}
                owner={owner !== null}
                onRename={async (name) => {
                  if (owner) {
                    setEditing(null);
                    ownerTxs.propose([
                      ownerTxs.tx(`Rename ${k.name || k.id}`, "updateKeyMetadata", [
                        k.id,
                        name,
                        k.description ?? "",
                      ]),
                    ]);
                    return;
                  }
                  await sigil.post("/core/v1/update_usage_api_key_metadata", { body: { id: k.id, name } });
                  setEditing(null);
                  toast(`Usage key renamed to “${name}”.`);
                  data.reload();
                }}
                onSubmit={async (name, scopes, limits) => {
                  if (owner) {
                    setEditing(null);
                    ownerTxs.propose([
                      ownerTxs.tx(`Update ${k.name || k.id}`, "updateKey", [
                        k.id,
                        name,
                        k.description ?? "",
                        limits.expiration ?? 0,
                        scopesTuple(scopes),
                      ]),
                    ]);
                    return;
                  }
                  await sigil.updateUsageKey({ id: k.id, name, ...toBody(scopes), ...limits });
                  setEditing(null);
                  toast(`Usage key “${name}” saved.`);
                  data.reload();
                }}
              />
            );
          })()
        : null}
    </>
  );
}

function KeyForm({
  mode,
  groups,
  initial,
  onSubmit,
  onRename,
  onCancel,
  owner = false,
}: {
  /** ChainSecured: the change becomes an owner transaction (previewed first). */
  owner?: boolean;
  mode: "create" | "edit";
  groups: { group_id: number; name: string }[];
  initial?: { name: string; scopes: Scopes; limits: Limits };
  onSubmit: (
    name: string,
    s: Scopes,
    l: { expiration: number | null; spend_cap_cents: number | null },
  ) => Promise<void>;
  onRename?: (name: string) => Promise<void>;
  onCancel: () => void;
}) {
  const [name, setName] = useState(initial?.name ?? "");
  const [scopes, setScopes] = useState<Scopes>(initial?.scopes ?? emptyScopes());
  const [limits, setLimits] = useState<Limits>(initial?.limits ?? { expiration: "", spendCap: "" });
  const [errors, setErrors] = useState<Partial<Record<keyof Limits | "name" | "scopes", string>>>({});
  const [noPermissions, setNoPermissions] = useState(false);
  const save = useAction();
  const names = new Map(groups.map((g) => [g.group_id, g.name] as const));
  return (
    <section className="card" aria-label={mode === "create" ? "New usage key" : "Edit usage key"}>
      <h2>{mode === "create" ? "New usage key" : `Edit ${initial?.name || "usage key"}`}</h2>
      {mode === "edit" ? (
        <p className="warning">
          Saving permissions <strong>replaces every permission</strong> of this key with what is ticked below;
          nothing is merged. To change only the name, use “Rename only”.
        </p>
      ) : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const l = parseLimits(limits);
          const next: typeof errors = l.ok ? {} : { [l.field]: l.error };
          if (!name.trim()) next.name = "Give the key a name: it is how you will recognise it in this list.";
          if (!grantsAnything(scopes) && !noPermissions)
            next.scopes =
              "Tick at least one permission (a server that runs actions needs “Execute in” a group), or confirm below that this key gets none.";
          setErrors(next);
          if (!l.ok || Object.keys(next).length) return;
          void save.run(() =>
            onSubmit(name.trim(), scopes, { expiration: l.expiration, spend_cap_cents: l.spend_cap_cents }),
          );
        }}
      >
        <Field label="Key name" error={errors.name}>
          {(p) => <input {...p} value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <ScopeEditor value={scopes} onChange={setScopes} groups={groups} />
        <p className="muted">Summary: {scopeSummary(scopes, names)}</p>
        {errors.scopes && !grantsAnything(scopes) ? (
          <div className="field">
            <p className="field-error" role="alert">
              {errors.scopes}
            </p>
            <label className="check">
              <input
                type="checkbox"
                checked={noPermissions}
                onChange={(e) => setNoPermissions(e.target.checked)}
              />
              Yes, no permissions: this key may only read
            </label>
          </div>
        ) : null}
        {owner ? (
          <p className="muted">
            This account is ChainSecured: saving prepares a transaction for the owner&apos;s wallet or Safe
            {mode === "create"
              ? "; the key is made in this page and shown once the transaction is mined"
              : ""}
            . A spend cap is the service&apos;s setting, not the registry&apos;s: set it with the account key.
          </p>
        ) : null}
        <LimitsFields value={limits} onChange={setLimits} errors={errors} />
        <div className="row">
          <button type="submit" className="primary" disabled={save.pending}>
            {save.pending
              ? "Saving…"
              : owner
                ? "Prepare owner transaction"
                : mode === "create"
                  ? "Create key"
                  : "Replace permissions"}
          </button>
          {onRename ? (
            <button
              type="button"
              disabled={save.pending}
              onClick={() => void save.run(() => onRename(name.trim()))}
            >
              Rename only
            </button>
          ) : null}
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        </div>
        <ErrorNote error={save.error} />
      </form>
    </section>
  );
}
