/**
 * Sign in with Ethereum (EIP-4361) as the owner of a ChainSecured account whose owner is an EOA.
 *
 * The owner's wallet (any EIP-1193 provider: a browser wallet, or an ethers Wallet behind a small
 * adapter in Node) signs one message per sign-in. That message names a fresh *session key* (a random
 * secp256k1 key made here) in its Resources; every later request is signed by the session key in the
 * signed-request format (signRequest.ts) and carries the message and the owner's signature in two
 * headers. The wallet is asked once; the session key can only read, and only until the message
 * expires (at most an hour). relayer/http/siwe.ts is the service's side.
 */
import { randomBytes } from "node:crypto";
import { Wallet, getAddress, hexlify, toUtf8Bytes } from "ethers";
import { createSigil, type Sigil, type SigilOptions } from "./createSigil";
import type { OwnerSession } from "./ownerSession";

export const SESSION_KEY_RESOURCE = "urn:sigil:session-key:";
export const SIWE_MAX_LIFETIME_SECONDS = 3600;

/** The part of EIP-1193 used here. */
export interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

export interface SiweFields {
  /** The host (and port) of the page asking, e.g. "127.0.0.1:8000": must be the service's host. */
  domain: string;
  address: string;
  statement?: string;
  uri: string;
  chainId: number;
  nonce: string;
  issuedAt: Date;
  expirationTime: Date;
  resources?: string[];
}

/** The EIP-4361 message text for these fields. */
export function siweMessage(f: SiweFields): string {
  const lines = [
    `${f.domain} wants you to sign in with your Ethereum account:`,
    getAddress(f.address),
    "",
    ...(f.statement ? [f.statement, ""] : [""]),
    `URI: ${f.uri}`,
    "Version: 1",
    `Chain ID: ${f.chainId}`,
    `Nonce: ${f.nonce}`,
    `Issued At: ${f.issuedAt.toISOString()}`,
    `Expiration Time: ${f.expirationTime.toISOString()}`,
  ];
  if (f.resources?.length) lines.push("Resources:", ...f.resources.map((r) => `- ${r}`));
  return lines.join("\n");
}

export interface SignInOptions extends Omit<SigilOptions, "apiKey" | "usageKeyAuth"> {
  /** The owner's wallet. Asked for its account (eth_requestAccounts) and one personal_sign. */
  provider: Eip1193Provider;
  /** Defaults to the host of baseUrl (what the service checks the message against). */
  domain?: string;
  /** Defaults to baseUrl. */
  uri?: string;
  /** Session length in seconds (default and maximum 3600). */
  lifetimeSeconds?: number;
  statement?: string;
}

/**
 * Signs in as the owner: one wallet signature, then a client whose every request is signed by a fresh
 * session key. Refusals are the service's typed errors (siwe_not_owner, siwe_wrong_domain, ...).
 */
export async function signInWithEthereum(o: SignInOptions): Promise<{ sigil: Sigil; session: OwnerSession }> {
  const baseUrl = o.baseUrl.replace(/\/+$/, "");
  const lifetime = Math.min(o.lifetimeSeconds ?? SIWE_MAX_LIFETIME_SECONDS, SIWE_MAX_LIFETIME_SECONDS);
  const accounts = (await o.provider.request({ method: "eth_requestAccounts" })) as string[];
  if (!accounts?.length) throw new Error("The wallet shared no account.");
  const owner = getAddress(accounts[0]);
  const anonymous = createSigil({ ...o, baseUrl });
  const config = await anonymous.config();
  const sessionWallet = Wallet.createRandom();
  const issuedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
  const message = siweMessage({
    domain: o.domain ?? new URL(baseUrl).host,
    address: owner,
    statement:
      o.statement ??
      "Sign in to Sigil as this account's owner. This lets the page read the account and prepare your transactions; it cannot change anything.",
    uri: o.uri ?? baseUrl,
    chainId: config.chain_id,
    nonce: randomBytes(16).toString("hex"),
    issuedAt,
    expirationTime: new Date(issuedAt.getTime() + lifetime * 1000),
    resources: [SESSION_KEY_RESOURCE + sessionWallet.address],
  });
  const signature = (await o.provider.request({
    method: "personal_sign",
    params: [hexlify(toUtf8Bytes(message)), owner],
  })) as string;
  const answer = await anonymous.post("/core/v1/auth/siwe", { body: { message, signature } });
  const session: OwnerSession = {
    sessionKey: sessionWallet.privateKey,
    message,
    signature,
    owner: answer.owner_address,
    accountId: answer.account_id,
    expiresAt: answer.expires_at,
  };
  return { sigil: createSigil({ ...o, baseUrl, ownerSession: session }), session };
}
