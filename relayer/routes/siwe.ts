/**
 * POST /core/v1/auth/siwe: the owner of a ChainSecured account signs in with a wallet (EIP-4361). The
 * answer says which account the message opens and until when; the page then signs each request with the
 * session key the message names (relayer/http/siwe.ts has the checks and the reasons).
 *
 * POST /core/v1/auth/siwe/sign_out: the session ends itself. Signed by its session key with the SIWE
 * headers; from then on every instance refuses the session (siwe_session_revoked).
 */
import { type RelayerContext } from "../context";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

const siweBody = s.obj(
  {
    message: {
      ...s.text(4096, "The EIP-4361 message the owner's wallet signed (personal_sign)"),
      "x-sigil-non-blank": true,
    },
    signature: { ...s.text(200, "The wallet's 65-byte signature, 0x hex"), "x-sigil-non-blank": true },
  },
  ["message", "signature"],
);

const postAuthSiwe = endpoint<RelayerContext>("POST", "/auth/siwe", {
  caller: "public",
  summary:
    "Sign in with Ethereum (EIP-4361) as the EOA owner of a ChainSecured account: checks the message (domain = one of this service's public URLs, never the Host header; chain, expiry within an hour, a session-key resource) and spends its nonce. Later requests are signed by that session key and carry Sigil-Siwe (base64 of the message) and Sigil-Siwe-Signature; they may only read.",
  body: siweBody,
  answer: s.out({
    account_id: s.int(),
    owner_address: s.address,
    mode: s.str(),
    session_key: s.address,
    expires_at: s.int(),
    access: { type: "string", enum: ["read"] },
  }),
  errors: [
    "siwe_invalid",
    "siwe_wrong_domain",
    "siwe_wrong_chain",
    "siwe_expired",
    "siwe_not_owner",
    "siwe_owner_is_contract",
    "siwe_nonce_replayed",
    "rate_limited",
    "chain_unavailable",
  ],
  async handle(ctx, _req, _res, { message, signature }: BodyOf<typeof siweBody>) {
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
  },
});

const postAuthSiweSignOut = endpoint<RelayerContext>("POST", "/auth/siwe/sign_out", {
  caller: "session",
  summary:
    "Ends the wallet session that signs this request (signed by its session key, with Sigil-Siwe and Sigil-Siwe-Signature): every instance refuses it from then on (siwe_session_revoked), until it would have expired. status: signed_out, already_signed_out (a second sign-out) or expired (nothing left to end). The body is empty or {}.",
  body: s.obj({}),
  answer: s.out({
    status: { type: "string", enum: ["signed_out", "already_signed_out", "expired"] },
    account_id: s.int(),
    session_key: s.address,
    expires_at: s.int("Unix seconds: when the session would have expired"),
  }),
  errors: ["database_unavailable"],
  async handle(ctx, req) {
    const { session, outcome } = await ctx.auth.signOutOwnerSession(req);
    return {
      body: {
        status: outcome,
        account_id: session.accountId,
        session_key: session.sessionKey,
        expires_at: session.expiresAt,
      },
    };
  },
});

export const SIWE_ENDPOINTS = [postAuthSiwe, postAuthSiweSignOut];
