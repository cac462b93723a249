"use strict";
/**
 * Errors thrown by host code (Node's URL, WebCrypto, encoders, atob) re-created as sandbox errors before
 * an action sees them.
 *
 * Why: Node throws instances of its own classes, e.g. one internal `NodeError` class per error code
 * (`ERR_INVALID_URL`, …) and `DOMException`. Those classes live in the worker's realm, are shared by
 * every run of the worker, and nothing froze them: an action reaching one through `e.constructor` or
 * `Object.getPrototypeOf(e)` could plant a getter or replace `toString` for every later run. Here an
 * error keeps its name, message and `code`, and becomes an instance of a frozen class: the realm's
 * intrinsic `Error`/`TypeError`/`RangeError`/`SyntaxError` (frozen by lockdown), or the hardened
 * sandbox `DOMException` below.
 */
const { isPlatformError } = require("./values");

const HostDOMException = globalThis.DOMException;
const INTRINSIC_ERRORS = { Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError };

/** The legacy numeric codes of DOMException names (WebIDL); 0 for the others. */
const LEGACY_CODES = {
  IndexSizeError: 1,
  HierarchyRequestError: 3,
  WrongDocumentError: 4,
  InvalidCharacterError: 5,
  NoModificationAllowedError: 7,
  NotFoundError: 8,
  NotSupportedError: 9,
  InvalidStateError: 11,
  SyntaxError: 12,
  InvalidModificationError: 13,
  NamespaceError: 14,
  InvalidAccessError: 15,
  TypeMismatchError: 17,
  SecurityError: 18,
  NetworkError: 19,
  AbortError: 20,
  URLMismatchError: 21,
  QuotaExceededError: 22,
  TimeoutError: 23,
  InvalidNodeTypeError: 24,
  DataCloneError: 25,
};

/** The DOMException actions see (a global, as in Deno and browsers): hardened once per worker. */
class DOMException extends Error {
  constructor(message = "", name = "Error") {
    super(String(message));
    Object.defineProperty(this, "name", { value: String(name), configurable: true, writable: true });
  }

  get code() {
    return LEGACY_CODES[this.name] ?? 0;
  }
}

/** `e` as an action may see it: platform errors and non-errors as they are, host errors re-created. */
function toSandboxError(e) {
  if (typeof e !== "object" || e === null || isPlatformError(e)) return e;
  let message, name, code;
  try {
    message = String(e.message ?? "");
    name = String(e.name ?? "Error");
    code = e.code;
  } catch {
    return new Error("host error");
  }
  let out;
  if (HostDOMException !== undefined && e instanceof HostDOMException) out = new DOMException(message, name);
  else {
    const C = Object.prototype.hasOwnProperty.call(INTRINSIC_ERRORS, name) ? INTRINSIC_ERRORS[name] : Error;
    out = new C(message);
    if (out.name !== name)
      Object.defineProperty(out, "name", { value: name, configurable: true, writable: true });
  }
  if (typeof code === "string")
    Object.defineProperty(out, "code", { value: code, configurable: true, writable: true, enumerable: true });
  return out;
}

/** Calls fn; what it throws is re-created as a sandbox error. */
function guard(fn) {
  try {
    return fn();
  } catch (e) {
    throw toSandboxError(e);
  }
}

/** Hardened once per worker, after lockdown (and the host's DOMException with it, in case it is reached). */
function hardenHostErrors(harden) {
  harden(DOMException);
  if (HostDOMException !== undefined) harden(HostDOMException);
}

module.exports = { DOMException, toSandboxError, guard, hardenHostErrors };
