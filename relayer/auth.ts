/**
 * Authentication: the key comes from `X-Api-Key` or `Authorization: Bearer` (the same for both kinds of
 * key, docs/background.md §5.3). The enclave turns it into an address; the permission cache says which account it
 * belongs to and whether it is live. A removed key is refused on the very next request after its
 * removal was processed (path A syncs the cache to the receipt; path B within one poll interval).
 *
 * The result is `res.locals.principal` (the shape billing expects) and `res.locals.auth` (everything the
 * routes need: the key string for signing, the account projection, the key record, the mode).
 */
import { markRefusedKey } from "./audit/refusedKey";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { Enclave } from "../enclave";
import { isEnclaveError } from "../enclave";
import type { AccountProjection, KeyRecord } from "./permissions/projection";
export type { AccountMode } from "./policy";
import type { PermissionCache } from "./permissions/permissionCache";
import { ApiError } from "./errors";
import { accountMode, type AccountMode } from "./policy";
import { type LimitTake, type RateLimiter, claimIpToken, takeInOrder } from "./rateLimit";
import { isSignedRequest, rawBodyOf, type SignedRequestVerifier } from "./http/signedRequest";
import { siweHeaders, type SignOutOutcome, type SiweSession, type SiweVerifier } from "./http/siwe";

export interface Principal {
  accountId: string;
  keyAddress: string;
  kind: "account" | "usage";
}

export interface AuthContext {
  principal: Principal;
  /**
   * The key string: needed to sign forward requests; never logged, never stored. Null for a signed
   * request (relayer/http/signedRequest.ts): the relayer never sees that key and cannot write with it.
   */
  apiKey: string | null;
  account: AccountProjection;
  /** The usage key's record (kind "usage"). */
  key?: KeyRecord;
  mode: AccountMode;
  /** Address path-A requests are signed as: the usage key, or the service-managed owner. */
  signer: string;
  /**
   * Set when the owner signed in with a wallet (relayer/http/siwe.ts): the requests come from a session
   * key the owner's SIWE message names, and may only read (the service never acts as the owner).
   */
  ownerSession?: { sessionKey: string; expiresAt: number };
  /** The request this context authenticated (the audit log's entries name it). */
  requestId?: string;
}

/** Methods an owner's wallet session may use: reading only. */
const OWNER_SESSION_METHODS = new Set(["GET", "HEAD"]);

export function extractApiKey(req: Request): string {
  const header = req.get("x-api-key");
  const authorization = req.get("authorization");
  let bearer: string | undefined;
  if (authorization !== undefined) {
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    if (!m) throw new ApiError("invalid_api_key", "The Authorization header must be `Bearer <key>`.");
    bearer = m[1];
  }
  if (header !== undefined && bearer !== undefined && header.trim() !== bearer) {
    throw new ApiError("invalid_api_key", "X-Api-Key and Authorization carry two different keys; send one.");
  }
  const key = (header ?? bearer)?.trim();
  if (!key)
    throw new ApiError(
      "missing_api_key",
      "Send the account key or a usage key in X-Api-Key or Authorization: Bearer.",
    );
  return key;
}

export class Authenticator {
  constructor(
    private readonly enclave: Enclave,
    private readonly cache: PermissionCache,
    private readonly limits: { perKey: RateLimiter; perAccount: RateLimiter },
    private readonly signed?: SignedRequestVerifier,
    private readonly siwe?: SiweVerifier,
  ) {}

  /**
   * Whether the request's bearer key is one the cache holds now (a live usage key, or an account key
   * of a loaded account), so that authenticating it costs no chain call: perIpLimit may then leave the
   * IP's token to authentication, to be taken in one statement with the key's and the account's.
   */
  holdsRequestKey(req: Request): boolean {
    if (this.signed !== undefined && isSignedRequest(req)) return false;
    let parsed;
    try {
      parsed = this.enclave.parseApiKey(extractApiKey(req));
    } catch {
      return false;
    }
    return parsed.kind === "account"
      ? this.cache.holdsMasterKey(parsed.address)
      : this.cache.holdsLiveKey(parsed.address, Math.floor(Date.now() / 1000));
  }

