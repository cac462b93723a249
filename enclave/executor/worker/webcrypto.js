"use strict";
/**
 * `crypto` (WebCrypto) for one run, over Node's, with keys as opaque handles.
 *
 * Why handles: a Node `CryptoKey` carries its key material in symbol-keyed properties (a `KeyObject`,
 * itself holding a native handle), and through them an action reached `KeyObject.prototype`,
 * `SecretKeyObject.prototype` and the internal `CryptoKey` class, shared by every run of the worker. An
 * accessor planted there for Node's internal key-type symbol received the key object of every later
 * WebCrypto key of every account (a secret imported as a non-extractable HMAC key came back verbatim to
 * the attacker), and a native handle's method called without its arguments aborts the whole process.
 * Here an action only ever holds a `CryptoKey` of this module: a frozen object with no own properties
 * whose class is hardened once per worker; the host key it stands for is in a WeakMap of this module.
 * Keys passed in (as arguments, or as `public` inside an algorithm) are looked up there; keys coming out
 * (importKey, generateKey, deriveKey, unwrapKey) are wrapped; errors are re-created (host-errors.js).
 *
 * Per run: pending `subtle` calls are the run's pending work (run.track: a run lasts until its event
 * loop is empty) and their answers are dropped once the run has ended.
 */
const { guard, toSandboxError } = require("./host-errors");

const hostCrypto = globalThis.crypto;
const hostSubtle = hostCrypto.subtle;

/** handle -> {key, algorithm, usages}: the host CryptoKey and the copies the handle's getters answer. */
const keys = new WeakMap();

class CryptoKey {
  constructor() {
    throw new TypeError("Illegal constructor");
  }

  get type() {
    return entry(this).key.type;
  }

  get extractable() {
    return entry(this).key.extractable;
  }

  get algorithm() {
    return entry(this).algorithm;
  }

  get usages() {
    return entry(this).usages;
  }
}
Object.defineProperty(CryptoKey.prototype, Symbol.toStringTag, { configurable: true, value: "CryptoKey" });

function entry(handle) {
  const e = typeof handle === "object" && handle !== null ? keys.get(handle) : undefined;
  if (e === undefined) throw new TypeError("not a CryptoKey");
  return e;
}

/** A plain copy of a host algorithm dictionary (strings, numbers, nested dictionaries, byte arrays). */
function copyAlgorithm(v) {
  if (v instanceof Uint8Array) return Uint8Array.from(v);
  if (typeof v !== "object" || v === null) return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) out[k] = copyAlgorithm(x);
  return out;
}

function wrapKey(harden, hostKey) {
  const handle = Object.create(CryptoKey.prototype);
  keys.set(handle, {
    key: hostKey,
    algorithm: harden(copyAlgorithm(hostKey.algorithm)),
    usages: harden([...hostKey.usages]),
  });
  return harden(handle);
}

/** A key or key pair from the host, as handles. */
function wrapKeyResult(harden, result) {
  if (result instanceof globalThis.CryptoKey) return wrapKey(harden, result);
  return harden({
    publicKey: wrapKey(harden, result.publicKey),
    privateKey: wrapKey(harden, result.privateKey),
  });
}

const unwrap = (handle) => entry(handle).key;

/** An algorithm argument with its `public` key (ECDH, X25519 …) unwrapped; strings as they are. */
function unwrapAlgorithm(algorithm) {
  if (typeof algorithm !== "object" || algorithm === null || !("public" in algorithm)) return algorithm;
  return { ...algorithm, public: unwrap(algorithm.public) };
}

/** Each subtle method: how its arguments are unwrapped, and whether its result is a key. */
const SUBTLE = {
  digest: { args: (a) => a },
  importKey: { args: (a) => a, returnsKey: true },
  exportKey: { args: ([format, key]) => [format, unwrap(key)] },
  generateKey: { args: (a) => a, returnsKey: true },
  sign: { args: ([alg, key, data]) => [unwrapAlgorithm(alg), unwrap(key), data] },
  verify: { args: ([alg, key, sig, data]) => [unwrapAlgorithm(alg), unwrap(key), sig, data] },
  encrypt: { args: ([alg, key, data]) => [unwrapAlgorithm(alg), unwrap(key), data] },
  decrypt: { args: ([alg, key, data]) => [unwrapAlgorithm(alg), unwrap(key), data] },
  deriveBits: { args: ([alg, key, length]) => [unwrapAlgorithm(alg), unwrap(key), length] },
  deriveKey: {
    args: ([alg, key, ...rest]) => [unwrapAlgorithm(alg), unwrap(key), ...rest],
    returnsKey: true,
  },
  wrapKey: {
    args: ([format, key, wrappingKey, alg]) => [
      format,
      unwrap(key),
      unwrap(wrappingKey),
      unwrapAlgorithm(alg),
    ],
  },
  unwrapKey: {
    args: ([format, wrapped, unwrappingKey, alg, ...rest]) => [
      format,
      wrapped,
      unwrap(unwrappingKey),
      unwrapAlgorithm(alg),
      ...rest,
    ],
    returnsKey: true,
  },
};

/** `crypto` for one run (built on first use, per-run.js's defineLazy). */
function makeCrypto(run, harden) {
  const subtle = {};
  for (const [name, how] of Object.entries(SUBTLE)) {
    subtle[name] = async (...args) => {
      run.assertLive();
      const hostArgs = guard(() => how.args(args));
      let result;
      try {
        result = await run.track(hostSubtle[name](...hostArgs));
      } catch (e) {
        throw toSandboxError(e);
      }
      return how.returnsKey ? wrapKeyResult(harden, result) : result;
    };
  }
  return harden({
    getRandomValues: (array) => guard(() => hostCrypto.getRandomValues(array)),
    randomUUID: () => hostCrypto.randomUUID(),
    subtle,
  });
}

/** The classes shared by every run, hardened once per worker after lockdown. */
function hardenWebCrypto(harden) {
  harden(CryptoKey);
}

module.exports = { makeCrypto, hardenWebCrypto, CryptoKey };
