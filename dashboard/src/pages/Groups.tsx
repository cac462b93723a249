import { useState } from "react";
import { collect, listPinnedActions, type PinnedAction, type Session } from "../api";
import { DataTable } from "../components/DataTable";
import { ConfirmButton, Empty, ErrorNote, Field, Loading, short } from "../components/ui";
import { useToast } from "../components/Toasts";
import { useAction, useLoad } from "../useLoad";
import { isCid } from "../validate";
import { ownerTx, type OwnerTx } from "../wallet";
import { chainOwnerOf, useOwnerTransactions, type ChainOwner } from "../useOwnerTransactions";
import { GroupPolicy } from "../components/GroupPolicy";

type Pkp = { pkp_id: string; name: string; address: string };

/** One CID per line (or separated by spaces/commas); the first bad one is named. */
function parseCids(text: string): { cids: string[]; error: string | null } {
  const cids = text.split(/[\s,]+/).filter(Boolean);
  const bad = cids.find((c) => !isCid(c));
  return { cids, error: bad ? `"${bad.slice(0, 80)}" is not a CID (Qm… or b…).` : null };
}

function PkpPicker({
  pkps,
  chosen,
  onChange,
  legend,
}: {
  pkps: Pkp[];
  chosen: string[];
  onChange: (ids: string[]) => void;
  legend: string;
}) {
  if (pkps.length === 0) return <Empty>No PKPs in this account yet.</Empty>;
  return (
    <fieldset>
      <legend>{legend}</legend>
      {pkps.map((p) => (
        <label key={p.pkp_id} className="check">
          <input
            type="checkbox"
            checked={chosen.includes(p.pkp_id)}
            onChange={(e) =>
              onChange(e.target.checked ? [...chosen, p.pkp_id] : chosen.filter((x) => x !== p.pkp_id))
            }
          />
          {p.name || "unnamed"} <code>{short(p.address)}</code>
        </label>
      ))}
    </fieldset>
  );
}

/** The account's pinned actions, to tick: the page knows them, nobody should have to paste a CID. */
function ActionPicker({
  pinned,
  chosen,
  onChange,
  legend,
}: {
  pinned: PinnedAction[];
  chosen: string[];
  onChange: (cids: string[]) => void;
  legend: string;
}) {
  if (pinned.length === 0)
    return <Empty>No pinned actions yet: pin one on the Actions page, or paste a CID below.</Empty>;
  return (
    <fieldset>
      <legend>{legend}</legend>
      {pinned.map((a) => (
        <label key={a.cid} className="check">
          <input
            type="checkbox"
            checked={chosen.includes(a.cid)}
            onChange={(e) =>
              onChange(e.target.checked ? [...chosen, a.cid] : chosen.filter((x) => x !== a.cid))
            }
          />
          <code title={a.cid}>{short(a.cid, 10)}</code>
          <span className="muted">
            {a.bytes} bytes · pinned {a.pinned_at.slice(0, 10)}
          </span>
        </label>
      ))}
    </fieldset>
  );
}

/** CIDs not pinned here, one per line (checked by the form before anything is sent). */
function CidListField(props: { value: string; onChange: (text: string) => void; error: string | null }) {
  return (
    <Field
      label="Other action CIDs"
      hint="One per line: actions not pinned on this service (fetched from IPFS when run)"
      error={props.error}
    >
      {(p) => (
        <textarea
          {...p}
          rows={3}
          spellCheck={false}
          value={props.value}
          onChange={(e) => props.onChange(e.target.value)}
        />
      )}
    </Field>
  );
}

