"use strict";
/**
 * Per-run bookkeeping inside the worker: the run's limits, its pending asynchronous work (key operations,
 * fetches, sleeps), its log budget, and its fatal limit violation if any.
 *
 * Every capability handed to a run is bound to its RunState. Once the run has ended, its capabilities do
 * nothing: pending timers are cleared, fetches aborted, and late key-operation answers dropped. Their
 * promises never settle, so leftover code of a finished run cannot act during a later run.
 */
const { platformError } = require("./values");
const { keyOpArgsProblem } = require("./arg-limits");
const { compileFetchPolicy } = require("./fetch-policy");
const { makeKeyOperationLog } = require("./key-operation-log");

class RunState {
  constructor(msg, post, hostTimers) {
    this.runId = msg.runId;
    this.cid = msg.cid;
    this.limits = msg.limits;
    this.fetchPolicy = compileFetchPolicy(msg.fetchPolicy); // null = fetch disabled
    // Strict (default): any rejection nobody handled fails the run. Lenient: not if the action had
    // already set its response when it happened.
    this.lenientRejections = msg.lenientRejections === true;
    this.unhandledRejection = null; // {value} of the first one
    this.responseSetBeforeRejection = false;
    this.post = post;
    this.timers = hostTimers;
    this.ended = false;
    this.fatal = null;
    this.response = undefined;
    this.responseSet = false;
    this.logBytes = 0;
    this.logTruncated = false;
    this.fetches = 0;
    // Key operations of this run, wherever they are served; those served here (the run's own PKP, see
    // run-key.js) are reported with the result, the main thread counts the others itself.
    this.keyOps = 0;
    this.localKeyOps = 0;
    this.runKey = null; // set by the worker when the run came with its own PKP's key
    // What each key operation served here did (the audit log's record), sent with the result.
    this.keyOperations = makeKeyOperationLog(this.limits.maxKeyOps);
    this.nextCallId = 1;
    this.pendingCalls = new Map(); // callId -> {resolve, reject}
    this.pendingTimers = new Set();
    this.pendingFetches = new Set(); // AbortControllers
    this.libraryTimers = new Set(); // timers of library code (library-timers.js): not pending work
    this.pendingWork = new Set(); // other host work of this run (WebCrypto calls), see track()
    // Named signatures of the older signEcdsa({toSign, publicKey, sigName}) API, reported with the result.
    this.signatures = null;
    this.idleWaiters = [];
    // Resolves when something ends the run at once (an uncaught error in a timer callback), even
    // while the action is still awaiting something that will now never settle.
    this.stopped = new Promise((resolve) => (this.resolveStopped = resolve));
  }

  pendingCount() {
    return (
      this.pendingCalls.size + this.pendingTimers.size + this.pendingFetches.size + this.pendingWork.size
    );
  }

  /** Resolves when no key operation, fetch or sleep of this run is outstanding. */
  whenIdle() {
    if (this.pendingCount() === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  noteSettled() {
    if (this.pendingCount() !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  noteUnhandledRejection(value) {
    if (this.unhandledRejection !== null) return;
    this.unhandledRejection = { value };
    this.responseSetBeforeRejection = this.responseSet;
  }

  /**
   * A host promise the run waits for (the run is not over while it is pending); its answer is dropped
   * once the run has ended, like every other capability's.
   */
  track(promise) {
    const token = {};
    this.pendingWork.add(token);
    return new Promise((resolve, reject) => {
      const settle = (fn, value) => {
        if (this.ended) return;
        this.pendingWork.delete(token);
        fn(value);
        this.noteSettled();
      };
      promise.then(
        (v) => settle(resolve, v),
        (e) => settle(reject, e),
      );
    });
  }

  /** Record a limit violation: it ends the run with this code even if the action catches the error. */
  fail(code, message) {
    if (this.fatal === null) this.fatal = { code, message };
    return platformError(code, message);
  }

  /** An error nothing can catch any more: the run ends with it now, whatever it was waiting for. */
  stop(code, message) {
    this.fail(code, message);
    this.resolveStopped();
  }

  assertLive() {
    if (this.fatal !== null)
      throw platformError(this.fatal.code, "the run already failed: " + this.fatal.message);
  }

  /**
   * A key operation: served here when it concerns the run's own PKP (run-key.js), otherwise sent to
   * the enclave side, which authorizes it. Resolves with the answer. Both kinds count against
   * maxKeyOps, and going over it ends the run, as the enclave side does for the operations it serves.
   */
  keyOp(op, args) {
    this.assertLive();
    // Checked here so that an oversized argument is never copied to another thread; the main thread
    // checks again (key-ops.ts). Not counted: it reaches no key.
    const tooLarge = keyOpArgsProblem(op, args, this.limits);
    if (tooLarge !== null) return Promise.reject(platformError("key_op_too_large", tooLarge));
    if (this.keyOps >= this.limits.maxKeyOps) {
      return Promise.reject(
        this.fail("key_ops_limit", `more than ${this.limits.maxKeyOps} key operations in one run`),
      );
    }
    this.keyOps++;
    const local = this.runKey !== null ? this.runKey.serve(op, args) : undefined;
    if (local === undefined) return this.sendKeyOp(op, args);
    // Pending like an enclave-side call, so the run waits for it and a late answer after the run has
    // ended is dropped; when the worker cannot serve it after all, it goes to the enclave side.
    const callId = this.nextCallId++;
    return new Promise((resolve, reject) => {
      this.pendingCalls.set(callId, { resolve, reject });
      const settle = (value) => {
        if (this.ended || !this.pendingCalls.has(callId)) return;
        if (value === undefined) this.sendKeyOp(op, args).then(resolve, reject);
        else {
          this.localKeyOps++;
          resolve(value);
        }
        this.pendingCalls.delete(callId);
        this.noteSettled();
      };
      local.then(settle, () => settle(undefined));
    });
  }

  /** Send a key operation to the enclave side; resolves with its answer. */
  sendKeyOp(op, args) {
    const callId = this.nextCallId++;
    return new Promise((resolve, reject) => {
      this.pendingCalls.set(callId, { resolve, reject });
      this.post({ type: "keyop", runId: this.runId, callId, op, args });
    });
  }

  settleKeyOp(msg) {
    const call = this.pendingCalls.get(msg.callId);
    if (call === undefined || this.ended) return;
    this.pendingCalls.delete(msg.callId);
    if (msg.ok) call.resolve(msg.value);
    else {
      const e = msg.fatal
        ? this.fail(msg.error.code, msg.error.message)
        : platformError(msg.error.code, msg.error.message);
      // What the action may read about the failure (sendTransaction: the hash, the revert reason).
      const d = msg.error.details;
      if (typeof d === "object" && d !== null) e.details = Object.freeze({ ...d });
      call.reject(e);
    }
    this.noteSettled();
  }

  /** Ends the run: nothing it started may call back into the action afterwards. */
  end() {
    this.ended = true;
    if (this.runKey !== null) this.runKey.wipe();
    this.runKey = null;
    for (const t of this.pendingTimers) this.timers.clearTimeout(t);
    for (const t of this.libraryTimers) this.timers.clearTimeout(t);
    this.libraryTimers.clear();
    for (const ac of this.pendingFetches) ac.abort();
    this.pendingTimers.clear();
    this.pendingFetches.clear();
    this.pendingWork.clear();
    this.pendingCalls.clear();
    this.idleWaiters = [];
  }
}

module.exports = { RunState };
