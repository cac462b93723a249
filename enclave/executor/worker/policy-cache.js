"use strict";
/**
 * The signing-policy documents this worker holds for the runs whose own PKP it serves under stateless
 * policies (run-key.js; docs/policies.md, "What it costs"). A document is content-addressed: the main
 * thread (policy-handover.ts) sends a CID's document to a worker once, with the first run that needs
 * it, and then only the CID; the worker keeps the document frozen (a run cannot change what the next
 * one is checked against) and shared by every run naming that CID, together with what the engine
 * derives from it (evaluate.js). This module is the worker's trusted side: action code never reaches it.
 *
 * The main thread decides what the worker holds: when it starts over (its own bound), the run message
 * says so (`forgetPolicies`) and the worker forgets everything first. A CID the worker does not hold
 * (which the main thread's bookkeeping rules out) makes the run's key not handed over: every signature
 * then goes to the main thread's policy gate, which is slower but decides the same.
 */
const { deepFreeze } = require("../../policy/freeze");

/** Far above the main thread's bound (policy-handover.ts): only a guard against a bookkeeping bug. */
const MAX_HELD = 1024;

const held = new Map();

/**
 * What a run's grants resolve to when one names a document not held here: not an array, so run-key.js
 * refuses the grant (not undefined, which would read as "no policy").
 */
const UNRESOLVED = false;

/**
 * The run's grants with their documents, from the grants as the run message carries them
 * (`{group, policy: null}`, `{group, policy, cid?}`, `{group, cid}`), or UNRESOLVED when a CID is not
 * held or a grant is malformed; null (or absent) stays null: no policy applies.
 */
function resolvePolicies(wire, forget) {
  if (forget === true) held.clear();
  if (wire === null || wire === undefined) return null;
  if (!Array.isArray(wire)) return UNRESOLVED;
  const grants = [];
  for (const g of wire) {
    if (g === null || typeof g !== "object" || typeof g.group !== "string") return UNRESOLVED;
    if (g.policy === null) {
      grants.push({ group: g.group, policy: null });
      continue;
    }
    const cid = typeof g.cid === "string" ? g.cid : undefined;
    if (g.policy !== undefined) {
      const policy = deepFreeze(g.policy);
      if (cid !== undefined) {
        if (held.size >= MAX_HELD) held.clear();
        held.set(cid, policy);
      }
      grants.push({ group: g.group, policy });
      continue;
    }
    const policy = cid === undefined ? undefined : held.get(cid);
    if (policy === undefined) return UNRESOLVED;
    grants.push({ group: g.group, policy });
  }
  return grants;
}

/** How many documents are held (tests). */
function heldPolicies() {
  return held.size;
}

module.exports = { UNRESOLVED, resolvePolicies, heldPolicies };
