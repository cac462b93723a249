"use strict";
/**
 * The signing half of enclave/chainKeys.ts (Ed25519, BIP-340 Schnorr and the BIP-341 Taproot tweak),
 * in plain JavaScript because two threads run it: the enclave's main thread (chainKeys.ts) and the
 * executor's crypto thread (executor/worker/signer-thread.js), which signs an action's authorized
 * Ed25519 and Schnorr operations off the main thread with a key derived for that one operation. Pure
 * functions over key bytes; nothing is kept. Types in chainSign.d.ts.
 */
const { randomBytes } = require("node:crypto");
const { ed25519 } = require("@noble/curves/ed25519");
const { schnorr, secp256k1 } = require("@noble/curves/secp256k1");

const N = secp256k1.CURVE.n;
const Point = secp256k1.ProjectivePoint;

function toBigInt(bytes) {
  return BigInt("0x" + (Buffer.from(bytes).toString("hex") || "0"));
}

function to32Bytes(n) {
  return Uint8Array.from(Buffer.from(n.toString(16).padStart(64, "0"), "hex"));
}

/** t = tagged_hash("TapTweak", x(P) ‖ merkleRoot) mod n, merkleRoot omitted for a key-path-only output. */
function taprootTweak(xOnly, merkleRoot) {
  const h =
    merkleRoot === null
      ? schnorr.utils.taggedHash("TapTweak", xOnly)
      : schnorr.utils.taggedHash("TapTweak", xOnly, merkleRoot);
  const t = toBigInt(h);
  // BIP-341: a tweak of n or more is invalid (probability about 2^-128).
  if (t >= N) throw new RangeError("taproot tweak out of range");
  return t;
}

/** The secret of the tweaked key (d' + t mod n, d' = d negated when d·G has odd y): the caller zeroes it. */
function taprootSecret(secret, merkleRoot) {
  const d = toBigInt(secret);
  const P = Point.BASE.multiply(d);
  const even = P.toAffine().y % 2n === 0n;
  const xOnly = P.toRawBytes(true).slice(1);
  const tweaked = ((even ? d : N - d) + taprootTweak(xOnly, merkleRoot)) % N;
  if (tweaked === 0n) throw new RangeError("taproot tweak cancels the key");
  return to32Bytes(tweaked);
}

/** BIP-340 signature (64 bytes) of a 32-byte digest, with fresh auxiliary randomness as BIP-340 advises. */
function schnorrSign(secret, digest) {
  if (digest.length !== 32) throw new RangeError("digest must be 32 bytes");
  return schnorr.sign(digest, secret, randomBytes(32));
}

/** Schnorr by `secret`, or with tweak "taproot" by its BIP-341 tweaked key (merkleRoot: 32 bytes or null). */
function schnorrSignWith(secret, digest, tweak, merkleRoot) {
  if (tweak === null) return schnorrSign(secret, digest);
  const tweaked = taprootSecret(secret, merkleRoot);
  try {
    return schnorrSign(tweaked, digest);
  } finally {
    tweaked.fill(0);
  }
}

/** RFC 8032 Ed25519 (deterministic): 64 bytes R ‖ S. */
function ed25519Sign(seed, message) {
  return ed25519.sign(message, seed);
}

module.exports = {
  toBigInt,
  to32Bytes,
  taprootTweak,
  taprootSecret,
  schnorrSign,
  schnorrSignWith,
  ed25519Sign,
};
