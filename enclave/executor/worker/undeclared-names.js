"use strict";
/**
 * Makes reading an undeclared name throw `ReferenceError`, as it does in any JavaScript engine.
 *
 * Why this is needed: an SES Compartment evaluates code inside `with` scopes whose last one (the "scope
 * terminator") answers `undefined` for every name it does not know, in strict mode too, so that code
 * cannot reach the host's globals. A typo in an action (`pkpid` for `pkpId`) would then silently read
 * `undefined` and the action would sign or return the wrong thing with `has_error: false`.
 *
 * How: the action's source (already wrapped in its function) is parsed once (acorn) and its scopes are
 * analysed (eslint-scope); every name it reads without declaring it, and that the run's globals do not
 * provide, gets an accessor on the compartment's global object that throws
 * `ReferenceError: <name> is not defined`. Names that only appear as `typeof name` stay `undefined`, as in
 * JavaScript (feature tests such as `typeof window === "undefined"` keep working). Assigning to such a
 * name through `globalThis.name = v` defines it, after which reads work, also as in JavaScript.
 *
 * The analysis is cached per source text (a warm run of the same action does not parse again).
 */
const acorn = require("acorn");
const eslintScope = require("eslint-scope");

const CACHE_ENTRIES = 128;
const cache = new Map(); // wrapped source -> frozen array of names read but never declared

const TYPEOF_BEFORE = /typeof\s*\(*\s*$/;

/**
 * Names the source reads as bare identifiers without declaring them, except names used only as the
 * operand of `typeof`. Returns null when the source does not parse (the Compartment reports the
 * syntax error in its own words).
 */
function undeclaredReads(source) {
  const hit = cache.get(source);
  if (hit !== undefined) {
    cache.delete(source); // LRU: move to the end
    cache.set(source, hit);
    return hit;
  }
  let names;
  try {
    const ast = acorn.parse(source, { ecmaVersion: "latest", sourceType: "script", ranges: true });
    const scopes = eslintScope.analyze(ast, { ecmaVersion: 2022, sourceType: "script" });
    const typeofOnly = new Map(); // name -> true while every read so far was a typeof operand
    for (const ref of scopes.globalScope.through) {
      if (!ref.isRead()) continue; // an undeclared write already throws ReferenceError in SES
      const name = ref.identifier.name;
      const underTypeof = TYPEOF_BEFORE.test(
        source.slice(Math.max(0, ref.identifier.start - 16), ref.identifier.start),
      );
      typeofOnly.set(name, (typeofOnly.get(name) ?? true) && underTypeof);
    }
    names = Object.freeze([...typeofOnly].filter(([, onlyTypeof]) => !onlyTypeof).map(([name]) => name));
  } catch {
    return null;
  }
  cache.set(source, names);
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value);
  return names;
}

/** Install throwing accessors on `globalObject` for the names in `names` that it does not provide. */
function guardUndeclared(globalObject, names) {
  for (const name of names) {
    if (name in globalObject) continue;
    Object.defineProperty(globalObject, name, {
      configurable: true,
      enumerable: false,
      get() {
        throw new ReferenceError(`${name} is not defined`);
      },
      set(value) {
        Object.defineProperty(globalObject, name, {
          value,
          writable: true,
          enumerable: true,
          configurable: true,
        });
      },
    });
  }
}

module.exports = { undeclaredReads, guardUndeclared };
