/**
 * keccak-256 for the main thread: libkeccak (the `keccak` package's native binding, loaded directly by
 * worker/keccak.js, which the sandbox workers use too) where it is built, else noble. Same function,
 * same bytes; the native one is several times faster, and keccak sits on every path-A write (the
 * EIP-712 digest of the forward request, the gas transaction's hash, address checksums) and on every
 * PKP address shown.
 */
import { keccak_256 } from "@noble/hashes/sha3";
import { keccak256 as ethersKeccak256 } from "ethers";

// Plain CommonJS shared with the sandbox workers (which start without ts-node).

const native = require("./executor/worker/keccak.js") as {
  keccak256Native(bytes: Uint8Array): Uint8Array | null;
  hasNativeKeccak: boolean;
};

export const hasNativeKeccak: boolean = native.hasNativeKeccak;

export function keccak256Bytes(data: Uint8Array): Uint8Array {
  return native.keccak256Native(data) ?? keccak_256(data);
}

/**
 * Makes ethers' own keccak256 (address checksums, typed-data and message hashing, ABI selectors) use
 * the native function in this thread, through ethers' documented `keccak256.register` hook. Done once,
 * when the enclave module loads. If something locked ethers' primitives first, ethers keeps its own
 * (slower, identical) keccak.
 */
export function registerNativeKeccakWithEthers(): boolean {
  if (!hasNativeKeccak) return false;
  try {
    ethersKeccak256.register((data: Uint8Array) => keccak256Bytes(data));
    return true;
  } catch {
    return false;
  }
}