  /**
   * `rateLimit: false` for internal re-checks (the executor's per-key-operation authorization).
   * `ipToken`: the IP's token perIpLimit left to authentication; taken first, with the key's and the
   * account's when the cache still holds the key, else on its own before anything else.
   */
  async authenticate(
    apiKey: string,
    opts: { rateLimit?: boolean; ipToken?: LimitTake } = {},
  ): Promise<AuthContext> {
    const limit = opts.rateLimit !== false;
    let ipToken = opts.ipToken;
    let parsed;
    try {
      parsed = this.enclave.parseApiKey(apiKey);
    } catch (err) {
      if (ipToken) await takeInOrder([ipToken]);
      if (isEnclaveError(err)) {
        // The enclave's details are fixed phrases (never key material): say which rule the key broke.
        const reason = err.details ?? "malformed key";
        throw new ApiError(
          "invalid_api_key",
          `The key is not a valid Sigil key: ${reason}. An account key is ak_ followed by 64 lowercase hex digits, a usage key uk_ followed by 64, or a 0x-prefixed private key.`,
          { details: { reason } },
        );
      }
      throw err;
    }
    if (parsed.kind === "account") {
      // Changes made through other instances first (cross-instance read-your-writes; null in one process).
      const behind = limit ? this.cache.freshen() : null;
      if (behind) await behind;
      if (ipToken && !this.cache.holdsMasterKey(parsed.address)) {
        await takeInOrder([ipToken]);
        ipToken = undefined;
      }
      const id = await this.cache.accountOfMasterKey(parsed.address);
      if (!id) {
        if (ipToken) await takeInOrder([ipToken]);
        throw new ApiError("unknown_api_key", "No account has this account key.");
      }
      const account = await this.cache.account(id);
      if (limit)
        await takeInOrder([
          ...(ipToken ? [ipToken] : []),
          { limiter: this.limits.perAccount, key: `a:${id}`, what: `account ${id}` },
        ]);
      const mode = accountMode(this.enclave, account);
      return {
        principal: { accountId: String(id), keyAddress: parsed.address, kind: "account" },
        apiKey,
        account,
        mode,
        // The enclave memoises owner addresses: no second cache here.
        signer: this.enclave.ownerAddress(parsed.address),
      };
    }
    return this.authenticateUsageKey(parsed.address, apiKey, limit, ipToken);
  }

  /**
   * A usage key known by its address: a bearer key once parsed, or the signer of a signed request or
   * forward request (apiKey null). Same checks either way: registered, not removed, not expired.
   */
  async authenticateUsageKey(
    address: string,
    apiKey: string | null,
    limit = true,
    ipToken?: LimitTake,
  ): Promise<AuthContext> {
    // Changes made through other instances first (cross-instance read-your-writes; null in one process).
    // Internal re-checks (limit false) skip it: they follow the request's own authorization.
    if (limit) {
      const behind = this.cache.freshen();
      if (behind) await behind;
    }
    const now = Math.floor(Date.now() / 1000);
    // The key no longer live in the cache (another instance's change just arrived): the IP's token
    // first, on its own, before a lookup that may ask the chain.
    if (ipToken && !this.cache.holdsLiveKey(address, now)) {
      await takeInOrder([ipToken]);
      ipToken = undefined;
    }
    const found = await this.cache.lookupKey(address, now);
    if (found.status !== "live" && ipToken) await takeInOrder([ipToken]);
    if (found.status === "unknown")
      throw new ApiError("unknown_api_key", "The key is not registered, or it was removed.");
    if (found.status === "expired") {
      const refused = new ApiError(
        "api_key_expired",
        `The key expired at ${new Date(found.expiration * 1000).toISOString()}.`,
        {
          details: { expiration: found.expiration },
        },
      );
      // The account's audit log records it (audit/refusals.ts) when the account is known here.
      if (found.accountId === undefined) throw refused;
      throw markRefusedKey(refused, { accountId: String(found.accountId), keyAddress: address, apiKey });
    }
    if (limit) {
      // Both limits (and the IP's, when left to here) in one round trip on PostgreSQL
      // (relayer/db/sharedLimits.ts).
      await takeInOrder([
        ...(ipToken ? [ipToken] : []),
        { limiter: this.limits.perKey, key: `k:${address}`, what: `key ${address}` },
        {
          limiter: this.limits.perAccount,
          key: `a:${found.account.id}`,
          what: `account ${found.account.id}`,
        },
      ]);
    }
    return {
      principal: { accountId: String(found.account.id), keyAddress: address, kind: "usage" },
      apiKey,
      account: found.account,
      key: found.key,
      mode: accountMode(this.enclave, found.account),
      signer: address,
    };
  }

