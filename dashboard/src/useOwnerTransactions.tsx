/**
 * ChainSecured owner transactions, shared by every page that changes the account (Groups, Usage keys,
 * PKPs): whether changes are owner transactions at all, the previews waiting for the owner's wallet or
 * Safe, and their rendering. A sent transaction's preview goes away once the service has read its
 * block, so the reloaded page shows the change.
 */
import { useState } from "react";
import type { Session } from "./api";
import { TxPreview } from "./components/TxPreview";
import { ownerTx, waitForService, type OwnerTx } from "./wallet";

/** Where a ChainSecured account's owner transactions go. */
export interface ChainOwner {
  chainId: number;
  registry: string;
  address: string;
}

/**
 * The owner target when the account is ChainSecured and the session speaks for the owner (the account
 * key, which may only read then, or the owner signed in with a wallet); null otherwise.
 */
export async function chainOwnerOf(session: Session): Promise<ChainOwner | null> {
  if (session.kind === "usage") return null;
  const [account, config] = await Promise.all([session.sigil.account(), session.sigil.config()]);
  return account.mode === "chain_secured"
    ? { chainId: config.chain_id, registry: config.registry_address, address: account.owner_address }
    : null;
}

export function useOwnerTransactions(session: Session, owner: ChainOwner | null, onChanged: () => void) {
  const [previews, setPreviews] = useState<OwnerTx[]>([]);
  /** One registry call as an owner transaction (only while `owner` is set). */
  const tx = (title: string, functionName: string, args: unknown[]): OwnerTx =>
    ownerTx(title, owner!.chainId, owner!.registry, functionName, args);
  /** Shows these transactions as previews (replacing any shown). */
  const propose = (txs: OwnerTx[]) => setPreviews(txs);
  const view =
    owner && previews.length ? (
      <>
        {previews.map((tx) => (
          <TxPreview
            key={tx.data}
            tx={tx}
            owner={owner.address}
            onSent={async (_hash, blockNumber) => {
              await waitForService(session.sigil, blockNumber);
              setPreviews((p) => p.filter((x) => x !== tx));
              onChanged();
            }}
            onCancel={() => setPreviews((p) => p.filter((x) => x !== tx))}
          />
        ))}
      </>
    ) : null;
  return { tx, propose, view };
}
