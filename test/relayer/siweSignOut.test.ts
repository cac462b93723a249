/**
 * Wallet sign-out (POST /core/v1/auth/siwe/sign_out) on the real stack: anvil, the registry, the relayer
 * with its SQLite file, and two instances sharing an embedded PostgreSQL. A signed-out session is
 * refused on its next request (401 siwe_session_revoked), by the instance that signed it out and by any
 * other; a sign-in message is accepted once across instances. Both instances are configured with the
 * first one's URL as their public URL, as behind a load balancer (a SIWE message is bound to the
 * service's public URLs); requests go through node:http with that host, as a balancer passes it on.
 */
import Database from "better-sqlite3";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet } from "ethers";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { REVOCATION_STALENESS_MS } from "../../relayer/db";
import { createSigil, isSigilError, signRequest } from "../../sdk/index";
import { DEV_KEYS } from "../helpers/anvil";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import {
  ownedAccount as ownedAccountOf,
  ownerSession,
  sendWithHost,
  type OwnerSession,
} from "../helpers/siweOwner";
import { startStack, type Stack } from "../helpers/stack";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const OWNER_KEY = DEV_KEYS[4];
const owner = new Wallet(OWNER_KEY);

type Session = OwnerSession;
const send = sendWithHost;
const ownedAccount = (s: Stack, urls?: string[]) => ownedAccountOf(s, OWNER_KEY, urls);

/** Talks to one or more instances under one host, as the owner's page would. */
function client(s: Stack, host: string) {
  const chainId = 31337;
  const registryAddress = s.deployment.registry;

  const session = (lifetime: { issuedAgo?: number; seconds?: number } = {}): Promise<Session> =>
    ownerSession(owner, { domain: host, chainId, ...lifetime });

  const signIn = (baseUrl: string, x: Session) =>
    send(
      baseUrl,
      host,
      "POST",
      "/core/v1/auth/siwe",
      { "content-type": "application/json" },
      JSON.stringify({ message: x.message, signature: x.signature }),
    );

  /** A request signed by `signer` (the session key unless said otherwise) with the session's headers. */
  function asSession(baseUrl: string, x: Session, method: string, route: string, signer = x.key) {
    const body = method === "POST" ? "{}" : "";
    const headers: Record<string, string> = {
      ...signRequest(signer, { chainId, registryAddress }, method, route, new TextEncoder().encode(body)),
      "sigil-siwe": Buffer.from(x.message, "utf8").toString("base64"),
      "sigil-siwe-signature": x.signature,
    };
    if (body) headers["content-type"] = "application/json";
    return send(baseUrl, host, method, route, headers, body || undefined);
  }

  return {
    session,
    signIn,
    read: (baseUrl: string, x: Session) => asSession(baseUrl, x, "GET", "/core/v1/account"),
    signOut: (baseUrl: string, x: Session, signer?: Wallet) =>
      asSession(baseUrl, x, "POST", "/core/v1/auth/siwe/sign_out", signer),
  };
}

const codeOf = (r: { status: number; body: Json }) => [r.status, r.body?.error?.code ?? r.body?.status];

