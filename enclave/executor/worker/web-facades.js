"use strict";
/**
 * `URL`, `URLSearchParams`, `Headers`, `TextEncoder` and `TextDecoder` as actions see them: classes of
 * this module, hardened once per worker, whose instances hold a host instance out of reach (a WeakMap)
 * and forward to it.
 *
 * Why not endow Node's classes, hardened: what they hand out is not reachable from the classes, so
 * hardening the classes does not reach it. Their iterators share a prototype per class (a writable
 * `next`), their errors are instances of Node's internal per-code error classes, and `forEach` passes
 * the host instance to the callback. A run that patched one of those changed it for every later run of
 * the worker. Here nothing of the host is handed out: results are primitives or fresh values of frozen
 * intrinsic classes (strings, arrays, Uint8Arrays, array iterators), `forEach` passes the facade, and
 * host errors are re-created (host-errors.js).
 */
const { guard } = require("./host-errors");

const HostURL = URL;
const HostURLSearchParams = URLSearchParams;
const HostHeaders = Headers;
const HostTextEncoder = TextEncoder;
const HostTextDecoder = TextDecoder;

/** facade -> host instance. */
const hostOf = new WeakMap();

function host(facade, className) {
  const h = hostOf.get(facade);
  if (h === undefined) throw new TypeError(`Illegal invocation: not a ${className}`);
  return h;
}

/** Getters (and setters when `writable`) of the host's accessors, on the facade's prototype. */
function forwardAccessors(Facade, names, writable) {
  for (const name of names) {
    Object.defineProperty(Facade.prototype, name, {
      configurable: true,
      enumerable: true,
      get() {
        const h = host(this, Facade.name);
        return guard(() => h[name]);
      },
      set: writable
        ? function (v) {
            const h = host(this, Facade.name);
            guard(() => {
              h[name] = v;
            });
          }
        : undefined,
    });
  }
}

/** Methods answering primitives or fresh intrinsic values, forwarded as they are. */
function forwardMethods(Facade, names) {
  for (const name of names) {
    Object.defineProperty(Facade.prototype, name, {
      configurable: true,
      enumerable: true,
      writable: true,
      value: {
        [name](...args) {
          const h = host(this, Facade.name);
          return guard(() => h[name](...args));
        },
      }[name],
    });
  }
}

/** entries/keys/values/@@iterator and forEach of a pair-iterable host class, as snapshots. */
function forwardIteration(Facade) {
  Object.assign(Facade.prototype, {
    entries() {
      return guard(() => [...host(this, Facade.name).entries()]).values();
    },
    keys() {
      return guard(() => [...host(this, Facade.name).keys()]).values();
    },
    values() {
      return guard(() => [...host(this, Facade.name).values()]).values();
    },
    forEach(callback, thisArg) {
      const pairs = guard(() => [...host(this, Facade.name).entries()]);
      if (typeof callback !== "function") throw new TypeError(`${Facade.name}.forEach needs a function`);
      for (const [k, v] of pairs) callback.call(thisArg, v, k, this);
    },
  });
  Object.defineProperty(Facade.prototype, Symbol.iterator, {
    configurable: true,
    writable: true,
    value: Facade.prototype.entries,
  });
  Object.defineProperty(Facade.prototype, Symbol.toStringTag, { configurable: true, value: Facade.name });
}

class URLSearchParamsFacade {
  constructor(init) {
    hostOf.set(
      this,
      guard(() => new HostURLSearchParams(init)),
    );
  }
}
Object.defineProperty(URLSearchParamsFacade, "name", { value: "URLSearchParams" });
forwardMethods(URLSearchParamsFacade, [
  "append",
  "delete",
  "get",
  "getAll",
  "has",
  "set",
  "sort",
  "toString",
]);
forwardAccessors(URLSearchParamsFacade, ["size"], false);
forwardIteration(URLSearchParamsFacade);

/** The live URLSearchParams facade of a host URL's searchParams (one per URL, as `url.searchParams`). */
const searchParamsOf = new WeakMap();
function searchParamsFacade(hostUrl) {
  let f = searchParamsOf.get(hostUrl);
  if (f === undefined) {
    f = Object.create(URLSearchParamsFacade.prototype);
    hostOf.set(f, hostUrl.searchParams);
    searchParamsOf.set(hostUrl, f);
  }
  return f;
}

class URLFacade {
  constructor(url, base) {
    hostOf.set(
      this,
      guard(() => (base === undefined ? new HostURL(url) : new HostURL(url, base))),
    );
  }

  get searchParams() {
    return searchParamsFacade(host(this, "URL"));
  }

  static canParse(url, base) {
    return guard(() => HostURL.canParse(url, base));
  }
}
Object.defineProperty(URLFacade, "name", { value: "URL" });
forwardAccessors(
  URLFacade,
  ["href", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"],
  true,
);
forwardAccessors(URLFacade, ["origin"], false);
forwardMethods(URLFacade, ["toString", "toJSON"]);
Object.defineProperty(URLFacade.prototype, Symbol.toStringTag, { configurable: true, value: "URL" });

class HeadersFacade {
  constructor(init) {
    hostOf.set(
      this,
      guard(() => new HostHeaders(init)),
    );
  }
}
Object.defineProperty(HeadersFacade, "name", { value: "Headers" });
forwardMethods(HeadersFacade, ["append", "delete", "get", "getSetCookie", "has", "set"]);
forwardIteration(HeadersFacade);

class TextEncoderFacade {
  constructor() {
    hostOf.set(this, new HostTextEncoder());
  }
}
Object.defineProperty(TextEncoderFacade, "name", { value: "TextEncoder" });
forwardAccessors(TextEncoderFacade, ["encoding"], false);
forwardMethods(TextEncoderFacade, ["encode", "encodeInto"]);
Object.defineProperty(TextEncoderFacade.prototype, Symbol.toStringTag, {
  configurable: true,
  value: "TextEncoder",
});

class TextDecoderFacade {
  constructor(label, options) {
    hostOf.set(
      this,
      guard(() => new HostTextDecoder(label, options)),
    );
  }
}
Object.defineProperty(TextDecoderFacade, "name", { value: "TextDecoder" });
forwardAccessors(TextDecoderFacade, ["encoding", "fatal", "ignoreBOM"], false);
forwardMethods(TextDecoderFacade, ["decode"]);
Object.defineProperty(TextDecoderFacade.prototype, Symbol.toStringTag, {
  configurable: true,
  value: "TextDecoder",
});

/** A Headers facade's entries as a plain object (fetch reads its init this way), or null if it is not one. */
function headersAsPlainObject(value) {
  const h = typeof value === "object" && value !== null ? hostOf.get(value) : undefined;
  if (!(h instanceof HostHeaders)) return null;
  const plain = {};
  h.forEach((v, k) => (plain[k] = v));
  return plain;
}

/** The classes, hardened (once per worker, after lockdown). */
function makeWebFacades(harden) {
  return harden({
    URL: URLFacade,
    URLSearchParams: URLSearchParamsFacade,
    Headers: HeadersFacade,
    TextEncoder: TextEncoderFacade,
    TextDecoder: TextDecoderFacade,
  });
}

module.exports = { makeWebFacades, headersAsPlainObject };
