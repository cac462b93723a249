/**
 * POST /core/v1/auth/siwe: the owner of a ChainSecured account signs in with a wallet (EIP-4361). The
 * answer says which account the message opens and until when; the page then signs each request with the
 * session key the message names (relayer/http/siwe.ts has the checks and the reasons).
 *
 * POST /core/v1/auth/siwe/sign_out: the session ends itself. Signed by its session key with the SIWE
 * headers; from then on every instance refuses the session (siwe_session_revoked).
 */
import { Router } from "express";
import { handler, type RelayerContext } from "../context";
import { BodyReader } from "../http/validate";

export function siweRoutes(ctx: RelayerContext): Router {
  const r = Router();
  r.post(
    "/auth/siwe",
    handler(ctx, async (req) => {
      const b = new BodyReader(req.body);
      const message = b.string("message", { required: true, nonEmpty: true, max: 4096 });
      const signature = b.string("signature", { required: true, nonEmpty: true, max: 200 });
      b.done();
      // Bound to the service's own public URLs (relayer/http/siwe.ts), never to the request's Host.
      const { session, account, mode } = await ctx.auth.signInWithEthereum(message, signature);
      return {
        body: {
          account_id: account.id,
          owner_address: session.owner,
          mode,
          session_key: session.sessionKey,
          expires_at: session.expiresAt,
          access: "read" as const,
        },
      };
    }),
  );
  r.post(
    "/auth/siwe/sign_out",
    handler(ctx, async (req) => {
      // Nothing to read from the body; an unexpected field is still refused.
      new BodyReader(req.body ?? {}).done();
      const { session, outcome } = await ctx.auth.signOutOwnerSession(req);
      return {
        body: {
          status: outcome,
          account_id: session.accountId,
          session_key: session.sessionKey,
          expires_at: session.expiresAt,
        },
      };
    }),
  );
  return r;
}