describe("wallet sign-out: a signed-out session is refused (one instance, SQLite)", function () {
  this.timeout(180_000);
  let s: Stack;
  let host: string;
  let c: ReturnType<typeof client>;
  let accountId: number;

  before(async () => {
    s = await startStack();
    host = new URL(s.url).host;
    c = client(s, host);
    accountId = await ownedAccount(s);
  });
  after(async () => {
    await s?.close();
  });

  it("a signed-out session gets 401 siwe_session_revoked on its next request", async () => {
    const x = await c.session();
    expect(codeOf(await c.signIn(s.url, x))).to.deep.equal([200, undefined]);
    expect((await c.read(s.url, x)).status).to.equal(200);
    const out = await c.signOut(s.url, x);
    expect(out).to.deep.equal({
      status: 200,
      body: {
        status: "signed_out",
        account_id: accountId,
        session_key: x.key.address,
        expires_at: Math.floor(Date.parse(/Expiration Time: (.*)/.exec(x.message)![1]) / 1000),
      },
    });
    const r = await c.read(s.url, x);
    expect(r.body.error).to.include({ code: "siwe_session_revoked" });
    expect([r.status, r.body.error.details]).to.deep.equal([401, { session_key: x.key.address }]);
  });

  it("signing out twice answers already_signed_out", async () => {
    const x = await c.session();
    expect(codeOf(await c.signOut(s.url, x))).to.deep.equal([200, "signed_out"]);
    expect(codeOf(await c.signOut(s.url, x))).to.deep.equal([200, "already_signed_out"]);
  });

  it("signing out an expired session answers expired and records nothing", async () => {
    const x = await c.session({ issuedAgo: 120, seconds: 60 });
    expect(codeOf(await c.signOut(s.url, x))).to.deep.equal([200, "expired"]);
    expect(codeOf(await c.read(s.url, x))).to.deep.equal([401, "siwe_expired"]);
    const file = new Database(path.join(s.dataDir, "relayer.sqlite"), { readonly: true });
    try {
      const row = file.prepare("SELECT 1 FROM siwe_revocations WHERE session_key = ?").get(x.key.address);
      expect(row).to.equal(undefined);
    } finally {
      file.close();
    }
  });

  it("a sign-out signed by another key than the session's: 401 siwe_invalid, the session lives on", async () => {
    const x = await c.session();
    const other = new Wallet(Wallet.createRandom().privateKey);
    expect(codeOf(await c.signOut(s.url, x, other))).to.deep.equal([401, "siwe_invalid"]);
    expect((await c.read(s.url, x)).status).to.equal(200);
  });

  it("a sign-out without the SIWE headers: 401 siwe_invalid", async () => {
    const r = await send(
      s.url,
      host,
      "POST",
      "/core/v1/auth/siwe/sign_out",
      { "content-type": "application/json" },
      "{}",
    );
    expect(codeOf(r)).to.deep.equal([401, "siwe_invalid"]);
  });

  it("a sign-out survives a restart of the relayer (kept in its SQLite file)", async () => {
    const x = await c.session();
    expect(codeOf(await c.signOut(s.url, x))).to.deep.equal([200, "signed_out"]);
    await s.restartRelayer();
    expect(codeOf(await c.read(s.url, x))).to.deep.equal([401, "siwe_session_revoked"]);
  });

  it("the SDK's signOut ends the session: the same client then gets siwe_session_revoked", async () => {
    const x = await c.session();
    const sigil = createSigil({
      baseUrl: s.url,
      ownerSession: {
        sessionKey: x.key.privateKey,
        message: x.message,
        signature: x.signature,
        owner: owner.address,
        accountId,
        expiresAt: Math.floor(Date.now() / 1000) + 600,
      },
    });
    expect((await sigil.account()).account_id).to.equal(accountId);
    expect((await sigil.signOut()).status).to.equal("signed_out");
    const err = await sigil.account().then(
      () => null,
      (e: unknown) => e,
    );
    expect(isSigilError(err) && [err.status, err.code]).to.deep.equal([401, "siwe_session_revoked"]);
  });
});

describeOnPostgres("wallet sign-out and sign-in nonces across two instances sharing PostgreSQL", function () {
  this.timeout(180_000);
  let s: Stack;
  let second: RunningRelayer;
  let one: string;
  let two: string;
  let c: ReturnType<typeof client>;

  before(async () => {
    s = await startStack({ databaseUrl: await freshDatabaseUrl() });
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-relayer-2-"));
    // One public URL for both, as behind a load balancer: the first instance's.
    second = await startRelayer({ ...s.relayerOptions, dataDir, port: 0, publicUrls: [s.url] });
    one = s.url;
    two = second.url;
    c = client(s, new URL(one).host);
    await ownedAccount(s, [one, two]);
  });
  after(async () => {
    await second?.close();
    await s?.close();
  });

  it("a session signed out on instance 1 is refused by instance 1 at once", async () => {
    const x = await c.session();
    expect((await c.read(one, x)).status).to.equal(200);
    expect(codeOf(await c.signOut(one, x))).to.deep.equal([200, "signed_out"]);
    expect(codeOf(await c.read(one, x))).to.deep.equal([401, "siwe_session_revoked"]);
  });

  it("a session signed out on instance 1 is refused by instance 2 once its copy is older than the bound", async () => {
    const x = await c.session();
    // Instance 2 has served the session, so it holds a fresh copy of the revocations without this one.
    expect((await c.read(two, x)).status).to.equal(200);
    expect(codeOf(await c.signOut(one, x))).to.deep.equal([200, "signed_out"]);
    await new Promise((r) => setTimeout(r, REVOCATION_STALENESS_MS + 100));
    expect(codeOf(await c.read(two, x))).to.deep.equal([401, "siwe_session_revoked"]);
  });

  it("signing out on instance 2 a session signed out on instance 1 answers already_signed_out", async () => {
    const x = await c.session();
    expect(codeOf(await c.signOut(one, x))).to.deep.equal([200, "signed_out"]);
    expect(codeOf(await c.signOut(two, x))).to.deep.equal([200, "already_signed_out"]);
  });

  it("a sign-in message accepted by instance 1 and replayed to instance 2: 401 siwe_nonce_replayed", async () => {
    const x = await c.session();
    expect((await c.signIn(one, x)).status).to.equal(200);
    expect(codeOf(await c.signIn(two, x))).to.deep.equal([401, "siwe_nonce_replayed"]);
  });
});