export function Groups({ session }: { session: Session }) {
  const { sigil } = session;
  const data = useLoad(async () => {
    const [groups, pkps, owner, pinned, chainId] = await Promise.all([
      collect(sigil.groups()),
      collect(sigil.pkps()),
      // ChainSecured: the account key may read, but only the owner's own transactions change the account.
      chainOwnerOf(session),
      // A key that may not list pins gets no picker, only the free-text field.
      listPinnedActions(sigil, 0, 100).then(
        (r) => r.items,
        () => [] as PinnedAction[],
      ),
      // The chain the policy editor's examples name (a key that may not read the config gets mainnet's).
      sigil.config().then(
        (c) => c.chain_id,
        () => 1,
      ),
    ]);
    return { groups, pkps, owner, pinned, chainId };
  });
  const toast = useToast();
  const [name, setName] = useState("");
  const [nameError, setNameError] = useState<string | null>(null);
  const [pkpIds, setPkpIds] = useState<string[]>([]);
  const [pinnedCids, setPinnedCids] = useState<string[]>([]);
  const [cidText, setCidText] = useState("");
  const [cidError, setCidError] = useState<string | null>(null);
  const create = useAction();
  const remove = useAction();
  const [editing, setEditing] = useState<number | null>(null);
  const owner = data.data?.owner ?? null;
  const { propose, view: previews } = useOwnerTransactions(session, owner, data.reload);

  return (
    <>
      {data.loading && !data.data ? <Loading what="groups" /> : null}
      <ErrorNote error={data.error} />
      {data.data ? (
        <details className="card" open={data.data.groups.length === 0}>
          <summary>Create a group</summary>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              const parsed = parseCids(cidText);
              setCidError(parsed.error);
              setNameError(name.trim() ? null : "Give the group a name (you will pick it by name later).");
              if (parsed.error || !name.trim()) return;
              const cids = [...new Set([...pinnedCids, ...parsed.cids])];
              if (owner) {
                const args = [name.trim(), "", pkpIds, cids];
                propose([
                  ownerTx(`Create group ${name.trim()}`, owner.chainId, owner.registry, "createGroup", args),
                ]);
                return;
              }
              void create
                .run(() => sigil.createGroup({ name: name.trim(), pkps: pkpIds, actions: cids }))
                .then((r) => {
                  if (!r) return;
                  toast(`Group “${name.trim()}” created (id ${r.group_id}).`);
                  setName("");
                  setPkpIds([]);
                  setPinnedCids([]);
                  setCidText("");
                  data.reload();
                });
            }}
          >
            <Field label="Group name" error={nameError}>
              {(p) => <input {...p} value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />}
            </Field>
            <PkpPicker
              legend="PKPs in the group"
              pkps={data.data.pkps}
              chosen={pkpIds}
              onChange={setPkpIds}
            />
            <ActionPicker
              legend="Pinned actions in the group"
              pinned={data.data.pinned}
              chosen={pinnedCids}
              onChange={setPinnedCids}
            />
            <CidListField value={cidText} onChange={setCidText} error={cidError} />
            <button type="submit" className="primary" disabled={create.pending}>
              {create.pending ? "Creating… (waiting for the chain)" : "Create group"}
            </button>
            <ErrorNote error={create.error} />
          </form>
        </details>
      ) : null}
      <ErrorNote error={remove.error} />
      <DataTable
        rows={data.data?.groups}
        empty="No groups yet."
        caption="Groups"
        rowKey={(g) => g.group_id}
        rowAttributes={(g) => ({ "data-group-id": g.group_id })}
        columns={[
          { header: "Id", cell: (g) => g.group_id },
          { header: "Name", cell: (g) => g.name || <span className="muted">unnamed</span> },
          { header: "PKPs", cell: (g) => g.pkp_count },
          { header: "Actions", cell: (g) => g.action_count },
          {
            header: "Policy",
            cellAttributes: (g) => ({ "data-policy-cid": g.policy_cid ?? "" }),
            cell: (g) =>
              g.policy_cid ? (
                <code title={g.policy_cid}>{short(g.policy_cid, 10)}</code>
              ) : (
                <span className="muted">none</span>
              ),
          },
          {
            header: "Operations",
            srOnlyHeader: true,
            unlabelled: true,
            className: "row",
            cell: (g) => (
              <>
                <button
                  type="button"
                  className="small"
                  onClick={() => setEditing(editing === g.group_id ? null : g.group_id)}
                >
                  {editing === g.group_id ? "Close" : "Edit"}
                </button>
                <ConfirmButton
                  label="Delete"
                  question={`Delete group ${g.name || g.group_id}? Keys that execute in it lose that right.`}
                  confirmLabel="Delete group"
                  disabled={remove.pending}
                  onConfirm={() =>
                    owner
                      ? propose([
                          ownerTx(
                            `Delete group ${g.name || g.group_id}`,
                            owner.chainId,
                            owner.registry,
                            "deleteGroup",
                            [g.group_id],
                          ),
                        ])
                      : void remove
                          .run(() => sigil.deleteGroup(g.group_id))
                          .then((r) => {
                            if (!r) return;
                            toast(`Group “${g.name || g.group_id}” deleted.`);
                            data.reload();
                          })
                  }
                />
              </>
            ),
          },
        ]}
      />
      {editing !== null && data.data ? (
        <GroupEditor
          // A new policy (an owner transaction the list reload saw) remounts the editor with it.
          key={`${editing}:${data.data.groups.find((g) => g.group_id === editing)?.policy_cid ?? ""}`}
          session={session}
          groupId={editing}
          pkps={data.data.pkps}
          pinned={data.data.pinned}
          onChanged={data.reload}
          owner={owner}
          propose={propose}
          chainId={data.data.chainId}
        />
      ) : null}
      {previews}
    </>
  );
}

