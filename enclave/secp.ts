/**
 * secp256k1 primitives on raw 32-byte scalars: public key, address, digest signature. Kept apart from
 * derivation and key parsing so every signer in the enclave goes through the same few lines.
 */
import { secp256k1 } from "@noble/curves/secp256k1";
import { keccak_256 } from "@noble/hashes/sha3";
import { bytesToHex } from "@noble/hashes/utils";
import { getAddress } from "ethers";

export const CURVE_ORDER = secp256k1.CURVE.n;

/** 1 ≤ k < n for a 32-byte big-endian scalar. */
export function isValidScalar(k: Uint8Array): boolean {
  if (k.length !== 32) return false;
  const v = BigInt("0x" + bytesToHex(k));
  return v > 0n && v < CURVE_ORDER;
}

export function publicKeyOf(priv: Uint8Array): Uint8Array {
  return secp256k1.getPublicKey(priv, false);
}

export function addressOfPublicKey(uncompressed: Uint8Array): string {
  return getAddress("0x" + bytesToHex(keccak_256(uncompressed.subarray(1)).subarray(12)));
}

export function addressOf(priv: Uint8Array): string {
  return addressOfPublicKey(publicKeyOf(priv));
}

/** RFC 6979 deterministic, low-s; 65 bytes r ‖ s ‖ v with v = 27 + recovery (Ethereum convention). */
export function signDigest(priv: Uint8Array, digest: Uint8Array): string {
  const sig = secp256k1.sign(digest, priv, { lowS: true });
  return "0x" + sig.toCompactHex() + (27 + sig.recovery).toString(16);
}

export function hex(bytes: Uint8Array): string {
  return "0x" + bytesToHex(bytes);
}
