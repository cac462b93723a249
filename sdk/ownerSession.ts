/**
 * An owner's wallet session (sdk/siwe.ts): what it holds, how it authenticates a request, and how it
 * ends. The usage-key signing in signRequest.ts is reused unchanged; the session adds two headers.
 */
import { Wallet } from "ethers";
import { signRequest, type Deployment } from "./signRequest";
import type { RequestAuth } from "./transport";

/** What a signed-in page or program holds: no owner key, only the session key and the signed message. */
export interface OwnerSession {
  /**
   * The session key's private key (0x hex): signs requests, expires with the message. It reads, and
   * writes only the service's own records (triggers): never the registry.
   */
  sessionKey: string;
  message: string;
  signature: string;
  owner: string;
  accountId: number;
  /** Unix seconds. */
  expiresAt: number;
}

/** RequestAuth for an owner session: a signed request by the session key plus the SIWE headers. */
export function ownerSessionAuth(session: OwnerSession, deployment: () => Promise<Deployment>): RequestAuth {
  const key = new Wallet(session.sessionKey);
  const siwe = {
    "sigil-siwe": base64Utf8(session.message),
    "sigil-siwe-signature": session.signature,
  };
  return {
    async headers(method, pathAndQuery, body) {
      return { ...signRequest(key, await deployment(), method, pathAndQuery, body), ...siwe };
    },
  };
}

/** What the service answers to a sign-out: `status` says whether it ended the session now. */
export interface SignOutResult {
  /** signed_out: ended now; already_signed_out: ended before; expired: nothing was left to end. */
  status: "signed_out" | "already_signed_out" | "expired";
  account_id: number;
  session_key: string;
  expires_at: number;
}

/**
 * Ends the session on the service (POST /core/v1/auth/siwe/sign_out, signed by the session itself): from
 * then on every instance refuses the session, so a copy of it (the message and the session key left in
 * another tab or on a shared machine) stops working too. The caller still forgets its own copy.
 */
export function signOutOwnerSession(
  post: (
    path: "/core/v1/auth/siwe/sign_out",
    init: { body: Record<string, never> },
  ) => Promise<SignOutResult>,
): Promise<SignOutResult> {
  return post("/core/v1/auth/siwe/sign_out", { body: {} });
}

/** Base64 of a string's UTF-8 bytes, in Node and in browsers alike (no Buffer in a page). */
function base64Utf8(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}
