/**
 * secp256k1 primitives on raw 32-byte scalars: public key, address, digest signature. Kept apart from
 * derivation and key parsing so every signer in the enclave goes through the same few lines.
 *
 * Public keys and signatures use libsecp256k1 (the `secp256k1` package's native binding): about five
 * times faster than noble here, and signing sits on every execution's key operation and every path-A
 * write. Both are RFC 6979 deterministic with low s, so signatures are byte-for-byte what noble makes
 * (the known-answer vectors and a cross-check test hold it to that). Nothing is kept: the scalar is only
 * read for the call.
 *
 * We load the native binding directly, not the package's index: where no binary exists, the index falls
 * back to `elliptic`, whose signing is not constant-time. Key material must not go there, so without
 * the binding we use noble (audited, written to avoid secret-dependent branches) at its lower speed.
 */
import { secp256k1 } from "@noble/curves/secp256k1";
import { keccak256Bytes } from "./keccak";
import { bytesToHex } from "@noble/hashes/utils";
import { getAddress } from "ethers";

export const CURVE_ORDER = secp256k1.CURVE.n;

type LibSecp = typeof import("secp256k1");
/** The native libsecp256k1 binding, or null where it is not built (then noble signs). */
export const nativeSecp: LibSecp | null = (() => {
  try {
    return require("secp256k1/bindings") as LibSecp;
  } catch {
    return null;
  }
})();

/** 1 ≤ k < n for a 32-byte big-endian scalar. */
export function isValidScalar(k: Uint8Array): boolean {
  if (k.length !== 32) return false;
  const v = BigInt("0x" + bytesToHex(k));
  return v > 0n && v < CURVE_ORDER;
}

export function publicKeyOf(priv: Uint8Array): Uint8Array {
  return nativeSecp ? nativeSecp.publicKeyCreate(priv, false) : secp256k1.getPublicKey(priv, false);
}

export function addressOfPublicKey(uncompressed: Uint8Array): string {
  return getAddress("0x" + bytesToHex(keccak256Bytes(uncompressed.subarray(1)).subarray(12)));
}

export function addressOf(priv: Uint8Array): string {
  return addressOfPublicKey(publicKeyOf(priv));
}

/** RFC 6979 deterministic, low-s; 65 bytes r ‖ s ‖ v with v = 27 + recovery (Ethereum convention). */
export function signDigest(priv: Uint8Array, digest: Uint8Array): string {
  const sig = signDigestParts(priv, digest);
  return "0x" + bytesToHex(sig.compact) + (27 + sig.recovery).toString(16);
}

/** The same signature as r ‖ s (64 bytes) and the recovery bit, for transaction encodings. */
export function signDigestParts(
  priv: Uint8Array,
  digest: Uint8Array,
): { compact: Uint8Array; recovery: number } {
  if (digest.length !== 32) throw new RangeError("digest must be 32 bytes");
  if (nativeSecp) {
    const { signature, recid } = nativeSecp.ecdsaSign(digest, priv);
    return { compact: signature, recovery: recid };
  }
  const sig = secp256k1.sign(digest, priv, { lowS: true });
  return { compact: sig.toCompactRawBytes(), recovery: sig.recovery };
}

export function hex(bytes: Uint8Array): string {
  return "0x" + bytesToHex(bytes);
}
