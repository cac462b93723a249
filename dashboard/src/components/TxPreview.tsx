import { useState } from "react";
import { decoded, injectedWallet, safeBatchFile, sendWithWallet, type OwnerTx } from "../wallet";
import { ErrorNote } from "./ui";
import { useAction } from "../useLoad";

/**
 * A transaction the owner signs, previewed before anything is signed: target, chain and the call
 * decoded from the exact calldata. Then a wallet sends it, or a Safe Transaction Builder file is saved.
 */
export function TxPreview({
  tx,
  owner,
  onSent,
  onCancel,
}: {
  tx: OwnerTx;
  owner: string;
  /** Called once the transaction is mined (with its block), before the preview says it was sent. */
  onSent: (hash: string, blockNumber: number) => Promise<void> | void;
  onCancel: () => void;
}) {
  const send = useAction();
  const [sent, setSent] = useState<string | null>(null);
  const wallet = injectedWallet();
  const download = () => {
    const url = URL.createObjectURL(new Blob([safeBatchFile(tx, owner)], { type: "application/json" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = `sigil-${tx.functionName}.json`;
    a.click();
    URL.revokeObjectURL(url);
  };
  return (
    <section className="card" aria-label="Transaction preview" data-testid="tx-preview">
      <h2>{tx.title}: transaction preview</h2>
      <p className="muted">This account is ChainSecured: the change is a transaction its owner signs.</p>
      <dl className="result">
        <dt>Target</dt>
        <dd>
          <code>{tx.to}</code> (Sigil registry)
        </dd>
        <dt>Chain</dt>
        <dd>{tx.chainId}</dd>
        <dt>From</dt>
        <dd>
          <code>{owner}</code>
        </dd>
        <dt>Call</dt>
        <dd>
          <code data-testid="tx-function">{tx.functionName}</code>
          <ul>
            {decoded(tx).map((a) => (
              <li key={a.name}>
                {a.name} ({a.type}): <code>{a.value}</code>
              </li>
            ))}
          </ul>
        </dd>
        <dt>Calldata</dt>
        <dd>
          {/* Focusable: long calldata scrolls, and a keyboard user must be able to scroll it too. */}
          <code className="calldata" tabIndex={0} aria-label="Calldata">
            {tx.data}
          </code>
        </dd>
      </dl>
      <div className="row">
        {wallet ? (
          <button
            type="button"
            className="primary"
            disabled={send.pending || sent !== null}
            onClick={() =>
              void send
                .run(async () => {
                  const r = await sendWithWallet(wallet, tx);
                  await onSent(r.hash, r.blockNumber);
                  return r;
                })
                .then((r) => r && setSent(r.hash))
            }
          >
            {send.pending ? "Waiting for the wallet…" : "Send with wallet"}
          </button>
        ) : (
          <span className="muted">No browser wallet found.</span>
        )}
        <button type="button" onClick={download}>
          Download Safe Transaction Builder file
        </button>
        <button type="button" onClick={onCancel}>
          Close
        </button>
      </div>
      {sent ? (
        <p role="status">
          Sent: <code>{sent}</code>
        </p>
      ) : null}
      <ErrorNote error={send.error} />
    </section>
  );
}
