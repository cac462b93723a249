"use strict";
/**
 * The web platform globals the reference runtime (Deno) gives actions and that are safe to share:
 * `crypto` (WebCrypto), `URL`, `URLSearchParams`, `atob`, `btoa`, `Headers`, and the per-run
 * `Lit.Headers` and `Lit.Auth`.
 *
 * Host classes (URL, Headers, CryptoKey, SubtleCrypto) come from the worker's start compartment and are
 * hardened once per worker, so a run cannot patch them for later runs. `crypto` is a per-run facade,
 * not the host object: its asynchronous `subtle` calls are tracked as the run's pending work (a run
 * lasts until its event loop is empty, so an un-awaited `go()` waiting on a digest still gets to
 * `setResponse`), and their answers are dropped once the run has ended.
 */

const hostCrypto = globalThis.crypto;
const SUBTLE_METHODS = [
  "digest",
  "importKey",
  "exportKey",
  "generateKey",
  "sign",
  "verify",
  "encrypt",
  "decrypt",
  "deriveBits",
  "deriveKey",
  "wrapKey",
  "unwrapKey",
];

/** Hardened once per worker, after lockdown: the classes shared by every run. */
function makeSharedWebGlobals(harden) {
  harden(Object.getPrototypeOf(hostCrypto.subtle));
  if (typeof globalThis.CryptoKey === "function") harden(globalThis.CryptoKey);
  return {
    URL: harden(URL),
    URLSearchParams: harden(URLSearchParams),
    Headers: harden(Headers),
    atob: harden((s) => atob(s)),
    btoa: harden((s) => btoa(s)),
  };
}

/** `crypto` for one run. */
function makeCrypto(run, harden) {
  const subtle = {};
  for (const name of SUBTLE_METHODS) {
    subtle[name] = (...args) => {
      run.assertLive();
      return run.track(hostCrypto.subtle[name](...args));
    };
  }
  return harden({
    getRandomValues: (array) => hostCrypto.getRandomValues(array),
    randomUUID: () => hostCrypto.randomUUID(),
    subtle,
  });
}

/**
 * `Lit.Headers`: a read-only Headers-like object with the request's `x-request-id` and
 * `x-correlation-id` (what the action may see; other request headers, which may carry credentials, are
 * not passed). Its methods live on a shared, hardened prototype and its entries in a WeakMap, so, like a
 * real `Headers`, it has no own enumerable keys; `set`, `append` and `delete` throw.
 */
const headerEntries = new WeakMap();
const readOnly = () => {
  throw new TypeError("Lit.Headers is read-only");
};
const entriesOf = (view) => headerEntries.get(view) ?? new Headers();
const ReadOnlyHeadersProto = {
  get(name) {
    return entriesOf(this).get(name);
  },
  has(name) {
    return entriesOf(this).has(name);
  },
  forEach(fn) {
    entriesOf(this).forEach((v, k) => fn(v, k, this));
  },
  entries() {
    return [...entriesOf(this).entries()][Symbol.iterator]();
  },
  keys() {
    return [...entriesOf(this).keys()][Symbol.iterator]();
  },
  values() {
    return [...entriesOf(this).values()][Symbol.iterator]();
  },
  [Symbol.iterator]() {
    return [...entriesOf(this).entries()][Symbol.iterator]();
  },
  set: readOnly,
  append: readOnly,
  delete: readOnly,
};

function makeRequestHeaders(requestHeaders, harden) {
  harden(ReadOnlyHeadersProto);
  const h = new Headers();
  for (const [k, v] of Object.entries(requestHeaders ?? {})) {
    if (typeof v === "string" && v !== "") h.set(k, v);
  }
  const view = Object.create(ReadOnlyHeadersProto);
  headerEntries.set(view, h);
  return harden(view);
}

/**
 * `Lit.Auth`: the authentication context older runtimes injected. Authentication happens before the
 * run in Sigil (the usage key and the on-chain scope checks), so there is no session signature to
 * describe: the fields exist, with the action's CID in the stacks and empty values elsewhere, so that
 * actions reading them get well-formed values rather than `undefined`.
 */
function makeAuth(cid, harden) {
  return harden({
    actionIpfsIds: [cid],
    actionIpfsIdStack: [cid],
    authSigAddress: null,
    authMethodContexts: [],
    resources: [],
    customAuthResource: "",
  });
}

module.exports = { makeSharedWebGlobals, makeCrypto, makeRequestHeaders, makeAuth };
