/**
 * API key strings (design §2, docs/background.md): `ak_` + 64 lowercase hex (account key), `uk_` + 64 lowercase
 * hex (usage key), or a raw `0x` + 64 hex private key (a usage key a Safe registered by address; either
 * hex case, since wallets export both). The 32 bytes are a secp256k1 scalar 1 ≤ k < n; nothing else is
 * accepted: no trimming, no missing prefix, no short keys. Account and usage keys come from the CSPRNG
 * and are never derived from the root key, so no PKP id can ever reach them (reference gap 2, docs/background.md).
 */
import { createHash, randomBytes } from "node:crypto";
import { keccak256, toUtf8Bytes } from "ethers";
import { EnclaveError } from "./errors";
import { Lru } from "./lru";
import { addressOf, isValidScalar } from "./secp";

export type ApiKeyKind = "account" | "usage";

export interface ParsedApiKey {
  kind: ApiKeyKind;
  /** Checksummed address of the key pair. */
  address: string;
  /** keccak256 of the UTF-8 key string, as recorded on chain at registration. */
  keyHash: string;
}

export interface GeneratedApiKey extends ParsedApiKey {
  apiKey: string;
}

const ACCOUNT_PREFIX = "ak_";
const USAGE_PREFIX = "uk_";
const PREFIXED = /^(ak_|uk_)([0-9a-f]{64})$/;
const RAW = /^0x([0-9a-fA-F]{64})$/;
const MAX_INPUT = 256; // longer strings are refused before any regex runs

export function keyHash(apiKey: string): string {
  if (typeof apiKey !== "string") throw invalid("API key must be a string");
  return keccak256(toUtf8Bytes(apiKey));
}

export function generateKeyString(kind: ApiKeyKind): string {
  for (;;) {
    const k = randomBytes(32);
    // Rejection sampling: a uniformly random 32-byte value is out of range with probability ~2^-128.
    if (isValidScalar(k)) return (kind === "account" ? ACCOUNT_PREFIX : USAGE_PREFIX) + k.toString("hex");
  }
}

/**
 * Splits a key string into its kind and private scalar, with strict validation. The scalar is returned
 * to enclave code only (signing); the error never quotes the input.
 */
export function decodeApiKey(apiKey: unknown): { kind: ApiKeyKind; scalar: Uint8Array } {
  if (typeof apiKey !== "string") throw invalid("API key must be a string");
  if (apiKey.length === 0) throw invalid("API key is empty");
  if (apiKey.length > MAX_INPUT) throw invalid("API key has the wrong length");
  let kind: ApiKeyKind;
  let hexPart: string;
  const m = PREFIXED.exec(apiKey);
  const r = m ? null : RAW.exec(apiKey);
  if (m) {
    kind = m[1] === ACCOUNT_PREFIX ? "account" : "usage";
    hexPart = m[2];
  } else if (r) {
    kind = "usage";
    hexPart = r[1];
  } else {
    throw invalid(describeShapeError(apiKey));
  }
  const scalar = Uint8Array.from(Buffer.from(hexPart, "hex"));
  if (!isValidScalar(scalar))
    throw invalid("API key is not a valid secp256k1 private key (zero or ≥ curve order)");
  return { kind, scalar };
}

/** A reason for a malformed key that says what is wrong without repeating any of it. */
function describeShapeError(s: string): string {
  if (s !== s.trim()) return "API key has surrounding whitespace";
  const prefix = s.startsWith(ACCOUNT_PREFIX) || s.startsWith(USAGE_PREFIX) ? 3 : s.startsWith("0x") ? 2 : -1;
  if (prefix < 0) return "API key must start with ak_, uk_ or 0x";
  const body = s.slice(prefix);
  if (body.length !== 64) return "API key has the wrong length";
  if (prefix === 3 && /^[0-9a-fA-F]{64}$/.test(body)) return "API key hex must be lowercase";
  return "API key is not hexadecimal";
}

function invalid(details: string): EnclaveError {
  return new EnclaveError("invalid_api_key", "Invalid API key.", { details });
}

/**
 * Parses keys to {kind, address, keyHash}, caching results so a hot key skips the curve multiplication.
 * The cache is keyed by a salted SHA-256 of the key string (per-process random salt), so it holds no
 * key material and its keys are useless outside this process.
 */
export class ApiKeyParser {
  readonly #cache: Lru<string, ParsedApiKey>;
  readonly #salt = randomBytes(16);

  constructor(maxEntries = 10_000) {
    this.#cache = new Lru(maxEntries);
  }

  parse(apiKey: unknown): ParsedApiKey {
    if (typeof apiKey !== "string") throw invalid("API key must be a string");
    const cacheKey = createHash("sha256").update(this.#salt).update(apiKey).digest("base64");
    const hit = this.#cache.get(cacheKey);
    if (hit) return { ...hit };
    const { kind, scalar } = decodeApiKey(apiKey);
    const parsed: ParsedApiKey = Object.freeze({
      kind,
      address: addressOf(scalar),
      keyHash: keyHash(apiKey),
    });
    scalar.fill(0);
    this.#cache.set(cacheKey, parsed);
    return { ...parsed };
  }

  get cacheSize(): number {
    return this.#cache.size;
  }
}
