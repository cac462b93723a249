/**
 * AES-256-GCM envelope for PKP encryption (docs/enclave.md):
 *   0x ‖ hex( version 0x01 ‖ nonce (12 random bytes) ‖ ciphertext ‖ tag (16 bytes) )
 * The version byte is also the additional authenticated data, so it cannot be swapped undetected.
 * Every failure to open (bad hex, too short, unknown version, wrong key, any flipped bit) is the same
 * EnclaveError("decryption_failed"): no oracle distinguishes them beyond a fixed reason string.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { EnclaveError } from "./errors";

export const ENVELOPE_VERSION = 0x01;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const AAD = Uint8Array.of(ENVELOPE_VERSION);

/** `nonce` is for known-answer tests only; production calls leave it to the CSPRNG. */
export function seal(
  key: Uint8Array,
  plaintext: Uint8Array,
  nonce: Uint8Array = randomBytes(NONCE_BYTES),
): string {
  if (nonce.length !== NONCE_BYTES) throw new RangeError("nonce must be 12 bytes");
  const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(AAD);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return "0x" + Buffer.concat([AAD, nonce, body, cipher.getAuthTag()]).toString("hex");
}

export function open(key: Uint8Array, envelope: unknown): Uint8Array {
  if (typeof envelope !== "string") throw fail("ciphertext must be a hex string");
  const h = envelope.startsWith("0x") ? envelope.slice(2) : envelope;
  if (h.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(h)) throw fail("ciphertext must be a hex string");
  const bytes = Buffer.from(h, "hex");
  if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES) throw fail("ciphertext too short");
  if (bytes[0] !== ENVELOPE_VERSION) throw fail("unknown envelope version");
  const nonce = bytes.subarray(1, 1 + NONCE_BYTES);
  const tag = bytes.subarray(bytes.length - TAG_BYTES);
  const body = bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(AAD);
    decipher.setAuthTag(tag);
    return new Uint8Array(Buffer.concat([decipher.update(body), decipher.final()]));
  } catch {
    // Node's own message is generic ("Unsupported state or unable to authenticate data"); we drop it anyway.
    throw fail("authentication failed (wrong key or tampered ciphertext)");
  }
}

function fail(details: string): EnclaveError {
  return new EnclaveError("decryption_failed", "Decryption failed.", { details });
}
