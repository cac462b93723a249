/**
 * Sign in with Ethereum (EIP-4361) for the owner of a ChainSecured account whose owner is an EOA.
 *
 * The owner's wallet signs one SIWE message per sign-in; it never signs API requests (a wallet prompt per
 * request would be unusable). The message's Resources line names a *session key*: a secp256k1 key the
 * page generated for this sign-in. Every API request is then an ordinary signed request
 * (relayer/http/signedRequest.ts) made by that session key, plus two headers carrying the SIWE message
 * (`Sigil-Siwe`, base64 of its UTF-8 bytes) and the owner's signature of it (`Sigil-Siwe-Signature`).
 * So the relayer keeps no session table: any instance checks any request, and what authorizes the
 * request is (owner signed "this session key may read for me until T") + (the session key signed this
 * request). A captured SIWE message is useless without the session key. The one shared state is the
 * list of signed-out session keys (relayer/db/siweRevocations.ts), which every request consults.
 *
 * Checks, cheapest first, each with its own 401 code:
 *  - the message parses as EIP-4361, version 1, with exactly one `urn:sigil:session-key:<address>`
 *    resource, an Expiration Time at most SIWE_MAX_LIFETIME_SECONDS after Issued At, a nonce of at least
 *    16 letters and digits (siwe_invalid);
 *  - its domain is the host of one of the service's own public URLs (RelayerOptions.publicUrls,
 *    SIGIL_PUBLIC_URLS), and its URI is on that same origin (siwe_wrong_domain): a page on another site
 *    cannot use a message signed for that site, and a wallet shows the user which site asked (EIP-4361's
 *    phishing defence). Never the request's Host header: a client chooses that header, so a phishing
 *    page could send a message signed for its own domain with a matching Host;
 *  - its chain id is the service's (siwe_wrong_chain);
 *  - now is between Issued At (minus clock skew) and Expiration Time, and after Not Before (siwe_expired);
 *  - the signature recovers to the message's address; when it does not and that address is a contract
 *    (a Safe cannot sign this way), siwe_owner_is_contract, else siwe_invalid;
 *  - that address is the on-chain owner of an account (siwe_not_owner).
 * The sign-in call (POST /core/v1/auth/siwe) also refuses a nonce already used to sign in
 * (siwe_nonce_replayed), on any instance: nonces are spent in the data layer (relayer/db/siweNonces.ts).
 * Per request, the request's own Sigil-Nonce is the replay guard, and a session whose key was signed out
 * (POST /core/v1/auth/siwe/sign_out) is refused (siwe_session_revoked; relayer/db/siweRevocations.ts).
 */
import { createHash } from "node:crypto";
import { getAddress } from "ethers";
import type { SessionRevocations, SignInNonces } from "../db";
import { ApiError } from "../errors";
import { personalMessageDigest, recoverAddress } from "./ethSignatures";

export const SIWE_HEADER = "sigil-siwe";
export const SIWE_SIGNATURE_HEADER = "sigil-siwe-signature";
/** The longest session one signature may open. */
export const SIWE_MAX_LIFETIME_SECONDS = 3600;
/** How far Issued At may be ahead of the service's clock (the wallet's clock may run fast). */
export const SIWE_CLOCK_SKEW_SECONDS = 60;
export const SESSION_KEY_RESOURCE = "urn:sigil:session-key:";
const MAX_MESSAGE_BYTES = 4096;

export interface SiweMessage {
  domain: string;
  address: string;
  statement: string | null;
  uri: string;
  version: string;
  chainId: number;
  nonce: string;
  issuedAt: string;
  expirationTime: string | null;
  notBefore: string | null;
  requestId: string | null;
  resources: string[];
}

/** What a verified message grants: read access to `accountId` for `sessionKey` until `expiresAt`. */
export interface SiweSession {
  owner: string;
  accountId: number;
  sessionKey: string;
  /** Unix seconds. */
  expiresAt: number;
  nonce: string;
}

