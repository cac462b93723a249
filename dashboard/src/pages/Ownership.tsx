/**
 * Ownership transfer, step one of two: the account key proposes a new owner (a wallet or a Safe), which
 * becomes ChainSecured once that address accepts on chain. Until then the proposal can be cancelled.
 */
import { useState } from "react";
import type { Session } from "../api";
import { ConfirmButton, ErrorNote, Field, Loading } from "../components/ui";
import { TxPreview } from "../components/TxPreview";
import { useAction, useLoad } from "../useLoad";
import { isAddress } from "../validate";
import { ownerTx, waitForService, type OwnerTx } from "../wallet";

export function Ownership({ session }: { session: Session }) {
  const { sigil } = session;
  const account = useLoad(() => sigil.account());
  const [to, setTo] = useState("");
  const [toError, setToError] = useState<string | null>(null);
  const act = useAction();
  const [accept, setAccept] = useState<OwnerTx | null>(null);
  const [waiting, setWaiting] = useState(false);
  if (account.loading && !account.data) return <Loading what="the account" />;
  if (account.error) return <ErrorNote error={account.error} />;
  const a = account.data!;
  if (a.mode === "chain_secured")
    return (
      <p>
        This account is <strong data-testid="chain-secured">ChainSecured</strong>: its owner is{" "}
        <code>{a.owner_address}</code>, and owner-only changes (groups, the PKPs and actions in them) are
        transactions that address signs: the dashboard previews each one, then a browser wallet sends it or a
        Safe Transaction Builder file carries it to a Safe.
      </p>
    );
  return (
    <>
      <p>
        Current owner (managed by the service): <code>{a.owner_address}</code>
      </p>
      {a.pending_owner ? (
        <section className="card">
          <h2>Transfer pending</h2>
          <p>
            Waiting for <code data-testid="pending-owner">{a.pending_owner}</code> to accept (it calls{" "}
            <code>acceptOwnership</code> on the registry from that address).
          </p>
          <ConfirmButton
            label="Cancel transfer"
            question="Cancel the pending ownership transfer?"
            confirmLabel="Cancel transfer"
            disabled={act.pending}
            onConfirm={() =>
              void act
                .run(() => sigil.post("/core/v1/account/cancel_ownership_transfer"))
                .then((r) => r && account.reload())
            }
          />{" "}
          <button
            type="button"
            className="small"
            onClick={() =>
              void act.run(async () => {
                const c = await sigil.config();
                setAccept(
                  ownerTx("Accept ownership", c.chain_id, c.registry_address, "acceptOwnership", [
                    a.account_id,
                  ]),
                );
              })
            }
          >
            Accept as the new owner…
          </button>
          {accept ? (
            <TxPreview
              tx={accept}
              owner={a.pending_owner}
              onCancel={() => setAccept(null)}
              onSent={async (_hash, blockNumber) => {
                // The service sees the new owner once it has read the block.
                setWaiting(true);
                await waitForService(sigil, blockNumber);
                setWaiting(false);
                setAccept(null);
                account.reload();
              }}
            />
          ) : null}
          {waiting ? (
            <p role="status" aria-live="polite">
              Waiting for the service to see the new owner…
            </p>
          ) : null}
        </section>
      ) : (
        <form
          className="card"
          onSubmit={(e) => {
            e.preventDefault();
            if (!isAddress(to.trim())) {
              setToError("An Ethereum address: 0x and 40 hex digits.");
              return;
            }
            setToError(null);
            void act
              .run(() =>
                sigil.post("/core/v1/account/transfer_ownership", { body: { new_owner: to.trim() } }),
              )
              .then((r) => r && account.reload());
          }}
        >
          <h2>Transfer to a wallet or a Safe</h2>
          <p className="muted">
            Step one of two. After the new owner accepts, the account is ChainSecured: the service can no
            longer change it on your behalf.
          </p>
          <Field label="New owner address" error={toError}>
            {(p) => <input {...p} spellCheck={false} value={to} onChange={(e) => setTo(e.target.value)} />}
          </Field>
          <button type="submit" className="primary" disabled={act.pending}>
            Propose transfer
          </button>
        </form>
      )}
      <ErrorNote error={act.error} />
    </>
  );
}
