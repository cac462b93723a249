import { billingApi, type Session } from "../api";
import { ErrorNote, Loading } from "../components/ui";
import { useLoad } from "../useLoad";

export function Overview({ session }: { session: Session }) {
  const account = useLoad(() => session.sigil.account());
  // Billing belongs to the account key; a usage key never asks for it.
  const balance = useLoad(() =>
    session.kind !== "usage" ? billingApi(session.sigil).balance() : Promise.resolve(null),
  );
  if (account.loading && !account.data) return <Loading what="the account" />;
  if (account.error) return <ErrorNote error={account.error} />;
  const a = account.data!;
  const mode =
    a.pending_owner !== null ? "transfer pending" : a.mode === "chain_secured" ? "ChainSecured" : "API";
  return (
    <>
      <dl className="stats">
        <div>
          <dt>Account</dt>
          <dd>
            {a.name || `#${a.account_id}`} <span className="muted">#{a.account_id}</span>
          </dd>
        </div>
        <div>
          <dt>Mode</dt>
          <dd data-testid="mode">{mode}</dd>
        </div>
        {session.kind !== "usage" ? (
          <div>
            <dt>Balance</dt>
            <dd data-testid="balance">{balance.data ? balance.data.balance_display : "…"}</dd>
          </div>
        ) : null}
        <div>
          <dt>PKPs</dt>
          <dd>{a.pkp_count}</dd>
        </div>
        <div>
          <dt>Groups</dt>
          <dd>{a.group_count}</dd>
        </div>
        <div>
          <dt>Usage keys</dt>
          <dd>{a.usage_key_count}</dd>
        </div>
      </dl>
      <ErrorNote error={balance.error} />
      {a.pending_owner ? (
        <p>
          Ownership transfer to <code>{a.pending_owner}</code> is pending: the new owner accepts it from that
          address.
        </p>
      ) : null}
      {a.pkp_count === 0 ? (
        <section className="card">
          <h2>Next step</h2>
          <p>
            Create a PKP (a key the enclave derives on demand) on the <a href="#/pkps">PKPs</a> page, then
            write an action on the <a href="#/actions">Actions</a> page and run it with the PKP: with the
            account key no group is needed.
          </p>
        </section>
      ) : a.group_count === 0 ? (
        <section className="card">
          <h2>Next step</h2>
          <p>
            Write and run an action on the <a href="#/actions">Actions</a> page (as the owner, no group
            needed). To let a server run it, pin it, create a <a href="#/groups">group</a> that lists it with
            your PKP, and give the server a <a href="#/keys">usage key</a> that may execute in that group.
          </p>
        </section>
      ) : null}
    </>
  );
}
