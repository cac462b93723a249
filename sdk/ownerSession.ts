/**
 * An owner's wallet session (sdk/siwe.ts): what it holds and how it authenticates a request. The
 * usage-key signing in signRequest.ts is reused unchanged; the session adds two headers.
 */
import { Wallet } from "ethers";
import { signRequest, type Deployment } from "./signRequest";
import type { RequestAuth } from "./transport";

/** What a signed-in page or program holds: no owner key, only the session key and the signed message. */
export interface OwnerSession {
  /** The session key's private key (0x hex): signs requests, can only read, expires with the message. */
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

/** Base64 of a string's UTF-8 bytes, in Node and in browsers alike (no Buffer in a page). */
function base64Utf8(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}
