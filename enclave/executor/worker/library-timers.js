"use strict";
/**
 * The worker realm's global `setTimeout`, `setInterval`, `clearTimeout` and `clearInterval`, as seen by
 * the libraries endowed to actions (ethers v5 calls them by their global names, at call time).
 *
 * Why: action code can reach host library code that starts timers of its own, e.g. ethers v5's
 * provider base classes (reachable through the prototype chain of the endowed providers: network
 * detection, polling, caches). With Node's timers, such a callback outlives the run that started it and
 * runs during a later run of another account, possibly in a subclass the finished run defined (its code
 * then steals that run's CPU), and a callback that throws is an uncaught exception that kills the worker.
 * Here each library timer belongs to the run in progress when it was set: it fires only during that run,
 * it is cleared when the run ends, and an error its callback throws ends that run with `action_threw`.
 * As before, it is not pending work: a run does not wait for a library's timers (a polling interval
 * would otherwise keep every run to its wall-time limit). A timer set while no run is in progress
 * never fires.
 *
 * The worker's own code captures Node's timers before this is installed (sandbox-worker.js) and is not
 * affected; Node's internals use their own timers.
 */
const { describeThrown } = require("./values");
const { MAX_CONCURRENT_TIMERS } = require("./timers");

/**
 * Replaces the timer globals of `globalObject`. `currentRun()` answers the RunState in progress or null;
 * `hostTimers` are Node's setTimeout/clearTimeout, captured before.
 */
function installLibraryTimers(globalObject, hostTimers, currentRun) {
  // Per run (dropped with it): handle -> {host}, host null while its callback runs. A timer can only be
  // cleared by code of the run that set it.
  const handlesOf = new WeakMap();
  const handles = (run) => {
    let m = handlesOf.get(run);
    if (m === undefined) handlesOf.set(run, (m = new Map()));
    return m;
  };
  let nextHandle = 1;

  const schedule = (repeat) =>
    function (fn, ms, ...args) {
      const run = currentRun();
      const handle = nextHandle++;
      if (run === null || run.ended || typeof fn !== "function") return handle;
      const delay = Math.max(repeat ? 1 : 0, Number(ms) || 0);
      if (run.libraryTimers.size >= MAX_CONCURRENT_TIMERS)
        throw run.fail("sleep_limit", `more than ${MAX_CONCURRENT_TIMERS} concurrent sleeps and timers`);
      const byHandle = handles(run);
      const arm = () => {
        const entry = { host: null };
        entry.host = hostTimers.setTimeout(() => {
          run.libraryTimers.delete(entry.host);
          entry.host = null;
          if (!run.ended && run.fatal === null) {
            try {
              fn(...args);
            } catch (e) {
              run.stop("action_threw", `a library timer callback threw: ${describeThrown(e)}`);
            }
          }
          // An interval its callback did not clear is armed again; anything else is done.
          if (repeat && byHandle.get(handle) === entry && !run.ended && run.fatal === null) arm();
          else if (byHandle.get(handle) === entry) byHandle.delete(handle);
        }, delay);
        run.libraryTimers.add(entry.host);
        byHandle.set(handle, entry);
      };
      arm();
      return handle;
    };

  const clear = (handle) => {
    const run = currentRun();
    if (run === null) return;
    const byHandle = handles(run);
    const entry = byHandle.get(handle);
    if (entry === undefined) return;
    byHandle.delete(handle);
    if (entry.host === null) return; // its callback is running: not armed again
    hostTimers.clearTimeout(entry.host);
    run.libraryTimers.delete(entry.host);
  };

  globalObject.setTimeout = schedule(false);
  globalObject.setInterval = schedule(true);
  globalObject.clearTimeout = clear;
  globalObject.clearInterval = clear;
}

module.exports = { installLibraryTimers };
