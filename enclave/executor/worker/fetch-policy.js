"use strict";
/**
 * The fetch policy of a run, as the worker uses it: null (fetch disabled) or `{allowHosts, guard}`,
 * where allowHosts is the operator's host allow-list (null: any host) and guard the address guard
 * (enclave/net/address-guard.js) with the operator's allowed non-public addresses. Compiled policies are
 * cached: the relayer sends the same policy with every run.
 */
const { makeAddressGuard } = require("../../net/address-guard");

const cache = new Map();

function compileFetchPolicy(policy) {
  if (policy === null || policy === undefined) return null;
  const key = JSON.stringify(policy);
  let compiled = cache.get(key);
  if (compiled === undefined) {
    compiled = Object.freeze({
      allowHosts:
        Array.isArray(policy.allowHosts) && policy.allowHosts.length > 0 ? [...policy.allowHosts] : null,
      guard: makeAddressGuard(policy.allowAddresses ?? []),
    });
    if (cache.size >= 32) cache.clear();
    cache.set(key, compiled);
  }
  return compiled;
}

module.exports = { compileFetchPolicy };
