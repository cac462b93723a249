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

class RunState {
  constructor(msg, post, hostTimers) {
    this.runId = msg.runId;
    this.cid = msg.cid;
    this.limits = msg.limits;
    this.fetchAllowHosts = msg.fetchAllowHosts; // null = fetch disabled
    this.post = post;
    this.timers = hostTimers;
    this.ended = false;
    this.fatal = null;
    this.response = undefined;
    this.responseSet = false;
    this.logBytes = 0;
    this.logTruncated = false;
    this.fetches = 0;
    this.nextCallId = 1;
    this.pendingCalls = new Map(); // callId -> {resolve, reject}
    this.pendingTimers = new Set();
    this.pendingFetches = new Set(); // AbortControllers
    this.idleWaiters = [];
  }

  pendingCount() {
    return this.pendingCalls.size + this.pendingTimers.size + this.pendingFetches.size;
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

  /** Record a limit violation: it ends the run with this code even if the action catches the error. */
  fail(code, message) {
    if (this.fatal === null) this.fatal = { code, message };
    return platformError(code, message);
  }

  assertLive() {
    if (this.fatal !== null)
      throw platformError(this.fatal.code, "the run already failed: " + this.fatal.message);
  }

  /** Send a key operation to the enclave side; resolves with its answer. */
  keyOp(op, args) {
    this.assertLive();
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
      call.reject(e);
    }
    this.noteSettled();
  }

  /** Ends the run: nothing it started may call back into the action afterwards. */
  end() {
    this.ended = true;
    for (const t of this.pendingTimers) this.timers.clearTimeout(t);
    for (const ac of this.pendingFetches) ac.abort();
    this.pendingTimers.clear();
    this.pendingFetches.clear();
    this.pendingCalls.clear();
    this.idleWaiters = [];
  }
}

module.exports = { RunState };
