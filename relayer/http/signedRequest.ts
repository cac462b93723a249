/**
 * Signed requests: a usage key authenticates without being sent. The client signs, for every request,
 *
 *   SIGIL-REQUEST-V1 \n <chain id> \n <registry address, lower case> \n <METHOD> \n <path and query as
 *   sent> \n <hex SHA-256 of the body bytes> \n <unix seconds> \n <nonce: 32 lower-case hex>
 *
 * as an EIP-191 personal message (docs/api.md "Signed requests" has the bytes and a worked example), and
 * sends Sigil-Key (its address), Sigil-Timestamp, Sigil-Nonce, Sigil-Content-Sha256, Sigil-Signature.
 *
 * This module checks them, cheapest first, each failure with its own 401 code so a client can tell
 * which: malformed headers (signature_malformed), a body that is not the one hashed
 * (signature_body_mismatch), a timestamp outside ±SIGNATURE_WINDOW_SECONDS (signature_expired), a
 * signature that is not Sigil-Key's (signature_invalid: wrong key, other deployment, altered
 * method or path), a nonce this key already used within the window (signature_replayed). The nonce is
 * recorded only after the signature holds, so nobody can burn another key's nonces. What it returns is
 * the key's address; authorization is then exactly as for a bearer key.
 *
 * Replay memory, one process (the embedded default, SQLite): in memory and bounded: a nonce is kept
 * until its timestamp leaves the window (a request outside the window is refused anyway), and at most
 * MAX_REMEMBERED_NONCES at once; when full, new signed requests get 429 until entries expire, never a
 * forgotten nonce. Several instances (PostgreSQL): `sharedNonces` records each nonce in the shared
 * database instead (relayer/cluster/sharedNonces.ts), so a request replayed to another instance within
 * the window is refused there too; that costs one round trip per signed request, which the one-process
 * path never pays (`verifyRequest` answers it synchronously).
 */
import { hash } from "node:crypto";
import type { Request } from "express";
import { ApiError, type ErrorCode } from "../errors";
import { checksummed, isSignatureOf, personalMessageDigestBytes } from "./ethSignatures";

const EMPTY = Buffer.alloc(0);

export const SIGNED_REQUEST_VERSION = "SIGIL-REQUEST-V1";
/** How far a signed request's timestamp may be from the relayer's clock, either way (seconds). */
export const SIGNATURE_WINDOW_SECONDS = 120;
export const MAX_REMEMBERED_NONCES = 1_000_000;

export const SIGNED_HEADERS = [
  "sigil-key",
  "sigil-timestamp",
  "sigil-nonce",
  "sigil-content-sha256",
  "sigil-signature",
] as const;

/** Whether the request carries a signature (any of the headers: a partial set is refused, not ignored). */
export function isSignedRequest(req: Request): boolean {
  // Node lower-cases incoming header names; `req.get` would lower-case again on every call.
  const headers = req.headers;
  return SIGNED_HEADERS.some((h) => headers[h] !== undefined);
}

export interface SignedRequestVerifierOptions {
  chainId: number;
  registryAddress: string;
  now?: () => number;
  windowSeconds?: number;
  maxNonces?: number;
  /** Nonces shared by every instance (PostgreSQL); absent: remembered in this process. */
  sharedNonces?: { claim(address: string, nonce: string, expiresAt: number, now: number): Promise<boolean> };
}

export class SignedRequestVerifier {
  /** `address:nonce` → unix second after which the entry can go. Insertion order ≈ expiry order. */
  private readonly seen = new Map<string, number>();
  private readonly window: number;
  private readonly maxNonces: number;
  private readonly now: () => number;
  /** The lines every request of this deployment starts with (version, chain id, registry). */
  private readonly messagePrefix: string;

  constructor(private readonly o: SignedRequestVerifierOptions) {
    this.window = o.windowSeconds ?? SIGNATURE_WINDOW_SECONDS;
    this.maxNonces = o.maxNonces ?? MAX_REMEMBERED_NONCES;
    this.now = o.now ?? (() => Math.floor(Date.now() / 1000));
    this.messagePrefix = [SIGNED_REQUEST_VERSION, String(o.chainId), o.registryAddress.toLowerCase()].join(
      "\n",
    );
  }

  /**
   * What authentication calls: the signature checked in this thread, then the nonce remembered in this
   * process (synchronous: `verify`) or claimed in the shared database (a promise).
   */
  verifyRequest(req: Request, rawBody: Buffer | undefined): string | Promise<string> {
    const signed = this.readRequest(req, rawBody);
    if (!this.isSigned(signed)) throw invalidSignature();
    return this.claimNonce(signed);
  }

  /**
   * The checksummed address that signed `req`, or a 401 saying what is wrong: signature checked in this
   * thread, nonce remembered in this process.
   */
  verify(req: Request, rawBody: Buffer | undefined): string {
    const signed = this.readRequest(req, rawBody);
    if (!this.isSigned(signed)) throw invalidSignature();
    return this.claimNonceHere(signed);
  }

  private isSigned(signed: SignedParts): boolean {
    return isSignatureOf(signed.claimed, personalMessageDigestBytes(signed.message), signed.signature);
  }

