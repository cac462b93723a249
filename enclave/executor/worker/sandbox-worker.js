"use strict";
/**
 * Entry point of one executor worker thread (plain CommonJS: workers start without ts-node).
 *
 * Start-up order matters:
 *  1. load both ethers, the action parser and the guarded HTTP client, and capture the host functions
 *     the runtime needs (timers) in the normal realm;
 *  2. lockdown(): freeze every intrinsic of this thread's realm (never done in the main process);
 *  3. harden everything shared by all runs: the ethers facades, then both ethers' module graphs, the
 *     web facades (URL, URLSearchParams, Headers, TextEncoder, TextDecoder), the CryptoKey and
 *     DOMException classes, and Node's error classes. Nothing shared may stay writable: runs of
 *     different accounts follow each other on this worker (docs/actions.md, "Nothing shared is
 *     writable"; test/executor/reachability.test.ts checks it).
 * Then each run gets a Compartment whose globals are those shared hardened endowments plus hardened
 * accessors and an Actions object made with the Compartment that answer the run in progress only
 * (console, sleep, fetch, crypto, the timers, Actions, Lit): a new one, or the one the same account's
 * last run left, put back as it was made (compartment-keeper.js).
 */
const { parentPort, workerData } = require("node:worker_threads");
const { makeEthersFacade, makeEthers5, hardenEthersModules } = require("./ethers-facade");
const { RunState } = require("./run-state");
const { makeConsole, makeSleep, makeFetch } = require("./endowments");
const { makeTimers } = require("./timers");
const { installLibraryTimers } = require("./library-timers");
const { makeActionsSlot } = require("./runtime-api");
const { makeSignerFactory } = require("./pkp-signer");
const { makeSharedWebGlobals, makeCrypto, makeRequestHeaders, makeAuth } = require("./web-globals");
const { loadNodeErrors, hardenNodeErrors } = require("./node-errors");
const { makeRunKey } = require("./run-key");
const { resolvePolicies } = require("./policy-cache");
const { carryDecisions } = require("./policy-decisions");
const { makeCurveClient } = require("./curve-client");
const { makeCodeCache, evaluateOptions, noteEvaluated } = require("./code-cache");
const { describeThrown, isPlatformError, platformErrorInfo } = require("./values");
const { undeclaredReads, guardUndeclared } = require("./undeclared-names");
const { compileModules, runModules, importDetails } = require("./imports");
const { makeCompartmentKeeper } = require("./compartment-keeper");
const { guardedRequest } = require("../../net/guarded-request");
require("ses");

const host = {
  request: guardedRequest,
  AbortController: globalThis.AbortController,
};
const timers = { setTimeout, clearTimeout };
const hostSetImmediate = setImmediate;
// Library code (ethers v5) gets timers bound to the run in progress (library-timers.js).
installLibraryTimers(globalThis, timers, () => current);
// Authorization epochs shared with the main thread (run-key.js): captured before lockdown, never endowed.
const epochs = workerData && workerData.epochs instanceof Int32Array ? workerData.epochs : null;
// Shared with the parent, captured before lockdown (pool.ts, Slot.started): [0] the id of the last run
// started (kill), [1] requests to the signer thread not answered yet (whereStopped).
const startedRuns = workerData && workerData.started instanceof Int32Array ? workerData.started : null;
const curve = makeCurveClient(workerData && workerData.signerPort, (delta) => {
  if (startedRuns !== null && startedRuns.length > 1) Atomics.add(startedRuns, 1, delta);
});
let lastStarted = 0;

const post = (m) => parentPort.postMessage(m);
const nodeErrors = loadNodeErrors();

lockdown({
  errorTaming: "safe",
  overrideTaming: "moderate",
  consoleTaming: "unsafe",
  errorTrapping: "none",
  unhandledRejectionTrapping: "none",
  stackFiltering: "concise",
  reporting: "none",
});

let current = null; // the RunState of the run in progress, if any

const ethers6 = makeEthersFacade(harden);
const neverAnswers = harden(() => new Promise(() => {}));
// Providers are bound to the fetch and sleep of the run that constructs them (ethers-facade.js).
const ethers5 = makeEthers5(
  harden,
  ethers6,
  () => (current !== null && current.fetch()) || neverAnswers,
  () => (current !== null && current.sleep()) || neverAnswers,
);

// After the facades: what the facades left out is hardened too (ethers-facade.js), and the error
// classes of Node's builtins that libraries may throw (node-errors.js).
hardenEthersModules(harden);
const newSigner = makeSignerFactory(harden);
// Fail closed: a worker whose Node error classes stay writable must not run actions.
if (!hardenNodeErrors(nodeErrors, harden))
  throw new Error("the action worker needs --expose-internals to harden Node's error classes");

