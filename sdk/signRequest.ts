/**
 * Signed requests: a usage key proves itself without crossing the wire. For every attempt the SDK signs
 * the method, the path, the body's SHA-256, a timestamp and a random nonce, bound to one deployment
 * (chain id and registry address). docs/api.md ("Signed requests") gives the exact bytes; the relayer's
 * check is relayer/http/signedRequest.ts.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Wallet } from "ethers";
import type { RequestAuth } from "./transport";

export const SIGNED_REQUEST_VERSION = "SIGIL-REQUEST-V1";

export interface Deployment {
  chainId: number;
  registryAddress: string;
}

export interface SignedRequestFields extends Deployment {
  method: string;
  pathAndQuery: string;
  bodySha256: string;
  timestamp: number;
  nonce: string;
}

/** The message that is signed (EIP-191 personal message of these UTF-8 bytes). */
export function signedRequestMessage(f: SignedRequestFields): string {
  return [
    SIGNED_REQUEST_VERSION,
    String(f.chainId),
    f.registryAddress.toLowerCase(),
    f.method.toUpperCase(),
    f.pathAndQuery,
    f.bodySha256,
    String(f.timestamp),
    f.nonce,
  ].join("\n");
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Headers of one signed attempt (timestamp and nonce fixed only for known-answer tests and examples). */
export function signRequest(
  wallet: Wallet,
  deployment: Deployment,
  method: string,
  pathAndQuery: string,
  body: Uint8Array,
  fixed: { timestamp?: number; nonce?: string } = {},
): Record<string, string> {
  const fields: SignedRequestFields = {
    ...deployment,
    method,
    pathAndQuery,
    bodySha256: sha256Hex(body),
    timestamp: fixed.timestamp ?? Math.floor(Date.now() / 1000),
    nonce: fixed.nonce ?? randomBytes(16).toString("hex"),
  };
  return {
    "sigil-key": wallet.address,
    "sigil-timestamp": String(fields.timestamp),
    "sigil-nonce": fields.nonce,
    "sigil-content-sha256": fields.bodySha256,
    "sigil-signature": wallet.signMessageSync(signedRequestMessage(fields)),
  };
}

/** RequestAuth that signs with a usage key; the deployment is read once (GET /core/v1/config). */
export function signedAuth(wallet: Wallet, deployment: () => Promise<Deployment>): RequestAuth {
  return {
    async headers(method, pathAndQuery, body) {
      return signRequest(wallet, await deployment(), method, pathAndQuery, body);
    },
  };
}

/** RequestAuth that sends the key itself (account keys; usage keys when asked for). */
export function bearerAuth(apiKey: string): RequestAuth {
  return {
    async headers() {
      return { "x-api-key": apiKey };
    },
  };
}