  /**
   * Records the nonce of a request whose signature holds (never before: nobody can burn another key's
   * nonces) and answers the signer's checksummed address; a nonce already used is signature_replayed.
   */
  private claimNonce(signed: SignedParts): string | Promise<string> {
    const { claimed, nonce, ts } = signed;
    const shared = this.o.sharedNonces;
    if (shared) {
      const now = this.now();
      return shared.claim(claimed, nonce, Math.max(now, ts) + this.window, now).then((fresh) => {
        if (!fresh) throw replayed();
        return checksummed(claimed);
      });
    }
    return this.claimNonceHere(signed);
  }

  /** claimNonce with the nonces remembered in this process. */
  private claimNonceHere({ claimed, nonce, ts }: SignedParts): string {
    const entry = `${claimed}:${nonce}`;
    const address = checksummed(claimed);
    const now = this.now();
    this.forgetExpired(now);
    if (this.seen.has(entry)) throw replayed();
    if (this.seen.size >= this.maxNonces)
      throw new ApiError("rate_limited", "Too many signed requests in the replay window; retry shortly.", {
        retryAfter: 5,
      });
    this.seen.set(entry, Math.max(now, ts) + this.window);
    return address;
  }

  /**
   * Every check but the signature's and the nonce's (shape, body hash, timestamp), and the text that
   * was signed.
   */
  private readRequest(req: Request, rawBody: Buffer | undefined): SignedParts {
    const headers = req.headers as Record<string, string | undefined>;
    const key = headers["sigil-key"];
    const timestamp = headers["sigil-timestamp"];
    const nonce = headers["sigil-nonce"];
    const contentSha = headers["sigil-content-sha256"];
    const signature = headers["sigil-signature"];
    if (headers["x-api-key"] !== undefined || headers.authorization !== undefined)
      throw refuse("signature_malformed", "Send either a signature or a key (X-Api-Key / Bearer), not both.");
    const missing =
      key === undefined ||
      timestamp === undefined ||
      nonce === undefined ||
      contentSha === undefined ||
      signature === undefined
        ? SIGNED_HEADERS.filter((n) => headers[n] === undefined)
        : [];
    if (missing.length)
      throw refuse(
        "signature_malformed",
        `A signed request needs every Sigil-* header; missing: ${missing.join(", ")}.`,
        {
          missing,
        },
      );
    if (!/^0x[0-9a-fA-F]{40}$/.test(key!))
      throw refuse("signature_malformed", "Sigil-Key must be a 0x address.");
    if (!/^[0-9]{1,12}$/.test(timestamp!))
      throw refuse("signature_malformed", "Sigil-Timestamp must be unix seconds.");
    if (!/^[0-9a-f]{32}$/.test(nonce!))
      throw refuse("signature_malformed", "Sigil-Nonce must be 32 lower-case hex digits.");
    if (!/^[0-9a-f]{64}$/.test(contentSha!))
      throw refuse("signature_malformed", "Sigil-Content-Sha256 must be 64 lower-case hex digits.");
    if (!/^0x[0-9a-fA-F]{130}$/.test(signature!))
      throw refuse("signature_malformed", "Sigil-Signature must be 0x + 65 bytes (r ‖ s ‖ v) in hex.");

    const bodySha = hash("sha256", rawBody ?? EMPTY, "hex");
    if (bodySha !== contentSha)
      throw refuse(
        "signature_body_mismatch",
        "The body is not the one that was signed (its SHA-256 differs).",
      );

    const ts = Number(timestamp);
    const skew = ts - this.now();
    if (Math.abs(skew) > this.window)
      throw refuse(
        "signature_expired",
        `Sigil-Timestamp is ${Math.abs(skew)} s ${skew < 0 ? "old" : "in the future"}; it must be within ${this.window} s of the service's clock.`,
        { window_seconds: this.window, skew_seconds: skew },
      );

    const message = [
      this.messagePrefix,
      req.method.toUpperCase(),
      req.originalUrl,
      contentSha,
      timestamp,
      nonce,
    ].join("\n");
    // Compared in lower case: checksumming costs a keccak, done once for the address that passed.
    return { claimed: key!.toLowerCase(), nonce: nonce!, ts, message, signature: signature! };
  }

  /** Nonces remembered now (tests, metrics). */
  get remembered(): number {
    return this.seen.size;
  }

  private forgetExpired(now: number): void {
    // Entries are inserted roughly in expiry order (timestamps within the window); stop at the first
    // live one, so the sweep costs O(expired).
    for (const [k, until] of this.seen) {
      if (until >= now) break;
      this.seen.delete(k);
    }
  }
}

/** What a signed request claims, and the text its signature must cover. */
interface SignedParts {
  /** Sigil-Key, lower case. */
  claimed: string;
  nonce: string;
  ts: number;
  message: string;
  signature: string;
}

function invalidSignature(): ApiError {
  return refuse(
    "signature_invalid",
    "The signature was not made by Sigil-Key over this request (method, path, body hash, timestamp, nonce) for this service.",
  );
}

function replayed(): ApiError {
  return refuse("signature_replayed", "This nonce was already used by this key; sign each request anew.");
}

function refuse(code: ErrorCode, message: string, details?: Record<string, unknown>): ApiError {
  return new ApiError(code, message, details ? { details } : {});
}

/** express.json's `verify` hook: keeps the exact body bytes, which the signature covers. */
export function keepRawBody(req: object, _res: unknown, buf: Buffer): void {
  (req as { rawBody?: Buffer }).rawBody = buf;
}

export function rawBodyOf(req: Request): Buffer | undefined {
  return (req as Request & { rawBody?: Buffer }).rawBody;
}
