"use strict";
/**
 * The action code a worker holds, by CID (enclave/executor/code-handover.ts decides what is sent; read
 * its comment first). A run message carries its code the first time this worker runs that CID (or when
 * the code under the CID changed) and the CID alone afterwards; each message is resolved here as it
 * arrives, in the order the main thread posted them, so what is held is exactly what the main thread
 * recorded.
 *
 * What is held per CID is a "program": the code's wrapped source (one string, reused by every run of
 * the CID, so V8 hashes it once and finds its eval cache entry at once; the code itself is not kept
 * beside it), and whether SES has already evaluated that exact source here. Nothing of it is reachable from a Compartment: runs get a new
 * Compartment and a fresh global object each, as before.
 *
 * What "already evaluated" lets a run skip: SES's scan for direct `eval(` expressions, the one source
 * check it makes optional (`__rejectSomeDirectEvalExpressions__`), a pure function of the source text
 * that this same string has already passed. Its mandatory scans (`import(` and HTML comments) still run
 * on every evaluation: they are what keeps the code from reaching outside its Compartment.
 */

const SCANNED = Object.freeze({ __rejectSomeDirectEvalExpressions__: false });

/** @param wrap (code) => the source the worker evaluates for it */
function makeCodeCache(wrap) {
  const held = new Map();
  const program = (code) => ({ source: wrap(code), scanned: false });
  return {
    /**
     * Resolve a run message's code as it arrives: sets msg.program (null when the message carries no
     * code and none is held under its CID: a bookkeeping fault, the run is refused) and drops msg.code.
     */
    receive(msg) {
      if (msg.forgetCode === true) held.clear();
      const cid = typeof msg.cid === "string" ? msg.cid : "";
      if (typeof msg.code === "string") {
        msg.program = program(msg.code);
        if (msg.holdCode === true) held.set(cid, msg.program);
      } else {
        msg.program = held.get(cid) ?? null;
      }
      msg.code = undefined;
    },
    /** How many CIDs' code this worker holds (tests). */
    size: () => held.size,
  };
}

/** The options of compartment.evaluate for a program (undefined: SES's defaults, every scan). */
function evaluateOptions(program) {
  return program.scanned ? SCANNED : undefined;
}

/** Record that SES evaluated the program's source without refusing it. */
function noteEvaluated(program) {
  program.scanned = true;
}

module.exports = { makeCodeCache, evaluateOptions, noteEvaluated };