const shared = {
  ethers: ethers5,
  // The start compartment's Date and Math: compartments get versions whose now()/random() throw.
  Date,
  Math,
  // Removed from compartment globals: no evaluators, no nested compartments, no lockdown.
  eval: undefined,
  Function: Function.prototype.constructor, // inert: throws when called, keeps `instanceof Function`
  Compartment: undefined,
  lockdown: undefined,
};

/**
 * Shared globals added after the Compartment is made, with one defineProperties call from a prepared
 * descriptor map: cheaper per run than passing them to the Compartment constructor.
 */
const sharedExtras = Object.freeze(
  Object.fromEntries(
    Object.entries({ ...makeSharedWebGlobals(harden), ethers6 }).map(([name, value]) => [
      name,
      Object.freeze({ value, writable: true, enumerable: false, configurable: true }),
    ]),
  ),
);

/**
 * The globals whose value is built on first read, per run (so the run that does not use one does not
 * pay for it), and whether each is enumerable (as the constructor's endowments they used to be).
 * Their accessors are made once with the Compartment and answer the run in progress (cell.run.lazy):
 * reading one, or assigning it, turns it into a plain data property for the rest of the run, and the
 * keeper puts the accessor back afterwards (compartment-keeper.js, restore), so a run that reads none
 * of them defines and deletes nothing.
 */
const LAZY_GLOBALS = Object.freeze([
  ["crypto", false],
  ["console", true],
  ["sleep", true],
  ["fetch", true],
  ["setTimeout", true],
  ["setInterval", true],
  ["clearTimeout", true],
  ["clearInterval", true],
  ["queueMicrotask", true],
]);

/**
 * Defines the lazy globals on a new Compartment's global object: hardened accessors that build the
 * value of the run in progress on first read (undefined between runs) and settle it as a data property.
 */
function defineLazyGlobals(globalObject, cell) {
  for (const [name, enumerable] of LAZY_GLOBALS) {
    const settle = (value) =>
      Object.defineProperty(globalObject, name, { value, writable: true, enumerable, configurable: true });
    Object.defineProperty(globalObject, name, {
      configurable: true,
      enumerable,
      get: harden(
        {
          [name]() {
            if (cell.run === null) return undefined;
            const value = cell.run.lazy.make(name);
            settle(value);
            return value;
          },
        }[name],
      ),
      set: harden(
        {
          [name](value) {
            settle(value);
          },
        }[name],
      ),
    });
  }
}

/** The timers among the lazy globals. */
const TIMER_NAMES = new Set(["setTimeout", "setInterval", "clearTimeout", "clearInterval", "queueMicrotask"]);

/**
 * Makes the run's lazily built capabilities: console, sleep, fetch, crypto and the timers, each made and
 * hardened on first use (a one-signature run reads none of them; hardening them all cost more than the
 * rest of its set-up). Returned as memoised makers, so the global, the library facades (ethers v5
 * providers use the run's fetch and sleep) and the run see one object each.
 */
function lazyCapabilities(run) {
  let console, sleep, fetch, crypto, timers;
  let timerParts;
  const caps = {
    console: () => (console ??= makeConsole(run, harden)),
    sleep: () => (sleep ??= makeSleep(run, harden)),
    fetch: () => (fetch ??= makeFetch(run, harden, host)),
    crypto: () => (crypto ??= makeCrypto(run, harden)),
    timer: (name) => {
      // One set of timers per run (they share ids and the pending bound); each hardened when read.
      timerParts ??= makeTimers(run, (x) => x, describeThrown);
      timers ??= Object.create(null);
      return (timers[name] ??= harden(timerParts[name]));
    },
  };
  /** The value of the lazy global `name` for this run (defineLazyGlobals). */
  caps.make = (name) => (TIMER_NAMES.has(name) ? caps.timer(name) : caps[name]());
  return caps;
}

/**
 * The globals that name the run in progress and that an action can neither delete nor replace (as in
 * the reference runtime: an action, or a library it bundles, must not be able to swap the API it signs
 * with): accessors made with the Compartment, answering `cell.run`, the run in progress (undefined
 * between runs), so that a Compartment used again needs no new ones.
 */
