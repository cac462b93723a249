import { useState } from "react";
import { createSigil } from "../../../sdk";
import { keyKindOf, openSession } from "../api";
import { ErrorNote, Field } from "../components/ui";
import { useAction } from "../useLoad";
import { injectedWallet, signInWithWallet } from "../wallet";
import type { OwnerSession } from "../../../sdk";

export function SignIn({
  onSignIn,
  onCreated,
  onWalletSignIn,
}: {
  onSignIn: (key: string) => void;
  onCreated: (key: string) => void;
  onWalletSignIn: (session: OwnerSession) => void;
}) {
  const walletSignIn = useAction();
  const [key, setKey] = useState("");
  const [keyError, setKeyError] = useState<string | null>(null);
  const [name, setName] = useState("");
  const create = useAction();
  const check = useAction();

  return (
    <div className="cards">
      <section className="card" aria-labelledby="signin-title">
        <h1 id="signin-title">Sign in</h1>
        <p className="muted">
          With an account key (<code>ak_…</code>) or a usage key (<code>uk_…</code>). The key stays in this
          tab only and is forgotten when you sign out or close it. A usage key signs each request and is never
          sent.
        </p>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const k = key.trim();
            if (keyKindOf(k) === null) {
              setKeyError("That is not a Sigil key: ak_ or uk_ followed by 64 hex digits.");
              return;
            }
            setKeyError(null);
            // Asked of the service first: a wrong (or revoked, or expired) key stays here with the reason.
            void check.run(() => openSession(k).sigil.account()).then((account) => account && onSignIn(k));
          }}
        >
          <Field label="Key" error={keyError}>
            {(p) => (
              <input
                {...p}
                type="password"
                autoComplete="off"
                spellCheck={false}
                value={key}
                onChange={(e) => setKey(e.target.value)}
              />
            )}
          </Field>
          <button type="submit" className="primary" disabled={check.pending}>
            {check.pending ? "Checking the key…" : "Sign in"}
          </button>
          <ErrorNote error={check.error} />
        </form>
      </section>
      <section className="card" aria-labelledby="wallet-title">
        <h2 id="wallet-title">Owner of a ChainSecured account?</h2>
        <p className="muted">
          For a ChainSecured account owned by your wallet: it signs one sign-in message (EIP-4361) for this
          site, valid for an hour. You can then see the account and prepare changes, which your wallet sends
          as transactions. An account owned by a Safe uses the account key to read and Safe transactions to
          change.
        </p>
        {injectedWallet() ? (
          <button
            type="button"
            className="primary"
            disabled={walletSignIn.pending}
            onClick={() =>
              void walletSignIn.run(signInWithWallet).then((session) => session && onWalletSignIn(session))
            }
          >
            {walletSignIn.pending ? "Waiting for the wallet…" : "Sign in with wallet"}
          </button>
        ) : (
          <p className="muted">No browser wallet found.</p>
        )}
        <ErrorNote error={walletSignIn.error} />
      </section>
      <section className="card" aria-labelledby="create-title">
        <h2 id="create-title">New here? Create an account</h2>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void create.run(async () => {
              const sigil = createSigil({ baseUrl: window.location.origin });
              const r = await sigil.newAccount(name.trim() ? { account_name: name.trim() } : {});
              if (!r.api_key) throw new Error("The service withheld the account key.");
              onCreated(r.api_key);
            });
          }}
        >
          <Field label="Account name" hint="Optional">
            {(p) => <input {...p} value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />}
          </Field>
          <button type="submit" className="primary" disabled={create.pending}>
            {create.pending ? "Creating…" : "Create account"}
          </button>
          <ErrorNote error={create.error} />
        </form>
      </section>
    </div>
  );
}
