/**
 * Key derivation from the root key (design §2, docs/background.md). Pure functions of (root, label, id): nothing
 * derived is stored anywhere. Callers outside enclave/ never see this module; the Enclave class passes
 * its private root key in.
 *
 * HKDF-SHA256, no salt (the root key is 32 uniformly random bytes, so HKDF-Extract needs none),
 * info = u16be(len(label)) ‖ label ‖ u16be(len(id)) ‖ id. Length prefixes make (label, id) pairs
 * unambiguous even for variable-length ids such as CID strings; the "/v1/" in every label lets a future
 * scheme coexist with this one.
 *
 * secp256k1 keys take 48 bytes of output reduced modulo n with noble's mapHashToField (FIPS 186-5
 * A.2.1 style: bias below 2^-128, never zero). AES keys take 32 bytes under a different label, so a
 * PKP's signing key and its encryption key are independent (reference gap 4, docs/background.md).
 */
import { createSecretKey, hkdfSync, type KeyObject } from "node:crypto";
import { mapHashToField } from "@noble/curves/abstract/modular";
import { secp256k1 } from "@noble/curves/secp256k1";

export const LABELS = {
  pkpSigning: "sigil/pkp/v1/secp256k1/",
  pkpAes: "sigil/pkp/v1/aes-256-gcm/",
  /**
   * A PKP's Ed25519 seed: its own label, so the seed is an independent HKDF output and never the
   * secp256k1 scalar (or anything computable from it) reused on another curve (chainKeys.ts).
   */
  pkpEd25519: "sigil/pkp/v1/ed25519/",
  action: "sigil/action/v1/",
  owner: "sigil/owner/v1/",
  gas: "sigil/gas/v1/",
  /** Gas wallets of a named relayer instance (enclave/gasSigner.ts gasWalletDerivation). */
  gasInstance: "sigil/gas/v1/instance/",
  record: "sigil/record/v1/aes-256-gcm/",
  /** The root key's public identity, which signs attestation documents (attestation.ts). */
  identity: "sigil/identity/v1/",
} as const;
export type Label = (typeof LABELS)[keyof typeof LABELS];

/**
 * The root key as the derivations take it: its 32 bytes, or (what the Enclave holds) a secret KeyObject
 * made once from them. Both give the same bytes; the KeyObject saves OpenSSL a new key object on every
 * derivation, about a third of its cost, and every key operation derives.
 */
export type RootKey = Uint8Array | KeyObject;

/** The root's KeyObject (a copy inside node:crypto); the caller may zero `root` afterwards. */
export function rootKeyObject(root: Uint8Array): KeyObject {
  return createSecretKey(root);
}

const CURVE_ORDER = secp256k1.CURVE.n;
const NO_SALT = new Uint8Array(0);
const utf8 = new TextEncoder();

function u16be(n: number): Uint8Array {
  if (n > 0xffff) throw new RangeError("derivation input too long");
  return Uint8Array.of(n >> 8, n & 0xff);
}

export function infoFor(label: Label, id: Uint8Array): Uint8Array {
  const l = utf8.encode(label);
  const out = new Uint8Array(2 + l.length + 2 + id.length);
  out.set(u16be(l.length), 0);
  out.set(l, 2);
  out.set(u16be(id.length), 2 + l.length);
  out.set(id, 4 + l.length);
  return out;
}

/** Raw HKDF output (exported for tests and known-answer vectors). */
export function hkdfBytes(root: RootKey, label: Label, id: Uint8Array, length: number): Uint8Array {
  // node:crypto's HKDF (OpenSSL) is the same RFC 5869 function as noble's, at half the cost; every key
  // operation derives, so it matters. The known-answer vectors pin the output.
  return new Uint8Array(hkdfSync("sha256", root, NO_SALT, infoFor(label, id), length));
}

/** A secp256k1 private key scalar (32 bytes, 1 ≤ k < n). */
export function deriveSecp256k1(root: RootKey, label: Label, id: Uint8Array): Uint8Array {
  const okm = hkdfBytes(root, label, id, 48);
  try {
    return mapHashToField(okm, CURVE_ORDER);
  } finally {
    okm.fill(0);
  }
}

export function deriveAesKey(root: RootKey, id: Uint8Array): Uint8Array {
  return hkdfBytes(root, LABELS.pkpAes, id, 32);
}

/** A PKP's 32-byte Ed25519 seed (RFC 8032 secret key): HKDF under its own label, never the secp256k1 key. */
export function deriveEd25519Seed(root: RootKey, id: Uint8Array): Uint8Array {
  return hkdfBytes(root, LABELS.pkpEd25519, id, 32);
}

/** Key of records the relayer keeps at rest (stored idempotent answers), one per record context. */
export function deriveRecordKey(root: RootKey, id: Uint8Array): Uint8Array {
  return hkdfBytes(root, LABELS.record, id, 32);
}

/** Id encodings, one per label. */
export const ids = {
  /** 32 raw bytes of a validated, non-zero pkpId. */
  pkp: (pkpIdBytes: Uint8Array): Uint8Array => pkpIdBytes,
  /** UTF-8 of the canonical CID string (see cid.ts parseCid). */
  action: (canonicalCid: string): Uint8Array => utf8.encode(canonicalCid),
  /** 20 raw bytes of the master key's address. */
  owner: (addressBytes: Uint8Array): Uint8Array => addressBytes,
  /** SHA-256 of the record's context string (it may hold an API key, which must not be kept). */
  record: (contextDigest: Uint8Array): Uint8Array => contextDigest,
  /** u32 big-endian wallet index. */
  gas: (index: number): Uint8Array =>
    Uint8Array.of(index >>> 24, (index >>> 16) & 0xff, (index >>> 8) & 0xff, index & 0xff),
};
