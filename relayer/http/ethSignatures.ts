/**
 * Checking Ethereum signatures that clients send: who signed a personal message (signed requests, wallet
 * sign-in) or a typed-data digest (forward requests). Public data only; nothing secret passes here.
 *
 * This sits on every signed request, so it is built for the repeat caller: a key signs many requests.
 *  - libsecp256k1's native binding where it is built (noble otherwise), and the native keccak the enclave
 *    uses (`enclave/keccak.ts`), each called directly, never through the packages' stream wrappers.
 *  - Once a signature has been recovered to an address, that address's public key is remembered
 *    (bounded). A later signature claimed for the same address is then *verified* against the key
 *    (about 20% cheaper than recovering it, and no keccak to turn the key into an address). The key is
 *    only ever learnt by recovery, so nobody can plant one.
 *
 * What verifying does not check is the recovery byte v beyond its range (27/28 or 0/1): it is a hint for
 * recovery, not part of what was signed. A copy of a signature with v flipped is still the key's
 * signature over the same message; signed requests refuse it as a replay (same nonce), and nothing
 * else accepts a signature twice. High-s signatures are accepted the same way recovery accepts them
 * (normalised first), so a request's outcome never depends on whether its key was seen before.
 */
import { secp256k1 as noble } from "@noble/curves/secp256k1";
import { getAddress } from "ethers";
import { keccak256Bytes } from "../../enclave";

type LibSecp = typeof import("secp256k1");
/** libsecp256k1's native binding where built (recovery in ~0.05 ms); noble otherwise. */
const nativeSecp: LibSecp | null = (() => {
  try {
    return require("secp256k1/bindings") as LibSecp;
  } catch {
    return null;
  }
})();

/** Upper bound of each memo below; cleared whole when reached (rebuilt by the next requests). */
const MEMO_LIMIT = 100_000;

/** EIP-191 personal-message digest of UTF-8 text (what ethers' hashMessage computes), 32 bytes. */
export function personalMessageDigestBytes(message: string): Uint8Array {
  const bodyLength = Buffer.byteLength(message, "utf8");
  const prefix = `\x19Ethereum Signed Message:\n${bodyLength}`;
  const bytes = Buffer.allocUnsafe(prefix.length + bodyLength);
  bytes.write(prefix, 0, "latin1");
  bytes.write(message, prefix.length, "utf8");
  return keccak256Bytes(bytes);
}

/** personalMessageDigestBytes as 0x hex. */
export function personalMessageDigest(message: string): string {
  const d = personalMessageDigestBytes(message);
  return "0x" + Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString("hex");
}

/** Checksummed forms of addresses seen (bounded): a key signs many requests. */
const checksums = new Map<string, string>();
export function checksummed(lower: string): string {
  let c = checksums.get(lower);
  if (c === undefined) {
    if (checksums.size >= MEMO_LIMIT) checksums.clear();
    checksums.set(lower, (c = getAddress(lower)));
  }
  return c;
}

/** Address (checksummed) of the key that made a 65-byte Ethereum signature (v = 27/28 or 0/1) over a digest. */
export function recoverAddress(digestHex: string, signatureHex: string): string | null {
  const sig = signatureBytes(signatureHex);
  if (!sig) return null;
  const recovered = recoverPublicKey(Buffer.from(digestHex.slice(2), "hex"), sig);
  return recovered === null ? null : checksummed(addressOfPublicKey(recovered));
}

/** Public keys (65 bytes, uncompressed) learnt by recovering a signature, by lower-case address. */
const publicKeys = new Map<string, Uint8Array>();

/**
 * Whether `signatureHex` (0x + 65 bytes r ‖ s ‖ v) is `claimedLower`'s signature over `digest`.
 * Recovers the first time an address is claimed and verifies against the remembered key afterwards.
 */
export function isSignatureOf(claimedLower: string, digest: Uint8Array, signatureHex: string): boolean {
  const sig = signatureBytes(signatureHex);
  if (!sig) return false;
  const known = nativeSecp ? publicKeys.get(claimedLower) : undefined;
  if (known !== undefined) {
    // Verification wants low s; recovery takes either, so normalise to answer exactly as it would.
    // (sig.rs is this call's own copy of the bytes, so normalising it in place is safe.)
    return nativeSecp!.ecdsaVerify(nativeSecp!.signatureNormalize(sig.rs), digest, known);
  }
  const recovered = recoverPublicKey(digest, sig);
  if (recovered === null || addressOfPublicKey(recovered) !== claimedLower) return false;
  if (nativeSecp) {
    if (publicKeys.size >= MEMO_LIMIT) publicKeys.clear();
    publicKeys.set(claimedLower, recovered);
  }
  return true;
}

interface SignatureParts {
  rs: Buffer;
  recovery: 0 | 1;
}

function signatureBytes(signatureHex: string): SignatureParts | null {
  if (signatureHex.length !== 132) return null;
  const sig = Buffer.from(signatureHex.slice(2), "hex");
  if (sig.length !== 65) return null;
  const v = sig[64];
  const recovery = v >= 27 ? v - 27 : v;
  if (recovery !== 0 && recovery !== 1) return null;
  return { rs: sig.subarray(0, 64), recovery };
}

function recoverPublicKey(digest: Uint8Array, sig: SignatureParts): Uint8Array | null {
  try {
    return nativeSecp
      ? nativeSecp.ecdsaRecover(sig.rs, sig.recovery, digest, false)
      : noble.Signature.fromCompact(sig.rs)
          .addRecoveryBit(sig.recovery)
          .recoverPublicKey(digest)
          .toRawBytes(false);
  } catch {
    return null;
  }
}

/** Lower-case 0x address of an uncompressed public key. */
function addressOfPublicKey(pub: Uint8Array): string {
  const hash = keccak256Bytes(pub.subarray(1));
  return "0x" + Buffer.from(hash.buffer, hash.byteOffset + 12, 20).toString("hex");
}
