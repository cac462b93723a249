"use strict";
/**
 * Node's own error classes, hardened once per worker.
 *
 * Why: a Node builtin that a library calls (ethers calls `crypto.randomBytes`, `Buffer.from`, …) throws
 * an instance of one of Node's internal error classes: one class per error code (`ERR_INVALID_ARG_TYPE`,
 * …, about 280), plus `AbortError`, `SystemError` and a few more. Such an error reaches the action
 * through the library, and its prototype (a writable `toString`, getters) is shared by every run of the
 * worker: a run that replaced `toString` there would have its code called on other accounts' errors.
 * The errors the runtime's own facades meet are re-created (host-errors.js), but a library's are not
 * (wrapping every function of both ethers would cost every call): so every one of these classes is
 * frozen. They are only reachable through Node's internal error module, which the worker may load
 * because the executor starts it with `--expose-internals` (pool.ts); action code has no `require`, so
 * this adds nothing an action can reach. A worker started without it refuses to start (sandbox-worker.js).
 */

/** Loads Node's internal error module (before lockdown). Null when the worker was started without it. */
function loadNodeErrors() {
  try {
    return require("internal/errors");
  } catch {
    return null;
  }
}

const OTHER_CLASSES = [
  "AbortError",
  "SystemError",
  "NodeAggregateError",
  "DNSException",
  "ConnResetException",
];

/** Hardens every error class of the module (after lockdown). False when it could not be loaded. */
function hardenNodeErrors(internalErrors, harden) {
  if (internalErrors === null) return false;
  for (const C of Object.values(internalErrors.codes)) if (typeof C === "function") harden(C);
  for (const name of OTHER_CLASSES) {
    if (typeof internalErrors[name] === "function") harden(internalErrors[name]);
  }
  return true;
}

module.exports = { loadNodeErrors, hardenNodeErrors };
