/**
 * The key operations that the enclave serves to the action executor. The executor never sees the root
 * key: it holds an object implementing this interface (the `Enclave` instance) in the main thread and
 * answers its workers' requests through it, after the relayer-supplied authorization callback has
 * approved (caller key, CID, pkpId).
 *
 * Hex strings are 0x-prefixed. `pkpId` is always the canonical bytes32 id here: resolving a PKP address
 * to its id is the authorization callback's job.
 */
import type { PkpPublicKeys } from "./chainKeys";

export interface KeyCapabilities {
  /** Uncompressed secp256k1 public key (0x04…) of the PKP. */
  pkpPublicKey(pkpId: string): string;
  /** Checksummed Ethereum address of the PKP. */
  pkpAddress(pkpId: string): string;
  /** ECDSA signature (65 bytes r‖s‖v, v = 27/28) of a 32-byte digest. */
  pkpSignDigest(pkpId: string, digest: string): string;
  /** EIP-191 personal_sign signature of a UTF-8 string or bytes. */
  pkpSignMessage(pkpId: string, message: string | Uint8Array): string;
  /** EIP-712 signature. */
  pkpSignTypedData(
    pkpId: string,
    domain: Record<string, unknown>,
    types: Record<string, Array<{ name: string; type: string }>>,
    value: Record<string, unknown>,
  ): string;
  /** Public keys and addresses of the PKP on every chain it signs for (enclave/chainKeys.ts). */
  pkpPublicKeys(pkpId: string): PkpPublicKeys;
  /** Ed25519 signature (64 bytes, 0x-hex) by the PKP's Ed25519 key of a message (bytes or 0x-hex). */
  pkpSignEd25519(pkpId: string, message: string | Uint8Array): string;
  /** BIP-340 Schnorr signature (64 bytes, 0x-hex) of a digest; `tweak: "taproot"` signs with the BIP-341 key. */
  pkpSignSchnorr(
    pkpId: string,
    digest: string,
    opts?: { tweak?: "taproot" | null; merkleRoot?: string | null },
  ): string;
  /**
   * The PKP's Ed25519 seed as a fresh 32-byte array that the caller owns and must zero. Only for the
   * executor, which sends it with one already authorized Ed25519 signature to its crypto thread, like
   * pkpAesKeyForOp; it never reaches an action worker.
   */
  pkpEd25519SeedForOp(pkpId: string): Uint8Array;
  /** AES-256-GCM with the PKP's symmetric key; returns the versioned hex envelope (see docs/enclave.md). */
  pkpEncrypt(pkpId: string, plaintext: string | Uint8Array): string;
  /** Inverse of pkpEncrypt; throws EnclaveError("decryption_failed") on any tampering. */
  pkpDecrypt(pkpId: string, ciphertext: string): Uint8Array;
  /** The PKP's raw private key (compatibility with the reference runtime's getPrivateKey). */
  pkpPrivateKey(pkpId: string): string;
  /**
   * The PKP's private key as a fresh 32-byte array that the caller owns and must zero. Only for the
   * executor, which moves it into the worker serving a run that is already authorized for this PKP
   * (docs/actions.md, "The run's own PKP"). Nothing else should hold key bytes.
   */
  pkpKeyForRun(pkpId: string): Uint8Array;
  /**
   * The PKP's AES-256 key as a fresh 32-byte array that the caller owns and must zero. Only for the
   * executor, which sends it with one already authorized encrypt/decrypt to its crypto thread
   * (docs/actions.md, "Key operations off the main thread"). It never reaches an action worker.
   */
  pkpAesKeyForOp(pkpId: string): Uint8Array;
  /** The action identity key of a CID (HKDF(root, "sigil/action/v1/" || cid)). */
  actionPrivateKey(cid: string): string;
  actionPublicKey(cid: string): string;
  actionAddress(cid: string): string;
}
