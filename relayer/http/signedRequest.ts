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
 * signature that does not recover to Sigil-Key (signature_invalid: wrong key, other deployment, altered
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
import { createHash } from "node:crypto";
import type { Request } from "express";
import { getAddress, keccak256 } from "ethers";
import { secp256k1 as noble } from "@noble/curves/secp256k1";
import { ApiError } from "../errors";

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

type LibSecp = typeof import("secp256k1");
/** libsecp256k1's native binding where built (recovery in ~0.05 ms); noble otherwise. Public data only. */
const nativeSecp: LibSecp | null = (() => {
  try {
    return require("secp256k1/bindings") as LibSecp;
  } catch {
    return null;
  }
})();

/** Whether the request carries a signature (any of the headers: a partial set is refused, not ignored). */
export function isSignedRequest(req: Request): boolean {
  return SIGNED_HEADERS.some((h) => req.get(h) !== undefined);
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

  constructor(private readonly o: SignedRequestVerifierOptions) {
    this.window = o.windowSeconds ?? SIGNATURE_WINDOW_SECONDS;
    this.maxNonces = o.maxNonces ?? MAX_REMEMBERED_NONCES;
    this.now = o.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /**
   * What authentication calls: `verify` in one process (synchronous, nonces in memory), or the same
   * checks with the nonce claimed in the shared database.
   */
  verifyRequest(req: Request, rawBody: Buffer | undefined): string | Promise<string> {
    const shared = this.o.sharedNonces;
    if (!shared) return this.verify(req, rawBody);
    const { claimed, nonce, ts } = this.checkSignature(req, rawBody);
    const now = this.now();
    return shared.claim(claimed, nonce, Math.max(now, ts) + this.window, now).then((fresh) => {
      if (!fresh) throw replayed();
      return checksummed(claimed);
    });
  }

  /** The checksummed address that signed `req`, or a 401 saying what is wrong (nonces in memory). */
  verify(req: Request, rawBody: Buffer | undefined): string {
    const { claimed, nonce, ts } = this.checkSignature(req, rawBody);
    const entry = `${claimed}:${nonce}`;
    const address = checksummed(claimed);
    const now = this.now();
    this.forgetExpired(now);
    if (this.seen.has(entry)) throw replayed();
    if (this.seen.size >= this.maxNonces)
      throw new ApiError(
        429,
        "rate_limited",
        "Too many signed requests in the replay window; retry shortly.",
        {
          retryAfter: 5,
        },
      );
    this.seen.set(entry, Math.max(now, ts) + this.window);
    return address;
  }

  /** Every check but the nonce's: the signer (lower case), the nonce and the timestamp. */
  private checkSignature(
    req: Request,
    rawBody: Buffer | undefined,
  ): { claimed: string; nonce: string; ts: number } {
    const h = (name: string) => req.get(name);
    const key = h("sigil-key");
    const timestamp = h("sigil-timestamp");
    const nonce = h("sigil-nonce");
    const contentSha = h("sigil-content-sha256");
    const signature = h("sigil-signature");
    if (req.get("x-api-key") !== undefined || req.get("authorization") !== undefined)
      throw refuse("signature_malformed", "Send either a signature or a key (X-Api-Key / Bearer), not both.");
    const missing = SIGNED_HEADERS.filter((n) => h(n) === undefined);
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

    const bodySha = createHash("sha256")
      .update(rawBody ?? Buffer.alloc(0))
      .digest("hex");
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
      SIGNED_REQUEST_VERSION,
      String(this.o.chainId),
      this.o.registryAddress.toLowerCase(),
      req.method.toUpperCase(),
      req.originalUrl,
      contentSha,
      timestamp,
      nonce,
    ].join("\n");
    // Compared in lower case: checksumming costs a keccak, done once below for the address that passed.
    const claimed = key!.toLowerCase();
    const recovered = recoverLower(personalMessageDigest(message), signature!);
    if (recovered !== claimed)
      throw refuse(
        "signature_invalid",
        "The signature was not made by Sigil-Key over this request (method, path, body hash, timestamp, nonce) for this service.",
      );
    return { claimed, nonce: nonce!, ts };
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

function replayed(): ApiError {
  return refuse("signature_replayed", "This nonce was already used by this key; sign each request anew.");
}

function refuse(code: string, message: string, details?: Record<string, unknown>): ApiError {
  return new ApiError(401, code, message, details ? { details } : {});
}

type Keccak = (data: Buffer) => Buffer;
/** libkeccak's native binding where built: ethers' hashMessage costs ~5× more per request. */
const nativeKeccak: Keccak | null = (() => {
  try {
    const create = require("keccak/bindings") as (alg: string) => { update(d: Buffer): { digest(): Buffer } };
    return (data: Buffer) => create("keccak256").update(data).digest();
  } catch {
    return null;
  }
})();

/** EIP-191 personal-message digest (what ethers' hashMessage computes), as 0x hex. */
export function personalMessageDigest(message: string): string {
  const body = Buffer.from(message, "utf8");
  const bytes = Buffer.concat([Buffer.from(`\x19Ethereum Signed Message:\n${body.length}`, "utf8"), body]);
  return nativeKeccak ? "0x" + nativeKeccak(bytes).toString("hex") : keccak256(bytes);
}

/** Checksummed forms of addresses seen (bounded): a key signs many requests. */
const checksums = new Map<string, string>();
function checksummed(lower: string): string {
  let c = checksums.get(lower);
  if (c === undefined) {
    if (checksums.size >= 100_000) checksums.clear();
    checksums.set(lower, (c = getAddress(lower)));
  }
  return c;
}

/** Address (checksummed) of the key that made a 65-byte Ethereum signature (v = 27/28 or 0/1) over a digest. */
export function recoverAddress(digestHex: string, signatureHex: string): string | null {
  const lower = recoverLower(digestHex, signatureHex);
  return lower === null ? null : checksummed(lower);
}

/** recoverAddress in lower case, without the checksum's keccak. */
function recoverLower(digestHex: string, signatureHex: string): string | null {
  const sig = Buffer.from(signatureHex.slice(2), "hex");
  const v = sig[64];
  const recovery = v >= 27 ? v - 27 : v;
  if (recovery !== 0 && recovery !== 1) return null;
  const digest = Buffer.from(digestHex.slice(2), "hex");
  let pub: Uint8Array;
  try {
    pub = nativeSecp
      ? nativeSecp.ecdsaRecover(sig.subarray(0, 64), recovery, digest, false)
      : noble.Signature.fromCompact(sig.subarray(0, 64))
          .addRecoveryBit(recovery)
          .recoverPublicKey(digest)
          .toRawBytes(false);
  } catch {
    return null;
  }
  // Native keccak where built: half the cost of ethers' keccak256 (hex conversions), on every request.
  const hash = nativeKeccak ? nativeKeccak(Buffer.from(pub.buffer, pub.byteOffset + 1, 64)) : null;
  return hash ? "0x" + hash.subarray(12).toString("hex") : "0x" + keccak256(pub.subarray(1)).slice(26);
}

/** express.json's `verify` hook: keeps the exact body bytes, which the signature covers. */
export function keepRawBody(req: object, _res: unknown, buf: Buffer): void {
  (req as { rawBody?: Buffer }).rawBody = buf;
}

export function rawBodyOf(req: Request): Buffer | undefined {
  return (req as Request & { rawBody?: Buffer }).rawBody;
}