function defineRunScoped(globalObject, cell) {
  const scoped = (name, read, enumerable) =>
    Object.defineProperty(globalObject, name, {
      get: harden({ [name]: () => (cell.run === null ? undefined : read(cell.run)) }[name]),
      enumerable,
      configurable: false,
    });
  // Enumerable, as the data properties they used to be.
  scoped("Lit", (r) => r.lit, true);
  scoped("LitActions", (r) => r.actions, true);
  scoped("LitAuth", (r) => r.getAuth(), false);
  scoped("LitHeaders", (r) => r.getHeaders(), false);
}

/**
 * A new Compartment with what every run's has (the shared globals, the run-scoped accessors), its
 * evaluator already built, and the cell its accessors read. Nothing in it depends on a run or on code.
 */
function newCompartment() {
  const compartment = new Compartment({ ...shared });
  const globalObject = compartment.globalThis;
  Object.defineProperties(globalObject, sharedExtras);
  const cell = { run: null };
  defineRunScoped(globalObject, cell);
  defineLazyGlobals(globalObject, cell);
  // The Compartment's Actions object, bound to each run in turn (runtime-api.js), and its global: an
  // enumerable data property, as the constructor's endowments; the keeper puts back one a run replaced.
  const actions = makeActionsSlot(harden);
  Object.defineProperty(globalObject, "Actions", {
    value: actions.object,
    writable: true,
    enumerable: true,
    configurable: true,
  });
  // `global`, as older runtimes had it (the reference keeps it for them).
  globalObject.global = globalObject;
  compartment.evaluate("undefined"); // builds the evaluator (SES makes it on first use)
  return { compartment, cell, actions };
}

/** A new Compartment, or the one the account's last run gave back (compartment-keeper.js). */
const compartments = makeCompartmentKeeper(newCompartment, [
  ...LAZY_GLOBALS.map(([name]) => name),
  "Actions",
]);

/** SES rejects these patterns in source text, even inside strings and comments: explain which. */
const SES_REJECTIONS = {
  SES_IMPORT_REJECTED: "`import(` is not allowed anywhere in action source, even in a string or comment",
  SES_EVAL_REJECTED: "`eval(` is not allowed anywhere in action source, even in a string or comment",
  SES_HTML_COMMENT_REJECTED: "`<!--` and `-->` are not allowed anywhere in action source",
};

function wrap(code) {
  // A function body, so top-level `await` and `return` work. main's result goes through arguments[0]
  // (a hardened recorder), so it cannot be confused with a top-level return value, and main receives
  // arguments[1] so that a top-level `params` declaration in the action cannot shadow it.
  // arguments[2]: the namespaces of the action's imports (modules/transform.ts rewrote its import
  // declarations into constants read from it).
  return `(async function () {\n${code}\n;if (typeof main === "function") arguments[0](await main(arguments[1]));\n})`;
}

/**
 * The names the program reads but never declares, for the undeclared-name guard (undeclared-names.js),
 * worked out once per program. `main` is read by the wrapper itself, behind a typeof check.
 */
function undeclaredOf(program) {
  if (program.undeclared === undefined)
    program.undeclared = Object.freeze((undeclaredReads(program.source) ?? []).filter((n) => n !== "main"));
  return program.undeclared;
}

/** The code this worker was sent, by CID (code-cache.js). */
const codeCache = makeCodeCache(wrap);

function nextMacrotask() {
  return new Promise((resolve) => hostSetImmediate(resolve));
}

/**
 * The js_params fields that become globals of the run (the reference runtime's behaviour), or the
 * error refusing the run when one would hide a global of the runtime (`Lit`, `ethers`, `Object`, …):
 * an action reading that global would silently get the caller's value instead.
 */
function paramGlobals(params, globalObject) {
  if (typeof params !== "object" || params === null || Array.isArray(params)) return { globals: {} };
  const globals = {};
  for (const name of Object.keys(params)) {
    if (name in globalObject) {
      return {
        error: {
          code: "param_shadows_global",
          message: `js_params field "${name}" has the name of a runtime global; rename the field`,
        },
      };
    }
    globals[name] = params[name];
  }
  return { globals };
}

/** The error a run ends with for a rejection nobody handled (null: the run may still succeed). */
function unhandledRejectionError(run) {
  const reason = run.unhandledRejection;
  if (reason === null) return null;
  if (run.lenientRejections && run.responseSetBeforeRejection) return null;
  if (isPlatformError(reason.value)) return platformErrorInfo(reason.value);
  return {
    code: "unhandled_rejection",
    message: "a promise rejected and nothing handled it: " + describeThrown(reason.value),
  };
}