/** Edits one group's PKPs and CIDs: the difference from what it holds is sent as add/remove. */
function GroupEditor({
  session,
  groupId,
  pkps,
  pinned,
  onChanged,
  owner,
  propose,
  chainId,
}: {
  session: Session;
  groupId: number;
  pkps: Pkp[];
  pinned: PinnedAction[];
  onChanged: () => void;
  owner: ChainOwner | null;
  propose: (txs: OwnerTx[]) => void;
  chainId: number;
}) {
  const { sigil } = session;
  const group = useLoad(() => sigil.group(groupId));
  const [pkpIds, setPkpIds] = useState<string[] | null>(null);
  const [pinnedCids, setPinnedCids] = useState<string[] | null>(null);
  const [cidText, setCidText] = useState<string | null>(null);
  const [cidError, setCidError] = useState<string | null>(null);
  const save = useAction();
  const toast = useToast();
  if (group.loading && !group.data) return <Loading what={`group ${groupId}`} />;
  if (group.error) return <ErrorNote error={group.error} />;
  const g = group.data!;
  const lower = (xs: string[]) => xs.map((x) => x.toLowerCase());
  const currentPkps =
    pkpIds ?? pkps.filter((p) => lower(g.pkps).includes(p.pkp_id.toLowerCase())).map((p) => p.pkp_id);
  const pinnedSet = new Set(pinned.map((a) => a.cid));
  const currentPinned = pinnedCids ?? g.actions.filter((c) => pinnedSet.has(c));
  const currentCids = cidText ?? g.actions.filter((c) => !pinnedSet.has(c)).join("\n");
  return (
    <section className="card" aria-label={`Edit group ${groupId}`}>
      <h2>Edit group {g.name || groupId}</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const parsed = parseCids(currentCids);
          setCidError(parsed.error);
          if (parsed.error) return;
          const cids = [...new Set([...currentPinned, ...parsed.cids])];
          const had = lower(g.pkps);
          const want = lower(currentPkps);
          const addPkps = currentPkps.filter((p) => !had.includes(p.toLowerCase()));
          const removePkps = g.pkps.filter((p) => !want.includes(p.toLowerCase()));
          const addCids = cids.filter((c) => !g.actions.includes(c));
          const removeCids = g.actions.filter((c) => !cids.includes(c));
          if (owner) {
            const calls: Array<[string, string[]]> = [
              ["addPkps", addPkps],
              ["removePkps", removePkps],
              ["addActions", addCids],
              ["removeActions", removeCids],
            ];
            const title = `Edit group ${g.name || groupId}`;
            propose(
              calls
                .filter(([, list]) => list.length)
                .map(([fn, list]) =>
                  ownerTx(`${title}: ${fn}`, owner.chainId, owner.registry, fn, [groupId, list]),
                ),
            );
            return;
          }
          void save
            .run(async () => {
              if (addPkps.length || removePkps.length)
                await sigil.updateGroupPkps(groupId, { add: addPkps, remove: removePkps });
              if (addCids.length || removeCids.length)
                await sigil.updateGroupActions(groupId, { add: addCids, remove: removeCids });
              return true;
            })
            .then((ok) => {
              if (!ok) return;
              toast(`Group “${g.name || groupId}” saved.`);
              setPinnedCids(null);
              setPkpIds(null);
              setCidText(null);
              group.reload();
              onChanged();
            });
        }}
      >
        <PkpPicker
          legend="PKPs in the group (from this account)"
          pkps={pkps}
          chosen={currentPkps}
          onChange={setPkpIds}
        />
        <ActionPicker
          legend="Pinned actions in the group"
          pinned={pinned}
          chosen={currentPinned}
          onChange={setPinnedCids}
        />
        <CidListField value={currentCids} onChange={setCidText} error={cidError} />
        <button type="submit" className="primary" disabled={save.pending}>
          {save.pending ? "Saving…" : "Save changes"}
        </button>
        <ErrorNote error={save.error} />
      </form>
      <GroupPolicy
        key={g.policy_cid ?? "none"}
        session={session}
        groupId={groupId}
        groupName={g.name}
        policyCid={g.policy_cid ?? null}
        chainId={chainId}
        owner={owner}
        propose={propose}
        onChanged={() => {
          group.reload();
          onChanged();
        }}
      />
    </section>
  );
}
