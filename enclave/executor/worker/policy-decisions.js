"use strict";
/**
 * The policy decisions of the signatures this worker makes itself under stateless policies
 * (run-key.js), on their way to the main thread, which joins them to the run's (`policy_decisions`,
 * the audit log). A decision is not a message of its own: it rides on the run's next message to the
 * main thread, whatever that is (a key operation forwarded to the enclave side, a log line, a fetch,
 * the run's end), as `decisions`, and the main thread notes it before acting on that message
 * (pool.ts). A message of its own cost the main thread a dispatch per signature (10 to 27 µs), more
 * than everything else a policy adds (docs/policies.md, "What it costs").
 *
 * Why that is as good: a signature leaves the worker only inside one of those messages (the run's
 * answer, a log line, a key operation's arguments) or through fetch, which posts its message before
 * any byte goes out. So a decision reaches the main thread before, or with, anything that could carry
 * its signature out of the worker, and in order with the decisions of the enclave side's gate
 * (messages between two threads keep their order). A run killed before its worker says anything more
 * loses the decisions of the signatures it still held, which never left the worker.
 *
 * One per run, on the worker's trusted side: action code never reaches it.
 */
function carryDecisions(post) {
  let pending = null;
  return {
    /**
     * The decision to allow a signature made here: the group and rule that allowed it (evaluate.js,
     * allowingGrant) and the operation's facts. It goes with the next message posted, as what names
     * it, [group, rule, operation, digest]: the main thread rebuilds the rest with the same engine
     * (evaluate.js, allowedDecision), and copies four strings instead of seven fields.
     */
    note(allowedBy, facts) {
      (pending ??= []).push([allowedBy.group, allowedBy.rule, facts.kind, facts.digest]);
    },
    /** Posts `m` (a fresh object), with the decisions not yet sent. */
    post(m) {
      if (pending !== null) {
        m.decisions = pending;
        pending = null;
      }
      post(m);
    },
  };
}

module.exports = { carryDecisions };
