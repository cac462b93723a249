/**
 * A PKP's keys for chains beyond the EVM: its Ed25519 key (Solana) and BIP-340 Schnorr signatures of its
 * secp256k1 key, plain or with the BIP-341 tweak for Taproot key-path spends. Pure functions over raw
 * key bytes, like secp.ts; the Enclave derives the keys (derive.ts) and zeroes them after each call.
 *
 * - Ed25519: the 32-byte seed is its own HKDF output (derive.ts, label `sigil/pkp/v1/ed25519/`), never
 *   the secp256k1 scalar: the two keys are independent, and nothing signed with one helps against the
 *   other.
 * - Schnorr: the same secp256k1 scalar as the PKP's ECDSA key (BIP-340 signs with the key whose x-only
 *   public key is the x coordinate of the ECDSA public key; the signer negates the scalar when that
 *   point's y is odd, so the x-only key names it).
 * - Taproot (BIP-341 key path): output key Q = P + t·G with t = tagged_hash("TapTweak", x(P) ‖ merkle
 *   root), the merkle root omitted when there is no script tree (the default here). The spending key is
 *   d' + t, with d' the scalar negated when P has odd y.
 *
 * The math is @noble/curves' (audited); the tests verify every signature with a second, independent
 * verifier (@bitcoinerlab/secp256k1 for Schnorr, @solana/kit for Ed25519) and bitcoinjs-lib's P2TR.
 */
import { ed25519 } from "@noble/curves/ed25519";
import { schnorr, secp256k1 } from "@noble/curves/secp256k1";
import { base58, bech32m } from "@scure/base";
import { nativeSecp } from "./secp";
import {
  ed25519Sign,
  schnorrSign,
  schnorrSignWith,
  taprootSecret,
  taprootTweak,
  to32Bytes,
  toBigInt,
} from "./chainSign";

// The signing functions live in chainSign.js (the crypto thread runs them too).
export { ed25519Sign, schnorrSign, schnorrSignWith, taprootSecret, taprootTweak };

const Point = secp256k1.ProjectivePoint;

// ---- Ed25519 ----------------------------------------------------------------------------------------

export function ed25519PublicKey(seed: Uint8Array): Uint8Array {
  // noble, not node:crypto: OpenSSL's key objects cost more to build than noble's whole computation.
  return ed25519.getPublicKey(seed);
}

/** A Solana address: the base58 of the 32-byte Ed25519 public key. */
export function solanaAddress(publicKey: Uint8Array): string {
  return base58.encode(publicKey);
}

// ---- BIP-340 / BIP-341 ------------------------------------------------------------------------------

/** The x-only public key (32 bytes) of a secp256k1 public key given compressed or uncompressed. */
export function xOnlyOf(publicKey: Uint8Array): Uint8Array {
  return Point.fromHex(publicKey).toRawBytes(true).slice(1);
}

/** The tweaked output key x(Q), Q = lift_x(x(P)) + t·G: what a P2TR output commits to. */
export function taprootOutputKey(xOnly: Uint8Array, merkleRoot: Uint8Array | null): Uint8Array {
  // libsecp256k1 where built (public data only: the point lift_x(x) is 0x02 ‖ x), else noble.
  if (!nativeSecp) return taprootOutputKeyNoble(xOnly, merkleRoot);
  const t = to32Bytes(taprootTweak(xOnly, merkleRoot));
  return nativeSecp.publicKeyTweakAdd(Uint8Array.from([0x02, ...xOnly]), t, true).slice(1);
}

/** The same with noble alone (where the native binding is not built; a test compares the two). */
export function taprootOutputKeyNoble(xOnly: Uint8Array, merkleRoot: Uint8Array | null): Uint8Array {
  const P = schnorr.utils.lift_x(toBigInt(xOnly));
  return P.add(Point.BASE.multiply(taprootTweak(xOnly, merkleRoot)))
    .toRawBytes(true)
    .slice(1);
}

/** The segwit v1 (P2TR) address of an output key: bech32m, `bc` on mainnet and `tb` on testnet. */
export function p2trAddress(outputKey: Uint8Array, network: "mainnet" | "testnet"): string {
  const hrp = network === "mainnet" ? "bc" : "tb";
  return bech32m.encode(hrp, [1, ...bech32m.toWords(outputKey)]);
}

/** Every public form of a PKP's keys, from its secp256k1 public key and its Ed25519 public key. */
export interface PkpPublicKeys {
  secp256k1: { publicKey: string; compressed: string; address: string };
  ed25519: { publicKey: string; solanaAddress: string };
  /** `xOnly` is also the BIP-340 Schnorr public key of the untweaked key. */
  taproot: { xOnly: string; tweakedXOnly: string; address: string; testnetAddress: string };
}

const hex = (b: Uint8Array) => "0x" + Buffer.from(b).toString("hex");

export function publicKeysOf(
  secpUncompressed: Uint8Array,
  ethAddress: string,
  ed25519Public: Uint8Array,
): PkpPublicKeys {
  const compressed = nativeSecp
    ? nativeSecp.publicKeyConvert(secpUncompressed, true)
    : Point.fromHex(secpUncompressed).toRawBytes(true);
  const xOnly = compressed.slice(1);
  const outputKey = taprootOutputKey(xOnly, null);
  return {
    secp256k1: { publicKey: hex(secpUncompressed), compressed: hex(compressed), address: ethAddress },
    ed25519: { publicKey: hex(ed25519Public), solanaAddress: solanaAddress(ed25519Public) },
    taproot: {
      xOnly: hex(xOnly),
      tweakedXOnly: hex(outputKey),
      address: p2trAddress(outputKey, "mainnet"),
      testnetAddress: p2trAddress(outputKey, "testnet"),
    },
  };
}
