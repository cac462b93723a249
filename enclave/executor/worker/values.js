"use strict";
/**
 * Handling values that come from action code. Everything here runs in the worker's privileged start
 * compartment, so it must treat action values as hostile: getters, Proxies and toString/toJSON methods
 * may throw, loop, or lie. Each reader is wrapped in try/catch and copies into fresh plain data before
 * the value crosses the message port or reaches a host API.
 */

/** Errors raised by the runtime (limits, refusals). Recognised by identity, so an action cannot forge one. */
const platformErrors = new WeakSet();
/** The message of a platform error without its `code: ` prefix, for run results. */
const platformDetails = new WeakMap();

function platformError(code, message) {
  const e = new Error(`${code}: ${message}`);
  e.code = code;
  platformDetails.set(e, message);
  platformErrors.add(e);
  return e;
}

function isPlatformError(e) {
  return typeof e === "object" && e !== null && platformErrors.has(e);
}

/** {code, message} of a platform error, for the run result. */
function platformErrorInfo(e) {
  return { code: e.code, message: platformDetails.get(e) };
}

const MAX_MESSAGE_CHARS = 4096;

function clip(s) {
  return s.length > MAX_MESSAGE_CHARS ? s.slice(0, MAX_MESSAGE_CHARS) + "…" : s;
}

/** A one-line description of any thrown value: `Name: message` for Error-likes, JSON or String otherwise. */
function describeThrown(e) {
  try {
    if (typeof e === "string") return clip(e);
    if (typeof e === "object" && e !== null) {
      const message = e.message;
      if (typeof message === "string") {
        const name = e.name;
        return clip(typeof name === "string" && name !== "" ? `${name}: ${message}` : message);
      }
      const json = JSON.stringify(e, bigintToString);
      if (typeof json === "string") return clip(json);
    }
    return clip(String(e));
  } catch {
    return "a value that could not be printed";
  }
}

function bigintToString(_key, v) {
  return typeof v === "bigint" ? `${v}n` : v;
}

/** console.* formatting: strings as is, Errors as `Name: message`, other values as JSON. */
function formatLogArgs(args) {
  const parts = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    let s;
    try {
      if (typeof a === "string") s = a;
      else if (typeof a === "object" && a !== null && a instanceof Error) s = describeThrown(a);
      else if (a === undefined || typeof a === "function" || typeof a === "symbol") s = String(a);
      else s = JSON.stringify(a, bigintToString) ?? String(a);
    } catch {
      s = describeThrown(a);
    }
    parts.push(s);
  }
  return parts.join(" ");
}

/**
 * Deep copy of JSON-like data (plus bigint and Uint8Array) into fresh objects, rejecting anything else.
 * Used for key-operation arguments, so what the enclave receives is exactly what was checked.
 */
function copyPlain(v, what, depth = 0, budget = { nodes: 0 }) {
  if (++budget.nodes > 100_000 || depth > 64) throw platformError("invalid_argument", `${what} is too large`);
  if (v === null || typeof v === "string" || typeof v === "boolean" || typeof v === "bigint") return v;
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw platformError("invalid_argument", `${what} contains a non-finite number`);
    return v;
  }
  if (v instanceof Uint8Array) return Uint8Array.from(v);
  if (Array.isArray(v)) {
    const out = [];
    for (let i = 0; i < v.length; i++) out.push(copyPlain(v[i], what, depth + 1, budget));
    return out;
  }
  if (typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    const out = {};
    for (const k of Object.keys(v)) out[k] = copyPlain(v[k], what, depth + 1, budget);
    return out;
  }
  throw platformError(
    "invalid_argument",
    `${what} must be plain data (strings, numbers, bigints, bytes, arrays, objects)`,
  );
}

module.exports = {
  platformError,
  isPlatformError,
  platformErrorInfo,
  describeThrown,
  formatLogArgs,
  copyPlain,
};