function invalid(message: string): ApiError {
  return new ApiError("siwe_invalid", message);
}

const HEADER_SUFFIX = " wants you to sign in with your Ethereum account:";
const FIELD_ORDER = [
  ["URI", "uri"],
  ["Version", "version"],
  ["Chain ID", "chainId"],
  ["Nonce", "nonce"],
  ["Issued At", "issuedAt"],
  ["Expiration Time", "expirationTime"],
  ["Not Before", "notBefore"],
  ["Request ID", "requestId"],
] as const;
const REQUIRED = new Set(["uri", "version", "chainId", "nonce", "issuedAt"]);

/** Parses an EIP-4361 message (the ABNF's line structure; fields in the standard's order). */
export function parseSiweMessage(text: string): SiweMessage {
  if (Buffer.byteLength(text, "utf8") > MAX_MESSAGE_BYTES)
    throw invalid(`The sign-in message is longer than ${MAX_MESSAGE_BYTES} bytes.`);
  const lines = text.split("\n");
  const head = lines[0] ?? "";
  if (!head.endsWith(HEADER_SUFFIX)) throw invalid("This is not an EIP-4361 sign-in message.");
  const domain = head.slice(0, -HEADER_SUFFIX.length);
  if (!/^[A-Za-z0-9.-]+(:[0-9]{1,5})?$/.test(domain) && !/^\[[0-9a-fA-F:]+\](:[0-9]{1,5})?$/.test(domain))
    throw invalid("The sign-in message's domain is not a host.");
  const address = lines[1] ?? "";
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw invalid("The sign-in message's address is not an address.");
  if (lines[2] !== "") throw invalid("The sign-in message's address must be followed by an empty line.");
  let i = 3;
  let statement: string | null = null;
  if (lines[i] !== "") {
    statement = lines[i];
    i++;
    if (lines[i] !== "") throw invalid("The sign-in message's statement must be one line.");
  }
  i++;
  const fields: Record<string, string> = {};
  let order = 0;
  for (; i < lines.length && lines[i] !== "Resources:"; i++) {
    const line = lines[i];
    const at = FIELD_ORDER.findIndex(([label], k) => k >= order && line.startsWith(`${label}: `));
    if (at < 0) throw invalid(`The sign-in message has an unexpected line: "${line.slice(0, 60)}".`);
    const [label, name] = FIELD_ORDER[at];
    fields[name] = line.slice(label.length + 2);
    order = at + 1;
  }
  const resources: string[] = [];
  if (lines[i] === "Resources:") {
    for (i++; i < lines.length; i++) {
      if (!lines[i].startsWith("- ")) throw invalid('Each resource is a line starting with "- ".');
      resources.push(lines[i].slice(2));
    }
  }
  for (const name of REQUIRED)
    if (fields[name] === undefined) throw invalid(`The sign-in message has no ${name} field.`);
  // EIP-155 chain ids go up to 2^53 - 1 in practice (wallets keep them as JavaScript numbers).
  if (!/^[0-9]{1,16}$/.test(fields.chainId) || !Number.isSafeInteger(Number(fields.chainId)))
    throw invalid("The sign-in message's Chain ID is not a number.");
  return {
    domain,
    address,
    statement,
    uri: fields.uri,
    version: fields.version,
    chainId: Number(fields.chainId),
    nonce: fields.nonce,
    issuedAt: fields.issuedAt,
    expirationTime: fields.expirationTime ?? null,
    notBefore: fields.notBefore ?? null,
    requestId: fields.requestId ?? null,
    resources,
  };
}

/** RFC 3339 date-time (what EIP-4361 requires) to unix seconds. */
function seconds(value: string, what: string): number {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value))
    throw invalid(`The sign-in message's ${what} is not an RFC 3339 date-time.`);
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw invalid(`The sign-in message's ${what} is not a date.`);
  return Math.floor(ms / 1000);
}

