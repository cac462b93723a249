"use strict";
/**
 * The web platform globals the reference runtime (Deno) gives actions: `crypto` (WebCrypto, per run:
 * webcrypto.js), `URL`, `URLSearchParams`, `Headers`, `TextEncoder`, `TextDecoder` (facades over Node's:
 * web-facades.js), `DOMException`, `CryptoKey`, `atob`, `btoa`, and the per-run `Lit.Headers` and
 * `Lit.Auth`.
 *
 * No host object is handed to an action: Node's classes, their iterators and their errors are shared by
 * every run of the worker and were not frozen (docs/actions.md, "Runs cannot leak into each other").
 * What is shared is a class of this directory, hardened once per worker.
 */
const { makeWebFacades } = require("./web-facades");
const { makeCrypto, hardenWebCrypto, CryptoKey } = require("./webcrypto");
const { DOMException, guard, hardenHostErrors } = require("./host-errors");

const HostHeaders = Headers;
const hostAtob = atob;
const hostBtoa = btoa;

/** Hardened once per worker, after lockdown: the classes shared by every run. */
function makeSharedWebGlobals(harden) {
  hardenHostErrors(harden);
  hardenWebCrypto(harden);
  return {
    ...makeWebFacades(harden),
    DOMException,
    CryptoKey,
    atob: harden(function atob(s) {
      return guard(() => hostAtob(s));
    }),
    btoa: harden(function btoa(s) {
      return guard(() => hostBtoa(s));
    }),
  };
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
const entriesOf = (view) => headerEntries.get(view) ?? new HostHeaders();
const ReadOnlyHeadersProto = {
  get(name) {
    return guard(() => entriesOf(this).get(name));
  },
  has(name) {
    return guard(() => entriesOf(this).has(name));
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
  const h = new HostHeaders();
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
