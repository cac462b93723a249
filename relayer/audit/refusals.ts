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

export function auditRefusals(ctx: RelayerContext) {
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => {
    const auth = res.locals.auth as AuthContext | undefined;
    const apiError = ctx.audit && auth && !res.headersSent ? toApiError(err) : undefined;
    if (!apiError || !auth) {
      next(err);
      return;
    }
    // The path as requested (ids included, the query string left out): express has reset baseUrl by now.
    const route = req.originalUrl.split("?")[0];
    recordRefusal(
      ctx.audit,
      {
        accountId: auth.principal.accountId,
        keyAddress: auth.principal.keyAddress,
        apiKeyHash: auth.apiKey ? keyHash(auth.apiKey) : null,
        principal: auditPrincipal(auth),
      },
      { requestId: String(res.locals.requestId), method: req.method, route, code: apiError.code },
    )
      .catch((e: unknown) =>
        ctx.logger.warn({ err: (e as Error).message }, "audit: a refusal was not recorded"),
      )
      .finally(() => next(err));
  };
}
