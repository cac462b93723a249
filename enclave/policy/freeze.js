"use strict";
/**
 * Policy documents are content-addressed: the document of a CID never changes, so each side keeps one
 * parsed copy per CID and every run of every group naming it shares that copy (the relayer's
 * policyDocuments.ts, the worker's policy-cache.js). A shared copy is frozen, deeply, so that no run can
 * change what the next one is checked against; evaluate.js and stateless.ts cache what they derive
 * from a document (its rules by operation kind, whether it is stateless) only for frozen documents.
 *
 * Plain JavaScript (types in freeze.d.ts): the action worker's trusted side loads it too.
 */

/** `value`, with every object and array reachable from it frozen. */
function deepFreeze(value) {
  if (value === null || typeof value !== "object" || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
  return value;
}

module.exports = { deepFreeze };
