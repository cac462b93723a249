/**
 * The error middleware that records refusals (docs/audit-log.md, "Refusals"): it runs before the error
 * handler answers, so a refused request of a recognised key has its entry (or billing event) written
 * before its answer, like every other entry. Requests whose key named no account are not recorded:
 * there is no account whose log they belong to.
 */
import type { NextFunction, Request, Response } from "express";
import { keyHash } from "../../enclave";
import type { AuthContext } from "../auth";
import type { RelayerContext } from "../context";
import { toApiError } from "../http/errorHandler";
import { auditPrincipal, recordRefusal } from "./record";
import { refusedKeyOf } from "./refusedKey";

/** Whose refusal it is: the authenticated caller, or a key refused while authenticating (refusedKey.ts). */
function refusedWho(auth: AuthContext | undefined, err: unknown) {
  if (auth)
    return {
      accountId: auth.principal.accountId,
      keyAddress: auth.principal.keyAddress,
      apiKeyHash: auth.apiKey ? keyHash(auth.apiKey) : null,
      principal: auditPrincipal(auth),
    };
  const key = refusedKeyOf(err);
  if (!key) return undefined;
  const keyAddress = key.keyAddress.toLowerCase();
  return {
    accountId: key.accountId,
    keyAddress,
    apiKeyHash: key.apiKey ? keyHash(key.apiKey) : null,
    principal: { kind: "usage_key" as const, address: keyAddress },
  };
}

export function auditRefusals(ctx: RelayerContext) {
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => {
    const who =
      ctx.audit && !res.headersSent ? refusedWho(res.locals.auth as AuthContext | undefined, err) : undefined;
    const apiError = who ? toApiError(err) : undefined;
    if (!apiError || !who) {
      next(err);
      return;
    }
    // The path as requested (ids included, the query string left out): express has reset baseUrl by now.
    const route = req.originalUrl.split("?")[0];
    recordRefusal(ctx.audit, who, {
      requestId: String(res.locals.requestId),
      method: req.method,
      route,
      code: apiError.code,
    })
      .catch((e: unknown) =>
        ctx.logger.warn({ err: (e as Error).message }, "audit: a refusal was not recorded"),
      )
      .finally(() => next(err));
  };
}
