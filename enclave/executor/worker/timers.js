"use strict";
/**
 * setTimeout / setInterval / clearTimeout / clearInterval / queueMicrotask for one run, with the
 * semantics actions written for the reference runtime (Deno) rely on:
 *
 *  - a pending timer is pending work: the run is not over while one is scheduled (an interval nobody
 *    clears keeps the run going until the wall-time limit, as it keeps a Deno process alive);
 *  - an error thrown by a callback is uncaught: it ends the run with `action_threw`, as an uncaught
 *    exception ends a Deno program;
 *  - ids are positive integers, shared by timeouts and intervals (either clear function clears
 *    either), and clearing an unknown or finished id does nothing;
 *  - a string "callback" is refused: it would be eval, which actions do not get;
 *  - delays follow the HTML rules: not a number or negative means 0, and over 2^31 - 1 ms means 0
 *    too (browsers, Deno and Node all do this).
 *
 * Host timers are the worker's own (captured before lockdown), so they are cleared when the run
 * ends (RunState.end clears pendingTimers) and never call back into a finished run. Sleeps and
 * timers share one bound of concurrently pending timers per run.
 */
const MAX_CONCURRENT_TIMERS = 1000;
const MAX_DELAY_MS = 2 ** 31 - 1;

function delayOf(ms) {
  const n = Number(ms);
  if (!Number.isFinite(n) || n < 0 || n > MAX_DELAY_MS) return 0;
  return Math.floor(n);
}

function checkCallback(name, fn) {
  if (typeof fn === "function") return;
  throw new TypeError(
    typeof fn === "string"
      ? `${name} needs a function: a string of code would be evaluated, and actions cannot evaluate code`
      : `${name} needs a function`,
  );
}

function makeTimers(run, harden, describeThrown) {
  const byId = new Map(); // id -> host timer handle of the id's next firing
  let nextId = 1;
  // The interval whose callback is running (0: none), and whether that callback cleared it: it is
  // not scheduled at that moment, so clearing it means "do not re-arm".
  let firing = 0;
  let firingCleared = false;

  /** An error a callback threw is uncaught: the run ends with it, at once. */
  const uncaught = (name, e) => {
    run.stop("action_threw", `${name} callback threw: ${describeThrown(e)}`);
  };

  const schedule = (id, fn, delay, args, repeat) => {
    if (run.pendingTimers.size >= MAX_CONCURRENT_TIMERS) {
      throw run.fail("sleep_limit", `more than ${MAX_CONCURRENT_TIMERS} concurrent sleeps and timers`);
    }
    const handle = run.timers.setTimeout(() => {
      run.pendingTimers.delete(handle);
      byId.delete(id);
      if (run.ended || run.fatal !== null) return run.noteSettled();
      if (repeat) [firing, firingCleared] = [id, false];
      try {
        fn(...args);
      } catch (e) {
        uncaught(repeat ? "setInterval" : "setTimeout", e);
      }
      // Re-armed after the callback, as HTML intervals are: a slow callback delays the next firing
      // instead of piling firings up.
      if (repeat && !firingCleared && !run.ended && run.fatal === null) schedule(id, fn, delay, args, true);
      firing = 0;
      run.noteSettled();
    }, delay);
    run.pendingTimers.add(handle);
    byId.set(id, handle);
  };

  const add = (name, fn, ms, args, repeat) => {
    run.assertLive();
    checkCallback(name, fn);
    const id = nextId++;
    // An interval of 0 would spin; 1 ms is Node's and Deno's floor too.
    schedule(id, fn, repeat ? Math.max(1, delayOf(ms)) : delayOf(ms), args, repeat);
    return id;
  };

  const clear = (id) => {
    if (id === firing && firing !== 0) firingCleared = true;
    const handle = byId.get(id);
    if (handle === undefined) return; // finished, unknown, or the interval now running (above)
    run.timers.clearTimeout(handle);
    run.pendingTimers.delete(handle);
    byId.delete(id);
    run.noteSettled();
  };

  return harden({
    setTimeout: function setTimeout(fn, ms, ...args) {
      return add("setTimeout", fn, ms, args, false);
    },
    setInterval: function setInterval(fn, ms, ...args) {
      return add("setInterval", fn, ms, args, true);
    },
    clearTimeout: function clearTimeout(id) {
      clear(id);
    },
    clearInterval: function clearInterval(id) {
      clear(id);
    },
    queueMicrotask: function queueMicrotask(fn) {
      run.assertLive();
      checkCallback("queueMicrotask", fn);
      Promise.resolve().then(() => {
        if (run.ended || run.fatal !== null) return;
        try {
          fn();
        } catch (e) {
          uncaught("queueMicrotask", e);
        }
      });
    },
  });
}

module.exports = { makeTimers, MAX_CONCURRENT_TIMERS };
