"use strict";
/**
 * Evaluates a run's imported modules in the run's own Compartment (the main thread fetched, verified
 * and transformed them: enclave/executor/modules/). Each module is a function evaluated by the
 * Compartment, so it sees exactly the globals the action sees and nothing else; it is called with two
 * hardened helpers: one that gives the namespace of its i-th dependency, one that defines an export
 * (a getter, so bindings stay live). Namespaces have no prototype and are frozen once the module ran.
 */

/** Compiles every module (SES's source checks apply: `import(` is refused). Throws like evaluate. */
function compileModules(compartment, imports) {
  return imports.modules.map((m) => compartment.evaluate(m.functionSource));
}

/** Runs the compiled modules, dependencies first; resolves to the namespaces of the action's imports. */
async function runModules(compiled, imports, harden) {
  const namespaces = [];
  for (let i = 0; i < compiled.length; i++) {
    const { deps } = imports.modules[i];
    const ns = Object.create(null);
    const importNamespace = harden((index) => namespaces[deps[index]]);
    const defineExport = harden((name, get, fromStar) => {
      if (Object.prototype.hasOwnProperty.call(ns, name)) {
        if (fromStar) return;
        throw new SyntaxError(`duplicate export "${name}" in ${imports.modules[i].url}`);
      }
      Object.defineProperty(ns, name, { get: harden(get), enumerable: true, configurable: false });
    });
    await compiled[i](importNamespace, defineExport);
    namespaces.push(Object.freeze(ns));
  }
  return harden(imports.actionDeps.map((index) => namespaces[index]));
}

/** What showImportDetails() answers: the reference's {url, hash}, plus the size in bytes. */
function importDetails(imports) {
  if (!imports) return [];
  return imports.modules.map(({ url, hash, size }) => ({ url, hash, size }));
}

module.exports = { compileModules, runModules, importDetails };
