"use strict";
/**
 * The PKP AES-256-GCM envelope (docs/enclave.md) for the executor's crypto thread, which cannot load
 * the enclave's TypeScript module (enclave/aesEnvelope.ts): the same format, checks and failure reasons.
 * test/executor/crypto-thread.test.ts opens what each side seals with the other, both ways.
 *   0x ‖ hex( version 0x01 ‖ nonce (12 random bytes) ‖ ciphertext ‖ tag (16 bytes) ), AAD = version.
 */
const { createCipheriv, createDecipheriv, randomBytes } = require("node:crypto");

const VERSION = 0x01;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const AAD = Uint8Array.of(VERSION);
const HEX = /^[0-9a-fA-F]*$/;

/** Seal bytes or a string (UTF-8) with a 32-byte key; the hex envelope. */
function seal(key, plaintext) {
  const bytes = typeof plaintext === "string" ? Buffer.from(plaintext, "utf8") : plaintext;
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(AAD);
  const body = Buffer.concat([cipher.update(bytes), cipher.final()]);
  return "0x" + Buffer.concat([AAD, nonce, body, cipher.getAuthTag()]).toString("hex");
}

/** {plaintext: Uint8Array} or {failed: reason}: every failure is decryption_failed to the caller. */
function open(key, envelope) {
  if (typeof envelope !== "string") return { failed: "ciphertext must be a hex string" };
  const h = envelope.startsWith("0x") ? envelope.slice(2) : envelope;
  if (h.length % 2 !== 0 || !HEX.test(h)) return { failed: "ciphertext must be a hex string" };
  const bytes = Buffer.from(h, "hex");
  if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES) return { failed: "ciphertext too short" };
  if (bytes[0] !== VERSION) return { failed: "unknown envelope version" };
  const nonce = bytes.subarray(1, 1 + NONCE_BYTES);
  const tag = bytes.subarray(bytes.length - TAG_BYTES);
  const body = bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(AAD);
    decipher.setAuthTag(tag);
    return { plaintext: new Uint8Array(Buffer.concat([decipher.update(body), decipher.final()])) };
  } catch {
    return { failed: "authentication failed (wrong key or tampered ciphertext)" };
  }
}

module.exports = { seal, open };