async function execute(msg) {
  // The run's messages carry the policy decisions of the signatures made here (policy-decisions.js).
  const decisions = carryDecisions(post);
  const run = new RunState(msg, decisions.post, timers);
  let taken = null; // the Compartment's entry (compartment-keeper.js)
  run.importDetails = importDetails(msg.imports);
  if (msg.runKey)
    run.runKey = makeRunKey(msg.runKey, epochs, curve, decisions.note, run.keyOperations.recordKeyOperation);
  current = run;
  let error = null;
  let value;
  try {
    const params = JSON.parse(msg.paramsJson);
    taken = compartments.take(msg.account);
    const { compartment, cell } = taken.made;
    const actions = taken.made.actions.bind(run, newSigner);
    const lazy = lazyCapabilities(run);
    run.fetch = lazy.fetch;
    run.sleep = lazy.sleep;
    let auth, requestHeaders;
    const getAuth = () => (auth ??= makeAuth(run.cid, harden));
    const getHeaders = () => (requestHeaders ??= makeRequestHeaders(msg.requestHeaders, harden));
    cell.run = {
      actions,
      lazy,
      // Frozen (per run; its parts are hardened): Lit.Auth and Lit.Headers are built on first use.
      lit: Object.freeze({
        Actions: actions,
        get Auth() {
          return getAuth();
        },
        get Headers() {
          return getHeaders();
        },
      }),
      getAuth,
      getHeaders,
    };
    // Object.assign, as the Compartment constructor adds its endowments: enumerable data properties.
    Object.assign(compartment.globalThis, { params, jsParams: params });
    const fromParams = paramGlobals(params, compartment.globalThis);
    if (fromParams.error) error = fromParams.error;
    else Object.assign(compartment.globalThis, fromParams.globals);
    const program = msg.program;
    if (program === null)
      error = { code: "worker_crashed", message: "the worker holds no code for this run" };
    const source = program === null ? "" : program.source;
    let fn;
    let modules = [];
    if (error === null) {
      try {
        // A Compartment used again keeps the wrapper it evaluated for this program: a function
        // expression with no name, unreachable from the action, whose every call makes the action's
        // declarations anew; evaluating the same source again would only make an equal one.
        const evaluated = taken.evaluated;
        if (evaluated !== null && evaluated.program === program) fn = evaluated.fn;
        else {
          fn = compartment.evaluate(source, evaluateOptions(program));
          noteEvaluated(program);
          taken.evaluated = { program, fn };
        }
        if (msg.imports) modules = compileModules(compartment, msg.imports);
        // Only the action's own names: modules are not analysed. Packages commonly feature-test with
        // `typeof process !== "undefined" && process.env…`, a name read both ways, which the guard
        // would turn into a ReferenceError at the typeof (docs/actions.md, ES module imports).
        guardUndeclared(compartment.globalThis, undeclaredOf(program));
      } catch (e) {
        const sesCode = Object.keys(SES_REJECTIONS).find((c) => String(e && e.message).includes(c));
        const message = sesCode ? SES_REJECTIONS[sesCode] : describeThrown(e);
        error = {
          code: "syntax_error",
          message: /Cannot use import statement/.test(message)
            ? "import declarations must be at the top level of the action (docs/actions.md, ES module imports)"
            : message,
        };
      }
    }
    if (error === null) {
      let mainCalled = false;
      let mainValue;
      const recordMain = harden((v) => {
        mainCalled = true;
        mainValue = v;
      });
      const namespaces = msg.imports ? await runModules(modules, msg.imports, harden) : undefined;
      const main = fn(recordMain, params, namespaces);
      // If the run is stopped (run.stop) the action's own promise is abandoned: mark it handled so a
      // late rejection is never blamed on a later run.
      main.catch(() => {});
      const topLevelValue = await Promise.race([main, run.stopped]);
      value = mainCalled ? mainValue : topLevelValue;
      // Like the reference runtime, the run lasts until its event loop is empty: an action that
      // calls go() without awaiting it still gets to setResponse. A macrotask turn also proves the
      // microtask queue drained, so a runaway microtask loop counts against this run's wall time.
      for (;;) {
        await nextMacrotask();
        if (run.pendingCount() === 0 || run.fatal !== null) break;
        await Promise.race([run.whenIdle(), run.stopped]);
      }
    }
  } catch (e) {
    error = isPlatformError(e) ? platformErrorInfo(e) : { code: "action_threw", message: describeThrown(e) };
  }
  if (error === null) error = unhandledRejectionError(run);
  if (run.fatal !== null) error = run.fatal;
  let responseJson;
  if (error === null) {
    const response = run.responseSet ? run.response : value;
    try {
      responseJson = JSON.stringify(response === undefined ? null : response);
      if (typeof responseJson !== "string") throw new TypeError("not JSON");
    } catch (e) {
      error = {
        code: "response_not_json",
        message: "the response is not JSON-serializable: " + describeThrown(e),
      };
    }
    if (error === null && Buffer.byteLength(responseJson) > run.limits.maxResponseBytes) {
      error = {
        code: "response_too_large",
        message: `the response is over ${run.limits.maxResponseBytes} bytes`,
      };
      responseJson = undefined;
    }
  }
  run.end();
  current = null;
  if (taken !== null) {
    taken.made.cell.run = null;
    taken.made.actions.unbind();
  }
  decisions.post({
    type: "done",
    runId: run.runId,
    responseJson: error === null ? responseJson : undefined,
    signaturesJson: error === null && run.signatures !== null ? JSON.stringify(run.signatures) : undefined,
    error,
    localKeyOps: run.localKeyOps,
    keyOperations: run.keyOperations.records,
    compartmentReused: taken !== null && taken.reused,
  });
  // The answer is on its way; the next run still waits one macrotask turn, so that a rejection this
  // run left unhandled is reported while no run is current (the handler below then ignores it) and is
  // never blamed on the next run.
  await nextMacrotask();
  // Nothing of this run can run any more: its Compartment may serve the account's next run.
  if (taken !== null) compartments.giveBack(taken, msg.account, error === null && !msg.imports);
}