  /**
   * The owner of a ChainSecured account, signed in with a wallet: `sessionKey` signed this request and
   * the owner's SIWE message names it. Read access as the account key has it; nothing else.
   */
  async authenticateOwnerSession(
    siwe: { message: string; signature: string },
    sessionKey: string,
    method: string,
    /** The endpoint changes only the service's own records (caller "owner"): a session may write. */
    writes = false,
  ): Promise<AuthContext> {
    if (!this.siwe) throw new ApiError("siwe_invalid", "This service does not accept wallet sign-in.");
    const session = await this.siwe.verify(siwe.message, siwe.signature);
    if (session.sessionKey !== sessionKey)
      throw new ApiError(
        "siwe_invalid",
        `The request was signed by ${sessionKey}, not by the session key the sign-in message names (${session.sessionKey}).`,
      );
    // Signed out (on any instance): refused before anything else is looked at.
    await this.siwe.assertNotRevoked(session);
    if (!writes && !OWNER_SESSION_METHODS.has(method.toUpperCase()))
      throw new ApiError(
        "siwe_read_only",
        "A wallet sign-in may only read: the owner's changes are transactions the owner's wallet or Safe sends to the registry.",
      );
    const account = await this.cache.account(session.accountId);
    // Ownership may have moved since the message was signed: the chain's owner now decides.
    if (account.owner !== session.owner)
      throw new ApiError("siwe_not_owner", `${session.owner} no longer owns account ${session.accountId}.`, {
        details: { address: session.owner },
      });
    await this.limits.perAccount.take(`a:${account.id}`, `account ${account.id}`);
    return {
      principal: { accountId: String(account.id), keyAddress: session.owner, kind: "account" },
      apiKey: null,
      account,
      mode: accountMode(this.enclave, account),
      signer: session.owner,
      ownerSession: { sessionKey: session.sessionKey, expiresAt: session.expiresAt },
    };
  }

  /** POST /core/v1/auth/siwe: checks an owner's sign-in message once and spends its nonce. */
  async signInWithEthereum(message: string, signature: string) {
    if (!this.siwe) throw new ApiError("siwe_invalid", "This service does not accept wallet sign-in.");
    const session = await this.siwe.signIn(message, signature);
    const account = await this.cache.account(session.accountId);
    return { session, account, mode: accountMode(this.enclave, account) };
  }

  /**
   * POST /core/v1/auth/siwe/sign_out: the session signs its own sign-out (a request signed by its session
   * key, with the SIWE headers), so only whoever holds the session can end it. A session that already
   * expired or was signed out is answered as such, not refused: the page forgets it either way.
   */
  async signOutOwnerSession(req: Request): Promise<{ session: SiweSession; outcome: SignOutOutcome }> {
    if (!this.siwe) throw new ApiError("siwe_invalid", "This service does not accept wallet sign-in.");
    const siwe = siweHeaders((name) => req.get(name));
    if (!siwe || !this.signed || !isSignedRequest(req))
      throw new ApiError(
        "siwe_invalid",
        "Sign out as the session: a request signed by its session key (the Sigil-* signature headers) with Sigil-Siwe and Sigil-Siwe-Signature.",
      );
    const sessionKey = await this.signed.verifyRequest(req, rawBodyOf(req));
    const session = await this.siwe.verify(siwe.message, siwe.signature, { allowExpired: true });
    if (session.sessionKey !== sessionKey)
      throw new ApiError(
        "siwe_invalid",
        `The request was signed by ${sessionKey}, not by the session key the sign-in message names (${session.sessionKey}).`,
      );
    await this.limits.perAccount.take(`a:${session.accountId}`, `account ${session.accountId}`);
    return { session, outcome: await this.siwe.signOut(session) };
  }