export interface SiweVerifierOptions {
  chainId: number;
  /**
   * The service's own public URLs (origins such as https://sigil.example): a message must be made for
   * one of them. A function, as the relayer learns the port it listens on only once it listens.
   */
  origins: () => readonly string[];
  /** The registry's accountOfOwner: the account `owner` owns, or 0. */
  accountOfOwner(owner: string): Promise<number>;
  /** Whether an address holds code (a Safe or another contract). */
  isContract(address: string): Promise<boolean>;
  now?: () => number;
  /** Verified messages kept (bounded); a session signs many requests with the same message. */
  maxRemembered?: number;
  /** Where sign-in nonces are spent (the data layer); absent: in this process only. */
  nonces?: SignInNonces;
  /** Signed-out sessions (the data layer); absent: nothing is revoked and sign-out fails (benches only). */
  revocations?: SessionRevocations;
}

/** What POST /core/v1/auth/siwe/sign_out did: ended the session now, or found it already ended. */
export type SignOutOutcome = "signed_out" | "already_signed_out" | "expired";

export class SiweVerifier {
  private readonly now: () => number;
  private readonly maxRemembered: number;
  /** sha256(message ‖ signature) → its verified session: per request, only the expiry is re-checked. */
  private readonly verified = new Map<string, SiweSession>();
  private readonly nonces: SignInNonces;

  constructor(private readonly o: SiweVerifierOptions) {
    this.now = o.now ?? (() => Math.floor(Date.now() / 1000));
    this.maxRemembered = o.maxRemembered ?? 100_000;
    this.nonces = o.nonces ?? new InProcessNonces(this.maxRemembered);
  }

  /**
   * Checks a SIWE message and its signature against the service's own origins. Used by every request of a
   * session; the expensive part (recovery, the owner lookup) runs once per message. `allowExpired`
   * (sign-out only): a message past its Expiration Time is still checked in full, and answered.
   */
  async verify(
    messageText: string,
    signature: string,
    opts: { allowExpired?: boolean } = {},
  ): Promise<SiweSession> {
    const memo = createHash("sha256").update(messageText).update("\0").update(signature).digest("hex");
    const known = this.verified.get(memo);
    if (known) {
      // Domain and time are re-checked: they depend on the request, not on the message alone.
      const m = parseSiweMessage(messageText);
      this.checkRequestBound(m, opts.allowExpired === true);
      return known;
    }
    const m = parseSiweMessage(messageText);
    const session = this.checkMessage(m, opts.allowExpired === true);
    if (!/^0x[0-9a-fA-F]{130}$/.test(signature))
      throw invalid("The sign-in signature must be 0x + 65 bytes (r ‖ s ‖ v) in hex.");
    const signer = recoverAddress(personalMessageDigest(messageText), signature);
    const claimed = getAddress(m.address);
    if (signer !== claimed) {
      if (await this.o.isContract(claimed))
        throw new ApiError(
          "siwe_owner_is_contract",
          `${claimed} is a contract (a Safe?): it cannot sign in with a wallet signature. A Safe's owners make changes with the Safe tool (npm run safe) or a Safe Transaction Builder file from the dashboard.`,
        );
      throw invalid(`The sign-in message was not signed by ${claimed}.`);
    }
    const accountId = await this.o.accountOfOwner(claimed);
    if (!accountId)
      throw new ApiError(
        "siwe_not_owner",
        `${claimed} owns no Sigil account. Only an account's on-chain owner can sign in with a wallet (an account owned by a Safe cannot: use the Safe tool).`,
        { details: { address: claimed } },
      );
    const out: SiweSession = { ...session, owner: claimed, accountId };
    this.remember(memo, out);
    return out;
  }

