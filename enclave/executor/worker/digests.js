"use strict";
/**
 * The digests the PKP signing operations sign, computed exactly as the enclave computes them (ethers'
 * hashMessage and TypedDataEncoder.hash), for the threads that sign outside the main thread: the action
 * worker's trusted side (run-key.js) and the executor's crypto thread (signer-thread.js). keccak is
 * native where possible (keccak.js explains why). test/executor/run-key.test.ts and
 * test/executor/crypto-thread.test.ts hold every answer byte-for-byte to the enclave's.
 */
const { keccak256, MessagePrefix, TypedDataEncoder } = require("ethers");
const { keccak256Native } = require("./keccak");

/** keccak-256 as 32 bytes: native (fast after lockdown, see keccak.js), else ethers. */
function keccak(bytes) {
  return keccak256Native(bytes) ?? Buffer.from(keccak256(bytes).slice(2), "hex");
}

/**
 * EIP-191 digest of a message, exactly as ethers' hashMessage: a string is its UTF-8 bytes. A string
 * that is not well-formed UTF-16 is left to the enclave (null), which words the answer.
 */
function messageDigest(m) {
  let bytes;
  if (typeof m === "string") {
    if (!m.isWellFormed()) return null;
    bytes = Buffer.from(m, "utf8");
  } else if (m instanceof Uint8Array) bytes = Buffer.from(m.buffer, m.byteOffset, m.byteLength);
  else return null;
  return keccak(Buffer.concat([Buffer.from(MessagePrefix + String(bytes.length), "utf8"), bytes]));
}

function isPlainObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * EIP-712 digest (32 bytes) as the enclave computes it (an EIP712Domain entry in types is ignored), or
 * null for anything it would refuse: the enclave then words the refusal.
 */
function typedDataDigest(domain, types, value) {
  if (!isPlainObject(domain) || !isPlainObject(types) || !isPlainObject(value)) return null;
  const { EIP712Domain: _ignored, ...rest } = types;
  try {
    return Buffer.from(TypedDataEncoder.hash(domain, rest, value).slice(2), "hex");
  } catch {
    return null;
  }
}

module.exports = { keccak, messageDigest, typedDataDigest, isPlainObject };
