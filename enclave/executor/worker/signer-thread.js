"use strict";
/**
 * The executor's signer thread: libsecp256k1 for the action workers (docs/actions.md, "The run's own
 * PKP").
 *
 * Why a thread of its own: the `secp256k1` package's native binding keeps a process-wide static that
 * every thread loading it overwrites, and once a thread that loaded it has been terminated, the next
 * thread to load it crashes the process. Action workers are terminated routinely (timeouts, memory
 * limits), so they must never load it; this thread loads it once and is never terminated before the
 * executor closes. The main thread loaded it first (enclave/secp.ts) and lives as long as the process.
 *
 * It is stateless: each request carries the 32-byte key of the run's own PKP (which the requesting
 * worker holds for that run) and what to compute; the copy is zeroed as soon as the answer is made.
 * Requests come only from the trusted side of the action workers, over one MessagePort per worker.
 */
const { parentPort } = require("node:worker_threads");

let secp = null;
try {
  secp = require("secp256k1/bindings");
} catch {
  secp = null; // no binary for this platform: the workers then send these operations to the main thread
}

function answer(port, req) {
  const key = req.key instanceof Uint8Array && req.key.length === 32 ? req.key : null;
  try {
    if (secp === null || key === null) return port.postMessage({ id: req.id, ok: false });
    if (req.op === "publicKey") {
      return port.postMessage({ id: req.id, ok: true, publicKey: secp.publicKeyCreate(key, false) });
    }
    if (req.op === "sign" && req.digest instanceof Uint8Array && req.digest.length === 32) {
      const { signature, recid } = secp.ecdsaSign(req.digest, key);
      return port.postMessage({ id: req.id, ok: true, signature, recid });
    }
    return port.postMessage({ id: req.id, ok: false });
  } catch {
    return port.postMessage({ id: req.id, ok: false });
  } finally {
    if (key !== null) key.fill(0);
  }
}

parentPort.on("message", (m) => {
  if (m && m.type === "attach" && m.port) m.port.on("message", (req) => answer(m.port, req));
});
parentPort.postMessage({ type: "ready", native: secp !== null });