  /** Sign-in: verify, and refuse a nonce that already opened a session (on any instance). */
  async signIn(messageText: string, signature: string): Promise<SiweSession> {
    const session = await this.verify(messageText, signature);
    if (!(await this.nonces.claim(session.owner, session.nonce, session.expiresAt, this.now())))
      throw new ApiError(
        "siwe_nonce_replayed",
        "This sign-in message's nonce was already used to sign in; sign a new message.",
      );
    return session;
  }

  /** Refuses a session whose key was signed out (every request of a session runs this). */
  async assertNotRevoked(session: SiweSession): Promise<void> {
    if (this.o.revocations && (await this.o.revocations.isRevoked(session.sessionKey, this.now())))
      throw new ApiError(
        "siwe_session_revoked",
        "This wallet session was signed out; sign in again with the wallet.",
        { details: { session_key: session.sessionKey } },
      );
  }

  /**
   * Ends a verified session: its key is refused from now on, on every instance, until the session would
   * have expired. Signing out twice, or after the session expired, is not an error (there is nothing
   * left to end), so a page can always sign out and forget its session.
   */
  async signOut(session: SiweSession): Promise<SignOutOutcome> {
    const now = this.now();
    if (now >= session.expiresAt) return "expired";
    // Every relayer is built with a store (relayer/index.ts); only a bare verifier (benches) lacks one.
    if (!this.o.revocations) throw new Error("this SiweVerifier was built without a revocation store");
    const fresh = await this.o.revocations.revoke(session.sessionKey, session.expiresAt, now);
    return fresh ? "signed_out" : "already_signed_out";
  }

  private checkMessage(m: SiweMessage, allowExpired: boolean): Omit<SiweSession, "owner" | "accountId"> {
    if (m.version !== "1") throw invalid(`The sign-in message's Version is ${m.version}; only 1 exists.`);
    if (!/^[A-Za-z0-9]{16,}$/.test(m.nonce))
      throw invalid("The sign-in message's Nonce must be at least 16 letters and digits.");
    const sessionKeys = m.resources.filter((r) => r.startsWith(SESSION_KEY_RESOURCE));
    if (sessionKeys.length !== 1)
      throw invalid(`The sign-in message must name exactly one ${SESSION_KEY_RESOURCE}<address> resource.`);
    const sessionKey = sessionKeys[0].slice(SESSION_KEY_RESOURCE.length);
    if (!/^0x[0-9a-fA-F]{40}$/.test(sessionKey)) throw invalid("The session key resource is not an address.");
    if (m.expirationTime === null)
      throw invalid("The sign-in message needs an Expiration Time (a session ends within an hour).");
    const issuedAt = seconds(m.issuedAt, "Issued At");
    const expiresAt = seconds(m.expirationTime, "Expiration Time");
    if (expiresAt - issuedAt > SIWE_MAX_LIFETIME_SECONDS)
      throw invalid(
        `The sign-in message is valid for ${expiresAt - issuedAt} s; at most ${SIWE_MAX_LIFETIME_SECONDS} s.`,
      );
    this.checkRequestBound(m, allowExpired);
    return { sessionKey: getAddress(sessionKey), expiresAt, nonce: m.nonce };
  }

