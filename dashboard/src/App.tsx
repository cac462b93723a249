/**
 * The shell: signed out → the sign-in page; signed in → navigation and one page at a time, chosen by
 * the URL's hash (#/pkps). The hash names a page, never a key.
 */
import { lazy, Suspense, useEffect, useMemo, useState } from "react";
import { openOwnerSession, openSession, type Session } from "./api";
import { forgetKey, savedKey, saveKey, savedOwnerSession, saveOwnerSession } from "./session";
import type { OwnerSession } from "../../sdk";
import { applyTheme, initialTheme, type Theme } from "./theme";
import { SignIn } from "./pages/SignIn";
import { Overview } from "./pages/Overview";
import { Pkps } from "./pages/Pkps";
import { Groups } from "./pages/Groups";
import { UsageKeys } from "./pages/UsageKeys";
import { Billing } from "./pages/Billing";
import { Ownership } from "./pages/Ownership";
import { ShownOnce, Loading } from "./components/ui";
import { ToastProvider } from "./components/Toasts";
import { forgetRuns } from "./recentRuns";

// The action editor carries CodeMirror: loaded when the page is opened, not on the first page.
const Actions = lazy(() => import("./pages/Actions"));
// The audit log's page carries the export verifier: loaded when opened.
const Activity = lazy(() => import("./pages/Activity"));
// Triggers carries a cron parser (croner) for its schedule preview: loaded when opened.
const Triggers = lazy(() => import("./pages/Triggers"));

interface PageDef {
  id: string;
  title: string;
  accountOnly: boolean;
  /** Shown to the owner signed in with a wallet (who reads, and changes things by transactions). */
  owner: boolean;
}
const PAGES: PageDef[] = [
  { id: "overview", title: "Overview", accountOnly: false, owner: true },
  { id: "pkps", title: "PKPs", accountOnly: false, owner: true },
  { id: "groups", title: "Groups", accountOnly: false, owner: true },
  { id: "keys", title: "Usage keys", accountOnly: true, owner: true },
  { id: "actions", title: "Actions", accountOnly: false, owner: false },
  // The account key manages triggers; the owner's wallet session reads them.
  { id: "triggers", title: "Triggers", accountOnly: true, owner: true },
  { id: "billing", title: "Billing", accountOnly: true, owner: true },
  // Listed for a usage key too: the page says whose log it is when the service refuses it.
  { id: "activity", title: "Activity", accountOnly: false, owner: true },
  { id: "ownership", title: "Ownership", accountOnly: true, owner: false },
];

/** The page a hash names: its first segment (`#/billing/return?…` is the Billing page). */
function pageFromHash(): string {
  const id = window.location.hash.replace(/^#\/?/, "").split(/[/?]/)[0];
  return PAGES.some((p) => p.id === id) ? id : "overview";
}

export function App() {
  return (
    <ToastProvider>
      <Shell />
    </ToastProvider>
  );
}

function Shell() {
  const [theme, setTheme] = useState<Theme>(initialTheme);
  useEffect(() => applyTheme(theme), [theme]);

  const [key, setKey] = useState<string | null>(() => savedKey());
  const [ownerSession, setOwnerSession] = useState<OwnerSession | null>(() => savedOwnerSession());
  // A new account's key, shown once: component state only, so a reload can never show it again.
  const [newKey, setNewKey] = useState<string | null>(null);
  const session: Session | null = useMemo(() => {
    if (ownerSession) return openOwnerSession(ownerSession);
    if (key === null) return null;
    try {
      return openSession(key);
    } catch {
      forgetKey(); // not a key this page can use: never keep it around
      return null;
    }
  }, [key, ownerSession]);

  const [page, setPage] = useState(pageFromHash);
  // The whole hash too: a page with views of its own (Billing's return page) reads the rest of it.
  const [hash, setHash] = useState(() => window.location.hash);
  useEffect(() => {
    const onHash = () => {
      setPage(pageFromHash());
      setHash(window.location.hash);
    };
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);

  const signIn = (k: string) => {
    saveKey(k);
    setKey(k);
  };
  const signOut = async () => {
    // A wallet session is ended on the service first, so a copy of it (another tab, a shared machine)
    // stops working too; the tab forgets it whatever the answer (an expired session has nothing to end).
    if (session?.kind === "owner") await session.sigil.signOut().catch(() => undefined);
    forgetKey();
    forgetRuns();
    setKey(null);
    setOwnerSession(null);
    setNewKey(null);
    window.location.hash = "";
  };

  const themeButton = (
    <button type="button" className="small" onClick={() => setTheme(theme === "dark" ? "light" : "dark")}>
      {theme === "dark" ? "Light theme" : "Dark theme"}
    </button>
  );

  if (!session) {
    return (
      <div className="app signed-out">
        <header className="top">
          <span className="brand">Sigil</span>
          {themeButton}
        </header>
        <main id="main">
          <SignIn
            onSignIn={signIn}
            onCreated={(k) => {
              setNewKey(k);
              signIn(k);
            }}
            onWalletSignIn={(s) => {
              saveOwnerSession(s);
              setOwnerSession(s);
            }}
          />
        </main>
      </div>
    );
  }

  const visible = PAGES.filter((p) =>
    session.kind === "owner" ? p.owner : session.kind === "account" || !p.accountOnly,
  );
  const current = visible.find((p) => p.id === page) ?? visible[0];

  return (
    <div className="app">
      <header className="top">
        <span className="brand">Sigil</span>
        <span className="muted">
          {session.kind === "owner"
            ? `owner wallet ${ownerSession?.owner ?? ""} (read; changes are your transactions)`
            : session.kind === "account"
              ? "account key"
              : "usage key (signed requests)"}
        </span>
        <span className="spacer" />
        {themeButton}
        <button type="button" className="small" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <nav aria-label="Pages">
        <ul>
          {visible.map((p) => (
            <li key={p.id}>
              <a href={`#/${p.id}`} aria-current={p.id === current.id ? "page" : undefined}>
                {p.title}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main">
        {newKey ? (
          <ShownOnce heading={1} title="Your account key" value={newKey} onDone={() => setNewKey(null)} />
        ) : (
          <>
            <h1>{current.title}</h1>
            <PageBody id={current.id} session={session} hash={hash} />
          </>
        )}
      </main>
    </div>
  );
}

function PageBody({ id, session, hash }: { id: string; session: Session; hash: string }) {
  switch (id) {
    case "pkps":
      return <Pkps session={session} />;
    case "groups":
      return <Groups session={session} />;
    case "keys":
      return <UsageKeys session={session} />;
    case "actions":
      return (
        <Suspense fallback={<Loading what="the action editor" />}>
          <Actions session={session} />
        </Suspense>
      );
    case "triggers":
      return (
        <Suspense fallback={<Loading what="triggers" />}>
          <Triggers session={session} hash={hash} />
        </Suspense>
      );
    case "billing":
      return <Billing session={session} hash={hash} />;
    case "ownership":
      return <Ownership session={session} />;
    case "activity":
      return (
        <Suspense fallback={<Loading what="the activity log" />}>
          <Activity session={session} />
        </Suspense>
      );
    default:
      return <Overview session={session} />;
  }
}
