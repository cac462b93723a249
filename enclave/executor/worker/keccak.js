"use strict";
/**
 * keccak-256 for the worker's trusted side, native when possible.
 *
 * After lockdown() the worker's intrinsics are frozen, and V8 then takes slow paths for typed-array
 * heavy JavaScript: a pure-JS keccak (ethers/noble) costs about ten times as much as before lockdown,
 * more than the signature itself. The `keccak` package's libkeccak binding does not care; it is loaded
 * directly (its index would fall back to JavaScript silently), and where no binary exists the caller
 * gets null and hashes with ethers instead.
 */
const path = require("node:path");

const KeccakState = (() => {
  try {
    const State = require("node-gyp-build")(path.dirname(require.resolve("keccak/package.json")));
    return typeof State === "function" ? State : null;
  } catch {
    return null;
  }
})();

/**
 * One state per thread, reset by `initialize` before every hash (as the package itself reuses a state
 * after `digest`): a fresh native object per hash costs more than the hash of a short message. Safe to
 * share because a hash runs start to finish synchronously.
 */
let shared = null;

/** keccak-256 of a byte array as a 32-byte Buffer, or null when the native binding is unavailable. */
function keccak256Native(bytes) {
  if (KeccakState === null) return null;
  const state = shared ?? (shared = new KeccakState());
  state.initialize(1088, 512); // rate and capacity of keccak-256 (Ethereum's padding, not SHA3's)
  state.absorb(
    Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  );
  return state.squeeze(32);
}

module.exports = { keccak256Native, hasNativeKeccak: KeccakState !== null };