  /** Middleware: any live key. */
  requireKey(): RequestHandler {
    return (req: Request, res: Response, next: NextFunction) => {
      this.run(req, res, next, false);
    };
  }

  /** Middleware: the account key only (management endpoints, billing). A usage key gets 403 owner_only. */
  requireAccountKey(): RequestHandler {
    return (req: Request, res: Response, next: NextFunction) => {
      this.run(req, res, next, true);
    };
  }

  /**
   * Middleware: the account key, or the owner's wallet session for writes too (caller "owner": the
   * endpoint changes the service's own records, never the registry). A usage key gets 403 owner_only.
   */
  requireOwner(): RequestHandler {
    return (req: Request, res: Response, next: NextFunction) => {
      this.run(req, res, next, true, true);
    };
  }

  /** Re-checks a caller mid-request (executor key operations), the same way it was authenticated. */
  reauthenticate(auth: AuthContext): Promise<AuthContext> {
    return auth.apiKey === null
      ? this.authenticateUsageKey(auth.principal.keyAddress, null, false)
      : this.authenticate(auth.apiKey, { rateLimit: false });
  }

  /**
   * The request's credential, whichever kind it is. `ipToken` (perIpLimit left it here): a bearer
   * key's authentication takes it along; any other way, or a malformed header, takes it first.
   */
  private async authenticateRequest(
    req: Request,
    sessionWrites: boolean,
    ipToken: LimitTake | undefined,
  ): Promise<AuthContext> {
    const siwe = siweHeaders((name) => req.get(name));
    const signed = this.signed !== undefined && isSignedRequest(req);
    if (ipToken && !siwe && !signed) {
      let apiKey: string;
      try {
        apiKey = extractApiKey(req);
      } catch (err) {
        await takeInOrder([ipToken]);
        throw err;
      }
      return this.authenticate(apiKey, { ipToken });
    }
    if (ipToken) await takeInOrder([ipToken]);
    if (siwe && !signed)
      throw new ApiError(
        "siwe_invalid",
        "Sigil-Siwe comes with a request signed by the session key it names (the Sigil-* signature headers).",
      );
    if (signed) {
      const verified = this.signed!.verifyRequest(req, rawBodyOf(req));
      const authenticateSigner = (address: string) =>
        siwe
          ? this.authenticateOwnerSession(siwe, address, req.method, sessionWrites)
          : this.authenticateUsageKey(address, null);
      return typeof verified === "string" ? authenticateSigner(verified) : verified.then(authenticateSigner);
    }
    return this.authenticate(extractApiKey(req));
  }

  private run(
    req: Request,
    res: Response,
    next: NextFunction,
    accountOnly: boolean,
    sessionWrites = false,
  ): void {
    const pending = this.authenticateRequest(req, sessionWrites, claimIpToken(res));
    pending.then(
      (auth) => {
        auth.requestId = String(res.locals.requestId);
        // Known from here on, refused or not: a refusal of a recognised key is the account's (audit log).
        res.locals.auth = auth;
        res.locals.principal = auth.principal;
        if (accountOnly && auth.principal.kind !== "account") {
          next(
            new ApiError("owner_only", "This endpoint needs the account key; a usage key can never use it."),
          );
          return;
        }
        next();
      },
      (err) => next(err),
    );
  }
}

export function authOf(res: Response): AuthContext {
  const auth = res.locals.auth as AuthContext | undefined;
  if (!auth) throw new Error("route used without an authentication middleware");
  return auth;
}
