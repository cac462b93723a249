"use strict";
/**
 * Which Compartment a run gets (docs/actions.md, "Runs cannot leak into each other").
 *
 * Making a Compartment is the largest part of a small run's CPU in the worker (SES copies every global
 * onto a new object and builds its evaluator; the garbage it leaves is most of the worker's GC). So a
 * Compartment is used again by the next run when, and only when, nothing can tell it from a new one:
 *
 *  - the next run is of the same account as the run that used it (runs of different accounts never
 *    share it, whatever the check below says);
 *  - the run that used it succeeded and imported no modules (a module's records live in the
 *    Compartment);
 *  - after that run, its global object is put back exactly as it was made (restore): every property the
 *    run or its set-up added is deleted, and every property it was made with must still be there, in the
 *    same order, with the same value (the same object: the shared values are hardened) and the same
 *    attributes; it must still be extensible and have the same prototype. Anything else (a property the
 *    run pinned, one it changed, deleted or redefined, a frozen global) and it is dropped.
 *
 * What else a run could leave behind: nothing. Every other object it can reach is either hardened and
 * shared (the intrinsics, the facades) or made for that run alone (its Actions, params, console…), and
 * none of its code can run once it has ended (run-state.js: its timers, fetches and key operations never
 * call back; the worker drains the microtask queue before the next run starts). The run-scoped globals
 * (Lit, LitActions, LitAuth, LitHeaders) are accessors made with the Compartment: they answer the run in
 * progress and nothing between runs (test/executor/compartment-reuse.test.ts).
 *
 * Besides those kept for reuse (one for each of the last few accounts), one spare Compartment is made ahead while the worker is idle, for a run
 * of another account (or after a run that could not give its Compartment back).
 */

/** How many accounts' Compartments a worker keeps for their next run (a Map in insertion order). */
const KEPT_ACCOUNTS = 4;

/**
 * What a Compartment's global object looked like when it was made. `reinstallable`: the names of the
 * properties restore may put back as they were made (the lazy globals, which a run turns into data
 * properties when it reads or assigns them: sandbox-worker.js, defineLazyGlobals).
 */
function snapshot(globalObject, reinstallable = []) {
  const keys = Reflect.ownKeys(globalObject);
  return Object.freeze({
    keys,
    keySet: new Set(keys),
    descriptors: keys.map((k) => Reflect.getOwnPropertyDescriptor(globalObject, k)),
    proto: Reflect.getPrototypeOf(globalObject),
    reinstall: Object.freeze(keys.flatMap((k, i) => (reinstallable.includes(k) ? [i] : []))),
  });
}

function sameDescriptor(a, b) {
  return (
    a !== undefined &&
    Object.is(a.value, b.value) &&
    a.get === b.get &&
    a.set === b.set &&
    a.writable === b.writable &&
    a.enumerable === b.enumerable &&
    a.configurable === b.configurable
  );
}

/**
 * Puts the global object back as `template` recorded it: deletes what was added, redefines the
 * reinstallable properties that a run changed (if it left them configurable) as they were made, then
 * checks that the rest is untouched. False when that cannot be done (the Compartment must then not be
 * used again). No action code runs here: the global object is an ordinary object, and neither deleting
 * nor defining a property nor reading a descriptor calls an accessor.
 */
function restore(globalObject, template) {
  if (!Object.isExtensible(globalObject) || Reflect.getPrototypeOf(globalObject) !== template.proto)
    return false;
  for (const key of Reflect.ownKeys(globalObject)) {
    if (!template.keySet.has(key) && !Reflect.deleteProperty(globalObject, key)) return false;
  }
  for (const i of template.reinstall) {
    const key = template.keys[i];
    const now = Reflect.getOwnPropertyDescriptor(globalObject, key);
    if (sameDescriptor(now, template.descriptors[i])) continue;
    // Deleted and defined again: it would come back out of order, which the check below refuses.
    if (
      (now !== undefined && !now.configurable) ||
      !Reflect.defineProperty(globalObject, key, template.descriptors[i])
    )
      return false;
  }
  const keys = Reflect.ownKeys(globalObject);
  if (keys.length !== template.keys.length) return false;
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] !== template.keys[i]) return false;
    if (!sameDescriptor(Reflect.getOwnPropertyDescriptor(globalObject, keys[i]), template.descriptors[i]))
      return false;
  }
  return true;
}

/**
 * @param make () => {compartment, ...}: a new Compartment with everything a run's starts with; its
 *   global object as made is what restore puts back.
 * @param reinstallable the names of its globals that restore may define again as they were made
 *   (snapshot).
 */
function makeCompartmentKeeper(make, reinstallable = []) {
  const fresh = () => {
    const made = make();
    // evaluated: {program, fn}, the wrapper last evaluated in it (sandbox-worker.js reuses it).
    const template = snapshot(made.compartment.globalThis, reinstallable);
    return { made, template, reused: false, evaluated: null };
  };
  // account -> entry: the Compartment each account's last run gave back (a few accounts, the most
  // recently used; an account's entry is only ever handed to that account's runs).
  const kept = new Map();
  let spare = null; // an entry never used by any run

  return {
    /**
     * The entry ({made, template, reused, evaluated}) of the Compartment for a run of `account` (any value;
     * compared as a Map key); `reused` tells whether a run used it before.
     */
    take(account) {
      const entry = kept.get(account);
      if (entry !== undefined) {
        kept.delete(account);
        entry.reused = true;
        return entry;
      }
      const made = spare ?? fresh();
      spare = null;
      return made;
    },
    /**
     * After the run that took `entry` has ended and its answer is posted: keep it for the account's
     * next run if `reusable` (it succeeded and imported nothing) and its global object can be put back.
     */
    giveBack(entry, account, reusable) {
      if (!reusable || !restore(entry.made.compartment.globalThis, entry.template)) return;
      kept.set(account, entry);
      if (kept.size > KEPT_ACCOUNTS) kept.delete(kept.keys().next().value);
    },
    /** Makes a spare ahead (while the worker is idle), unless one is waiting. */
    prepareSpare() {
      if (spare === null) spare = fresh();
    },
  };
}

module.exports = { makeCompartmentKeeper, restore, snapshot };
