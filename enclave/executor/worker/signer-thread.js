"use strict";
/**
 * The executor's key threads: libsecp256k1 and AES for everything a run's key operations compute,
 * outside the main thread (docs/actions.md, "The run's own PKP" and "Key operations off the main
 * thread"). Two instances of this script run per process: the signer thread, which the action workers
 * ask directly for their run's own PKP (short, latency-sensitive requests), and the crypto thread, which
 * the main thread asks, after authorizing the operation, for encryption, decryption and signatures by
 * other PKPs (possibly large payloads: kept apart so that a flood of them cannot delay the former).
 *
 * Why threads of their own: the `secp256k1` package's native binding keeps a process-wide static that
 * every thread loading it overwrites, and once a thread that loaded it has been terminated, the next
 * thread to load it crashes the process. Action workers are terminated routinely (timeouts, memory
 * limits), so they must never load it; these threads load it once and are never terminated before the
 * process ends. The main thread loaded it first (enclave/secp.ts) and lives as long as the process.
 *
 * Stateless: each request carries the 32-byte key it needs (the run's own PKP key held by the
 * requesting worker, or a key the main thread derived for this one operation) and what to compute;
 * the copy is zeroed as soon as the answer is made. Requests come only from trusted code (the workers'
 * side outside the Compartment, the main thread), over one MessagePort each. Anything this thread
 * cannot answer exactly as the enclave would is answered {ok: false}, and the asker falls back to the
 * enclave in the main thread, which words any error.
 */
const { parentPort } = require("node:worker_threads");

let secp = null;
try {
  secp = require("secp256k1/bindings");
} catch {
  secp = null; // no binary for this platform: these operations then go to the main thread
}

// Loaded on first use: the signer thread never needs ethers (its workers hash themselves).
let digests = null;
let aes = null;
let chainSign = null;
const lazyDigests = () => (digests ??= require("./digests"));
const lazyChainSign = () => (chainSign ??= require("../../chainSign"));
const lazyAes = () => (aes ??= require("./aes-envelope"));

function isDigest(d) {
  return d instanceof Uint8Array && d.length === 32;
}

function hexOf(bytes) {
  return "0x" + Buffer.from(bytes).toString("hex");
}

/** r‖s‖v hex, v = 27 + recid: the enclave's format. */
function signatureHex(digest, key) {
  const { signature, recid } = secp.ecdsaSign(digest, key);
  return "0x" + Buffer.from(signature).toString("hex") + (27 + recid).toString(16);
}

/** The answer fields for one request, or null when it must fall back to the main thread. */
function compute(req, key) {
  switch (req.op) {
    // The run's own PKP (run-key.js): raw curve results.
    case "publicKey":
      return secp === null ? null : { publicKey: secp.publicKeyCreate(key, false) };
    case "sign": {
      if (secp === null || !isDigest(req.digest)) return null;
      const { signature, recid } = secp.ecdsaSign(req.digest, key);
      return { signature, recid };
    }
    // Operations the main thread has authorized (key-ops.ts): the action's answer, as `value`, and for
    // a message or typed data the digest signed (the run's key-operation record).
    case "signDigest":
      return secp === null || !isDigest(req.digest) ? null : { value: signatureHex(req.digest, key) };
    case "signMessage": {
      if (secp === null) return null;
      const digest = lazyDigests().messageDigest(req.message);
      return digest === null ? null : { value: signatureHex(digest, key), digest };
    }
    case "signTypedData": {
      if (secp === null) return null;
      const digest = lazyDigests().typedDataDigest(req.domain, req.types, req.value);
      return digest === null ? null : { value: signatureHex(digest, key), digest };
    }
    // Ed25519 (the key is the PKP's Ed25519 seed) and BIP-340 Schnorr, plain or Taproot-tweaked.
    case "signEd25519":
      if (!(req.message instanceof Uint8Array)) return null;
      return { value: hexOf(lazyChainSign().ed25519Sign(key, req.message)) };
    case "signSchnorr": {
      const tweak = req.tweak ?? null;
      const merkleRoot = req.merkleRoot ?? null;
      if (!isDigest(req.digest) || (tweak !== null && tweak !== "taproot")) return null;
      if (merkleRoot !== null && (tweak === null || !isDigest(merkleRoot))) return null;
      return { value: hexOf(lazyChainSign().schnorrSignWith(key, req.digest, tweak, merkleRoot)) };
    }
    case "encrypt":
      if (typeof req.plaintext !== "string" && !(req.plaintext instanceof Uint8Array)) return null;
      return { value: lazyAes().seal(key, req.plaintext) };
    case "decrypt": {
      const opened = lazyAes().open(key, req.ciphertext);
      return opened.failed !== undefined ? { failed: opened.failed } : { value: opened.plaintext };
    }
    default:
      return null;
  }
}

function answer(port, req) {
  const key = req && req.key instanceof Uint8Array && req.key.length === 32 ? req.key : null;
  try {
    const out = key === null ? null : compute(req, key);
    port.postMessage(out === null ? { id: req && req.id, ok: false } : { id: req.id, ok: true, ...out });
  } catch {
    port.postMessage({ id: req && req.id, ok: false });
  } finally {
    if (key !== null) key.fill(0);
  }
}

parentPort.on("message", (m) => {
  if (m && m.type === "attach" && m.port) m.port.on("message", (req) => answer(m.port, req));
});
parentPort.postMessage({ type: "ready", native: secp !== null });
