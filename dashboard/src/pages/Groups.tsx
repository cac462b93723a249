import { useState } from "react";
import { collect, type Session } from "../api";
import { ConfirmButton, Empty, ErrorNote, Field, Loading, short } from "../components/ui";
import { useAction, useLoad } from "../useLoad";
import { isCid } from "../validate";
import { ownerTx, type OwnerTx } from "../wallet";
import { chainOwnerOf, useOwnerTransactions, type ChainOwner } from "../useOwnerTransactions";

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

/** The group's action CIDs, one per line (checked by the form before anything is sent). */
function CidListField(props: { value: string; onChange: (text: string) => void; error: string | null }) {
  return (
    <Field label="Action CIDs" hint="One per line" error={props.error}>
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
    const [groups, pkps, owner] = await Promise.all([
      collect(sigil.groups()),
      collect(sigil.pkps()),
      // ChainSecured: the account key may read, but only the owner's own transactions change the account.
      chainOwnerOf(session),
    ]);
    return { groups, pkps, owner };
  });
  const [name, setName] = useState("");
  const [pkpIds, setPkpIds] = useState<string[]>([]);
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
              const { cids, error } = parseCids(cidText);
              setCidError(error);
              if (error) return;
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
                  setName("");
                  setPkpIds([]);
                  setCidText("");
                  data.reload();
                });
            }}
          >
            <Field label="Group name">
              {(p) => <input {...p} value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />}
            </Field>
            <PkpPicker
              legend="PKPs in the group"
              pkps={data.data.pkps}
              chosen={pkpIds}
              onChange={setPkpIds}
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
      {data.data && data.data.groups.length === 0 ? <Empty>No groups yet.</Empty> : null}
      {data.data && data.data.groups.length > 0 ? (
        <table>
          <caption className="sr-only">Groups</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Name</th>
              <th scope="col">PKPs</th>
              <th scope="col">Actions</th>
              <th scope="col">
                <span className="sr-only">Operations</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {data.data.groups.map((g) => (
              <tr key={g.group_id} data-group-id={g.group_id}>
                <td>{g.group_id}</td>
                <td>{g.name || <span className="muted">unnamed</span>}</td>
                <td>{g.pkp_count}</td>
                <td>{g.action_count}</td>
                <td className="row">
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
                        : void remove.run(() => sigil.deleteGroup(g.group_id)).then((r) => r && data.reload())
                    }
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {editing !== null && data.data ? (
        <GroupEditor
          key={editing}
          session={session}
          groupId={editing}
          pkps={data.data.pkps}
          onChanged={data.reload}
          owner={owner}
          propose={propose}
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
  onChanged,
  owner,
  propose,
}: {
  session: Session;
  groupId: number;
  pkps: Pkp[];
  onChanged: () => void;
  owner: ChainOwner | null;
  propose: (txs: OwnerTx[]) => void;
}) {
  const { sigil } = session;
  const group = useLoad(() => sigil.group(groupId));
  const [pkpIds, setPkpIds] = useState<string[] | null>(null);
  const [cidText, setCidText] = useState<string | null>(null);
  const [cidError, setCidError] = useState<string | null>(null);
  const save = useAction();
  if (group.loading && !group.data) return <Loading what={`group ${groupId}`} />;
  if (group.error) return <ErrorNote error={group.error} />;
  const g = group.data!;
  const lower = (xs: string[]) => xs.map((x) => x.toLowerCase());
  const currentPkps =
    pkpIds ?? pkps.filter((p) => lower(g.pkps).includes(p.pkp_id.toLowerCase())).map((p) => p.pkp_id);
  const currentCids = cidText ?? g.actions.join("\n");
  return (
    <section className="card" aria-label={`Edit group ${groupId}`}>
      <h2>Edit group {g.name || groupId}</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const { cids, error } = parseCids(currentCids);
          setCidError(error);
          if (error) return;
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
        <CidListField value={currentCids} onChange={setCidText} error={cidError} />
        <button type="submit" className="primary" disabled={save.pending}>
          {save.pending ? "Saving…" : "Save changes"}
        </button>
        <ErrorNote error={save.error} />
      </form>
    </section>
  );
}
