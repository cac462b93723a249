import { useState } from "react";
import { collect, type Session } from "../api";
import { DataTable } from "../components/DataTable";
import { CopyButton, ErrorNote, Field, short } from "../components/ui";
import { useAction, useLoad } from "../useLoad";
import { useToast } from "../components/Toasts";
import { PkpChainKeys } from "../components/PkpChainKeys";
import { chainOwnerOf, useOwnerTransactions } from "../useOwnerTransactions";

export function Pkps({ session }: { session: Session }) {
  const { sigil } = session;
  // ChainSecured: the registry lets the owner create PKPs itself (createPkp), as an owner transaction.
  const owner = useLoad(() => chainOwnerOf(session));
  const list = useLoad(async () => {
    const [pkps, groups] = await Promise.all([collect(sigil.pkps()), collect(sigil.groups())]);
    // Which groups reference each PKP: the list answer has counts only, so read each group.
    const details = await Promise.all(groups.map((g) => sigil.group(g.group_id)));
    return pkps.map((p) => ({
      ...p,
      groups: details.filter((d) => d.pkps.some((x) => x.toLowerCase() === p.pkp_id.toLowerCase())),
    }));
  });
  const [name, setName] = useState("");
  const create = useAction();
  const [created, setCreated] = useState<string | null>(null);
  const toast = useToast();
  const ownerTxs = useOwnerTransactions(session, owner.data ?? null, list.reload);

  return (
    <>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (owner.data) {
            ownerTxs.propose([ownerTxs.tx(`Create PKP ${name.trim()}`, "createPkp", [name.trim(), ""])]);
            setName("");
            return;
          }
          void create
            .run(() => sigil.createPkp(name.trim() ? { name: name.trim() } : {}))
            .then((r) => {
              if (!r) return;
              setCreated(r.pkp_id);
              toast(`PKP “${r.name || "unnamed"}” created.`);
              setName("");
              list.reload();
            });
        }}
      >
        <Field label="New PKP name" hint="Optional">
          {(p) => <input {...p} value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <button type="submit" className="primary" disabled={create.pending || owner.loading}>
          {create.pending
            ? "Creating… (waiting for the chain)"
            : owner.data
              ? "Prepare owner transaction"
              : "Create PKP"}
        </button>
      </form>
      {ownerTxs.view}
      <ErrorNote error={create.error} />
      {created ? (
        <p role="status">
          Created PKP <code>{short(created)}</code>.
        </p>
      ) : null}
      <DataTable
        rows={list.data}
        loading={list.loading}
        loadingWhat="PKPs"
        errorNote={<ErrorNote error={list.error} />}
        empty="No PKPs yet: create one above."
        caption="PKPs"
        rowKey={(p) => p.pkp_id}
        rowAttributes={(p) => ({ "data-pkp-id": p.pkp_id, "data-address": p.address })}
        columns={[
          { header: "Name", cell: (p) => p.name || <span className="muted">unnamed</span> },
          {
            header: "PKP id",
            cell: (p) => (
              <>
                <code title={p.pkp_id}>{short(p.pkp_id)}</code>{" "}
                <CopyButton value={p.pkp_id} label={`id of ${p.name || "PKP"}`} />
              </>
            ),
          },
          {
            header: "Address",
            cell: (p) => (
              <>
                <code title={p.address}>{short(p.address)}</code>{" "}
                <CopyButton value={p.address} label={`address of ${p.name || "PKP"}`} />
              </>
            ),
          },
          {
            header: "Public key",
            cell: (p) => (
              <>
                <code title={p.public_key}>{short(p.public_key)}</code>{" "}
                <CopyButton value={p.public_key} label={`public key of ${p.name || "PKP"}`} />
              </>
            ),
          },
          { header: "Solana and Bitcoin", cell: (p) => <PkpChainKeys pkp={p} /> },
          {
            header: "Groups",
            cell: (p) =>
              p.groups.length ? (
                p.groups.map((g) => g.name || `#${g.group_id}`).join(", ")
              ) : (
                <span className="muted">none</span>
              ),
          },
        ]}
      />
    </>
  );
}