/**
 * Runs are strictly one at a time. The parent may post the next run while one is in progress
 * (pipelining, pool.ts dispatch): it waits here and starts right after the current run's "done" has
 * been posted, so the parent always sees that run end before the next one's messages. Until then the
 * parent may take it back ("release").
 */
const waiting = [];
let running = false;

function start(msg) {
  // Claim the run: once the parent has given up on this worker (it is being terminated, and a job it
  // had queued here goes back to its queue), nothing more may start here.
  if (startedRuns !== null) {
    if (Atomics.compareExchange(startedRuns, 0, lastStarted, msg.runId) !== lastStarted) {
      if (msg.runKey && msg.runKey.key instanceof ArrayBuffer) new Uint8Array(msg.runKey.key).fill(0);
      return;
    }
    lastStarted = msg.runId;
  }
  running = true;
  execute(msg)
    .catch((e) => {
      // execute() catches everything an action can throw; reaching here is a runtime bug.
      post({
        type: "done",
        runId: msg.runId,
        error: { code: "worker_crashed", message: describeThrown(e) },
      });
    })
    .finally(() => {
      running = false;
      if (waiting.length > 0) start(waiting.shift());
      else compartments.prepareSpare();
    });
}

parentPort.on("message", (msg) => {
  switch (msg.type) {
    case "run":
      // Policy documents are resolved as messages arrive, in the order the main thread sent them
      // (policy-cache.js): a run queued here, even one taken back later, has had its documents read.
      if (msg.runKey) msg.runKey.policies = resolvePolicies(msg.runKey.policies, msg.runKey.forgetPolicies);
      codeCache.receive(msg); // likewise the code (code-cache.js)
      if (running) waiting.push(msg);
      else start(msg);
      break;
    case "release": {
      const i = waiting.findIndex((m) => m.runId === msg.runId);
      if (i < 0) break; // already started (or never here): the parent waits for its "done"
      const [released] = waiting.splice(i, 1);
      if (released.runKey && released.runKey.key instanceof ArrayBuffer)
        new Uint8Array(released.runKey.key).fill(0);
      post({ type: "released", runId: msg.runId });
      break;
    }
    case "keyop_result":
      if (current !== null && current.runId === msg.runId) current.settleKeyOp(msg);
      break;
    case "memory_probe":
      post({ type: "memory", arrayBuffers: process.memoryUsage().arrayBuffers });
      break;
  }
});

// A rejection nobody handled belongs to the action; it must not crash the worker. During a run it is
// noted in the run's logs and, unless the operator chose the lenient mode and the action had already
// set its response, it fails the run (unhandledRejectionError): a `go()` that threw must not come back
// as a success.
process.on("unhandledRejection", (reason) => {
  if (current !== null && !current.ended) {
    makeConsole(current, (x) => x).log("[sigil: unhandled rejection] " + describeThrown(reason));
    current.noteUnhandledRejection(reason);
  }
});

// Warm the compartment path once so the first real run is not the slow one.
newCompartment().compartment.evaluate(wrap("return 1;"))(() => {}, {});
undeclaredReads(wrap("return 1;")); // loads the parser now, not during the first run
compartments.prepareSpare();
post({ type: "ready" });