  /** The checks that depend on where and when the message is used. */
  private checkRequestBound(m: SiweMessage, allowExpired = false): void {
    let uri: URL;
    try {
      uri = new URL(m.uri);
    } catch {
      throw invalid("The sign-in message's URI is not a URL.");
    }
    const origins = this.ownOrigins();
    const own = origins.find(
      (o) => sameAuthority(o, m.domain) && uri.protocol === o.protocol && uri.host === o.host,
    );
    if (!own) {
      const hosts = origins.map((o) => o.host);
      throw new ApiError(
        "siwe_wrong_domain",
        `The sign-in message was made for ${m.domain} (URI ${m.uri}), not for this service (${origins.map((o) => o.origin).join(", ")}): sign in on this service's own page.`,
        {
          details: {
            domain: m.domain,
            expected: hosts[0] ?? null,
            public_urls: origins.map((o) => o.origin),
          },
        },
      );
    }
    if (m.chainId !== this.o.chainId)
      throw new ApiError(
        "siwe_wrong_chain",
        `The sign-in message is for chain ${m.chainId}; this service's registry is on chain ${this.o.chainId}.`,
        { details: { chain_id: m.chainId, expected: this.o.chainId } },
      );
    const now = this.now();
    const issuedAt = seconds(m.issuedAt, "Issued At");
    const expiresAt = seconds(m.expirationTime ?? m.issuedAt, "Expiration Time");
    const notBefore = m.notBefore === null ? issuedAt : seconds(m.notBefore, "Not Before");
    if (issuedAt > now + SIWE_CLOCK_SKEW_SECONDS || notBefore > now + SIWE_CLOCK_SKEW_SECONDS)
      throw new ApiError("siwe_expired", "The sign-in message is not valid yet (Issued At / Not Before).");
    if (now >= expiresAt && !allowExpired)
      throw new ApiError(
        "siwe_expired",
        `The sign-in session expired at ${new Date(expiresAt * 1000).toISOString()}; sign in again.`,
        { details: { expiration: expiresAt } },
      );
  }

  /** The configured origins, parsed once per list (the relayer sets its list once, when it listens). */
  private parsedOrigins: { from: readonly string[]; urls: URL[] } | null = null;
  private ownOrigins(): URL[] {
    const from = this.o.origins();
    if (this.parsedOrigins?.from !== from) this.parsedOrigins = { from, urls: from.map((o) => new URL(o)) };
    return this.parsedOrigins.urls;
  }

  private remember(memo: string, session: SiweSession): void {
    if (this.verified.size >= this.maxRemembered) {
      const now = this.now();
      for (const [k, s] of this.verified) if (s.expiresAt <= now) this.verified.delete(k);
      if (this.verified.size >= this.maxRemembered) this.verified.clear();
    }
    this.verified.set(memo, session);
  }
}

/**
 * Whether a message's domain (an RFC 3986 authority) names the host of `origin`: compared as URLs parse
 * them, so case and an explicit default port ("sigil.example:443" for https) do not matter.
 */
function sameAuthority(origin: URL, domain: string): boolean {
  try {
    const parsed = new URL(`${origin.protocol}//${domain}`);
    return parsed.host === origin.host && parsed.username === "" && parsed.pathname === "/";
  } catch {
    return false;
  }
}

/** Sign-in nonces remembered in this process (a verifier built without the data layer: tests, benches). */
class InProcessNonces implements SignInNonces {
  /** `owner:nonce` → expiry. */
  private readonly used = new Map<string, number>();
  constructor(private readonly max: number) {}

  async claim(owner: string, nonce: string, expiresAt: number, now: number): Promise<boolean> {
    for (const [k, until] of this.used) if (until <= now) this.used.delete(k);
    const entry = `${owner}:${nonce}`;
    if (this.used.has(entry)) return false;
    if (this.used.size >= this.max)
      throw new ApiError("rate_limited", "Too many sign-ins right now; retry shortly.", {
        retryAfter: 5,
      });
    this.used.set(entry, expiresAt);
    return true;
  }
}

/** The SIWE headers of a request, or null when it has none (a partial pair is refused). */
export function siweHeaders(
  get: (name: string) => string | undefined,
): { message: string; signature: string } | null {
  const encoded = get(SIWE_HEADER);
  const signature = get(SIWE_SIGNATURE_HEADER);
  if (encoded === undefined && signature === undefined) return null;
  if (encoded === undefined || signature === undefined)
    throw invalid("Send both Sigil-Siwe and Sigil-Siwe-Signature.");
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw invalid("Sigil-Siwe must be base64.");
  return { message: Buffer.from(encoded, "base64").toString("utf8"), signature };
}
