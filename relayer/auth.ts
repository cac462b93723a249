/**
 * Authentication: the key comes from `X-Api-Key` or `Authorization: Bearer` (the same for both kinds of
 * key, SPEC 5.3). The enclave turns it into an address; the permission cache says which account it
 * belongs to and whether it is live. A removed key is refused on the very next request after its
 * removal was processed (path A syncs the cache to the receipt; path B within one poll interval).
 *
 * The result is `res.locals.principal` (the shape billing expects) and `res.locals.auth` (everything the
 * routes need: the key string for signing, the account projection, the key record, the mode).
 */
import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { Enclave } from "../enclave";
import { isEnclaveError } from "../enclave";
import type { AccountProjection, KeyRecord } from "./permissions/projection";
import type { PermissionCache } from "./permissions/permissionCache";
import { ApiError } from "./errors";
import type { RateLimiter } from "./rateLimit";

export interface Principal {
  accountId: string;
  keyAddress: string;
  kind: "account" | "usage";
}

export type AccountMode = "api" | "chain_secured";

export interface AuthContext {
  principal: Principal;
  /** The key string: needed to sign forward requests; never logged, never stored. */
  apiKey: string;
  account: AccountProjection;
  /** The usage key's record (kind "usage"). */
  key?: KeyRecord;
  mode: AccountMode;
  /** Address path-A requests are signed as: the usage key, or the service-managed owner. */
  signer: string;
}

export function extractApiKey(req: Request): string {
  const header = req.get("x-api-key");
  const authorization = req.get("authorization");
  let bearer: string | undefined;
  if (authorization !== undefined) {
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    if (!m) throw new ApiError(401, "invalid_api_key", "The Authorization header must be `Bearer <key>`.");
    bearer = m[1];
  }
  if (header !== undefined && bearer !== undefined && header.trim() !== bearer) {
    throw new ApiError(
      401,
      "invalid_api_key",
      "X-Api-Key and Authorization carry two different keys; send one.",
    );
  }
  const key = (header ?? bearer)?.trim();
  if (!key)
    throw new ApiError(
      401,
      "missing_api_key",
      "Send the account key or a usage key in X-Api-Key or Authorization: Bearer.",
    );
  return key;
}

/**
 * The service-managed owner of a master key. Derivation costs an HKDF and a curve multiplication, and it
 * is needed on every request (mode check), so results are memoised (addresses only, nothing secret).
 */
const owners = new WeakMap<Enclave, Map<string, string>>();
export function serviceOwner(enclave: Enclave, masterKey: string): string {
  let m = owners.get(enclave);
  if (!m) owners.set(enclave, (m = new Map()));
  let owner = m.get(masterKey);
  if (owner === undefined) {
    owner = enclave.ownerAddress(masterKey);
    if (m.size > 100_000) m.clear();
    m.set(masterKey, owner);
  }
  return owner;
}

export function accountMode(enclave: Enclave, account: AccountProjection): AccountMode {
  return account.masterKey !== null && account.owner === serviceOwner(enclave, account.masterKey)
    ? "api"
    : "chain_secured";
}

export class Authenticator {
  constructor(
    private readonly enclave: Enclave,
    private readonly cache: PermissionCache,
    private readonly limits: { perKey: RateLimiter; perAccount: RateLimiter },
  ) {}

  /** `rateLimit: false` for internal re-checks (the executor's per-key-operation authorization). */
  async authenticate(apiKey: string, opts: { rateLimit?: boolean } = {}): Promise<AuthContext> {
    const limit = opts.rateLimit !== false;
    let parsed;
    try {
      parsed = this.enclave.parseApiKey(apiKey);
    } catch (err) {
      if (isEnclaveError(err)) {
        // The enclave's details are fixed phrases (never key material): say which rule the key broke.
        const reason = err.details ?? "malformed key";
        throw new ApiError(
          401,
          "invalid_api_key",
          `The key is not a valid Sigil key: ${reason}. An account key is ak_ followed by 64 lowercase hex digits, a usage key uk_ followed by 64, or a 0x-prefixed private key.`,
          { details: { reason } },
        );
      }
      throw err;
    }
    if (parsed.kind === "account") {
      const id = await this.cache.accountOfMasterKey(parsed.address);
      if (!id) throw new ApiError(401, "unknown_api_key", "No account has this account key.");
      const account = await this.cache.account(id);
      if (limit) await this.limits.perAccount.take(`a:${id}`, `account ${id}`);
      const mode = accountMode(this.enclave, account);
      return {
        principal: { accountId: String(id), keyAddress: parsed.address, kind: "account" },
        apiKey,
        account,
        mode,
        signer: serviceOwner(this.enclave, parsed.address),
      };
    }
    const found = await this.cache.lookupKey(parsed.address, Math.floor(Date.now() / 1000));
    if (found.status === "unknown")
      throw new ApiError(401, "unknown_api_key", "The key is not registered, or it was removed.");
    if (found.status === "expired") {
      throw new ApiError(
        401,
        "api_key_expired",
        `The key expired at ${new Date(found.expiration * 1000).toISOString()}.`,
        {
          details: { expiration: found.expiration },
        },
      );
    }
    if (limit) {
      await this.limits.perKey.take(`k:${parsed.address}`, `key ${parsed.address}`);
      await this.limits.perAccount.take(`a:${found.account.id}`, `account ${found.account.id}`);
    }
    return {
      principal: { accountId: String(found.account.id), keyAddress: parsed.address, kind: "usage" },
      apiKey,
      account: found.account,
      key: found.key,
      mode: accountMode(this.enclave, found.account),
      signer: parsed.address,
    };
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

  private run(req: Request, res: Response, next: NextFunction, accountOnly: boolean): void {
    let apiKey: string;
    try {
      apiKey = extractApiKey(req);
    } catch (err) {
      next(err);
      return;
    }
    this.authenticate(apiKey).then(
      (auth) => {
        if (accountOnly && auth.principal.kind !== "account") {
          next(
            new ApiError(
              403,
              "owner_only",
              "This endpoint needs the account key; a usage key can never use it.",
            ),
          );
          return;
        }
        res.locals.auth = auth;
        res.locals.principal = auth.principal;
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
