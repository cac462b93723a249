"use strict";
/**
 * An action worker's client of the executor's signer thread (signer-thread.js), over the worker's own
 * MessagePort to it: request(op, key, digest) resolves with the answer, or null if the thread cannot
 * answer (then run-key.js sends the operation to the main thread). Null without a port.
 * onPending(delta) is told of every request sent (+1) and answered or abandoned (-1): the main thread
 * reads that count when it stops a run for wall time (pool.ts, whereStopped).
 */
function makeCurveClient(port, onPending = () => {}) {
  if (!port || typeof port.postMessage !== "function") return null;
  const pending = new Map();
  let nextId = 1;
  let closed = false;
  port.on("message", (m) => {
    const resolve = m && pending.get(m.id);
    if (resolve === undefined) return;
    pending.delete(m.id);
    onPending(-1);
    resolve(m.ok ? m : null);
  });
  port.on("close", () => {
    closed = true;
    onPending(-pending.size);
    for (const resolve of pending.values()) resolve(null);
    pending.clear();
  });
  return {
    request(op, key, digest) {
      if (closed) return Promise.resolve(null);
      return new Promise((resolve) => {
        const id = nextId++;
        pending.set(id, resolve);
        onPending(1);
        port.postMessage({ id, op, key, digest }); // copies: the signer zeroes its copy after use
      });
    },
  };
}

module.exports = { makeCurveClient };
