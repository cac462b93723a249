"use strict";
/**
 * One HTTP(S) request to a user-supplied URL that can only reach addresses an address guard permits
 * (address-guard.js). Plain CommonJS, usable from worker threads.
 *
 * No DNS rebinding: the host name is resolved once, by the connection's own `lookup`, and the socket
 * connects to the address that lookup returned, after the guard approved it; nothing resolves the name a
 * second time. An IP literal in the URL is checked directly (Node does not call `lookup` for it).
 * Redirects are never followed (the caller sees the 3xx and decides, through the same checks). The body
 * is read up to a cap; the caller's AbortSignal ends everything.
 */
const http = require("node:http");
const https = require("node:https");
const dns = require("node:dns");
const net = require("node:net");

/** A refusal by the guard: `code` is "address_refused"; the message names the host and the category. */
class AddressRefusedError extends Error {
  constructor(host, address, category) {
    super(`${host} resolves to ${address}, a ${category} address, which this service does not connect to`);
    this.code = "address_refused";
  }
}

class BodyTooLargeError extends Error {
  constructor(cap) {
    super(`response body over ${cap} bytes`);
    this.code = "body_too_large";
  }
}

/** A `lookup` for http.request that resolves once and answers only with an address the guard permits. */
function guardedLookup(guard, resolve = dns.lookup) {
  return (hostname, options, callback) => {
    resolve(hostname, { all: true, verbatim: true }, (err, addresses) => {
      if (err) return callback(err);
      const permitted = addresses.find((a) => guard.permits(a.address));
      if (permitted === undefined) {
        const first = addresses[0];
        return callback(new AddressRefusedError(hostname, first.address, guard.reason(first.address)));
      }
      if (options && options.all) return callback(null, [permitted]);
      callback(null, permitted.address, permitted.family);
    });
  };
}

/**
 * `request(url, {method, headers, body, signal, maxBodyBytes, guard})` → `{status, statusText, headers,
 * body}` (`headers` a plain object with lower-case names, `body` a Uint8Array). Rejects with
 * AddressRefusedError, BodyTooLargeError, an AbortError when the signal fires, or the network error.
 */
function guardedRequest(url, opts) {
  const { guard, signal, maxBodyBytes } = opts;
  const literal = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  if (net.isIP(literal) !== 0 && !guard.permits(literal)) {
    return Promise.reject(new AddressRefusedError(url.host, literal, guard.reason(literal)));
  }
  const transport = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = transport.request(url, {
      method: opts.method ?? "GET",
      headers: opts.headers ?? {},
      lookup: guardedLookup(guard),
      agent: false, // a fresh connection: a pooled socket would skip the lookup
      signal,
    });
    req.on("error", reject);
    req.on("response", (res) => {
      const chunks = [];
      let total = 0;
      res.on("data", (chunk) => {
        total += chunk.byteLength;
        if (total > maxBodyBytes) {
          res.destroy();
          req.destroy();
          reject(new BodyTooLargeError(maxBodyBytes));
          return;
        }
        chunks.push(chunk);
      });
      res.on("error", reject);
      res.on("end", () => {
        const headers = {};
        for (const [k, v] of Object.entries(res.headers))
          headers[k] = Array.isArray(v) ? v.join(", ") : String(v);
        resolve({
          status: res.statusCode,
          statusText: res.statusMessage ?? "",
          headers,
          body: new Uint8Array(Buffer.concat(chunks, total)),
        });
      });
    });
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

module.exports = { guardedRequest, guardedLookup, AddressRefusedError, BodyTooLargeError };
