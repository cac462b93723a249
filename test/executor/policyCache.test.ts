/**
 * Policy documents shared by CID (docs/policies.md, "What it costs"): the relayer parses a stored
 * document once and keeps it frozen; the main thread sends a worker each CID's document once
 * (enclave/executor/policy-handover.ts) and afterwards the CID alone, which the worker resolves from
 * what it holds (worker/policy-cache.js). These tests hold the guarantees the caches must keep: every
 * run is still decided by its group's policy as it is when the run starts (a changed policy reaches the
 * next run), a shared document cannot be changed by whoever holds it, and a CID the worker does not
 * hold never reads as "no policy". Real enclave keys, real worker pool, real content store.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { ContentStore } from "../../enclave";
import { MAX_SENT, SentPolicies } from "../../enclave/executor/policy-handover";
import { PolicyGate } from "../../enclave/executor/policy-gate";
import {
  deepFreeze,
  allowingGrant,
  evaluateGrants,
  evaluatePolicy,
  type GroupPolicy,
  type Policy,
} from "../../enclave/policy";
import type { PinnedCode } from "../../relayer/pinnedCode";
import { loadPolicy, policyBytes } from "../../relayer/policyDocuments";
import { expectOk, makeKeys, pkpIds, useExecutor } from "./helpers";
const { resolvePolicies, UNRESOLVED } = require("../../enclave/executor/worker/policy-cache");
const { makeRunKey } = require("../../enclave/executor/worker/run-key");
const { carryDecisions } = require("../../enclave/executor/worker/policy-decisions");

const LOGIN: Policy = {
  version: 1,
  rules: [
    { name: "login", effect: "allow", operation: "message", prefix: "login:" },
    { name: "no-digests", effect: "deny", operation: "digest" },
  ],
};
const PAY: Policy = {
  version: 1,
  rules: [{ name: "pay", effect: "allow", operation: "message", prefix: "pay:" }],
};

/** Signs each message in turn: the signature's type, or the refusal's code. */
const SIGN_ALL = `
  const out = [];
  for (const m of params.messages) {
    try { out.push(typeof (await Actions.signMessage({ pkpId: params.pkpId, message: m }))); }
    catch (e) { out.push(e.code); }
  }
  return out;`;

describe("signing policies: documents shared by CID", function () {
  this.timeout(300_000);

  describe("what the main thread sends a worker (policy-handover.ts)", () => {
    it("a document once, then its CID alone; a grant without a CID whole every time", () => {
      const sent = new SentPolicies();
      const login = deepFreeze(structuredClone(LOGIN));
      const grants: GroupPolicy[] = [
        { group: "1", policy: login, cid: "cidA" },
        { group: "2", policy: null },
        { group: "3", policy: PAY },
      ];
      expect(sent.wire(grants)).to.deep.equal({
        policies: [
          { group: "1", policy: login, cid: "cidA" },
          { group: "2", policy: null },
          { group: "3", policy: PAY },
        ],
        forgetPolicies: false,
      });
      expect(sent.wire(grants).policies).to.deep.equal([
        { group: "1", cid: "cidA" },
        { group: "2", policy: null },
        { group: "3", policy: PAY },
      ]);
      // Two groups naming the same CID in one run: the document goes once, with the first.
      expect(
        sent.wire([
          { group: "4", policy: PAY, cid: "cidB" },
          { group: "5", policy: PAY, cid: "cidB" },
        ]).policies,
      ).to.deep.equal([
        { group: "4", policy: PAY, cid: "cidB" },
        { group: "5", cid: "cidB" },
      ]);
      expect(sent.wire(null)).to.deep.equal({ policies: null, forgetPolicies: false });
    });

    it("past its bound it starts over: the worker is told to forget, and documents are sent again", () => {
      const sent = new SentPolicies();
      for (let i = 0; i < MAX_SENT; i++)
        expect(sent.wire([{ group: "1", policy: PAY, cid: `cid${i}` }]).forgetPolicies).to.equal(false);
      const over = sent.wire([{ group: "1", policy: PAY, cid: "one-more" }]);
      expect(over).to.deep.equal({
        policies: [{ group: "1", policy: PAY, cid: "one-more" }],
        forgetPolicies: true,
      });
      expect(sent.wire([{ group: "1", policy: PAY, cid: "cid0" }]).policies).to.deep.equal([
        { group: "1", policy: PAY, cid: "cid0" },
      ]);
    });
  });

  describe("what the worker holds (worker/policy-cache.js)", () => {
    it("resolves a CID to the one frozen copy it was sent, shared by every run naming it", () => {
      const first = resolvePolicies([{ group: "1", policy: structuredClone(LOGIN), cid: "cidW" }], false);
      const later = resolvePolicies([{ group: "2", cid: "cidW" }], false);
      expect(later[0].policy).to.equal(first[0].policy);
      expect(later[0].policy).to.deep.equal(LOGIN);
      const shared = later[0].policy as Policy;
      expect(
        Object.isFrozen(shared) && Object.isFrozen(shared.rules) && Object.isFrozen(shared.rules[0]),
      ).to.equal(true);
      expect(() => {
        (shared.rules[0] as { prefix?: string }).prefix = "";
      }).to.throw(TypeError);
      expect(() => (shared.rules as unknown[]).push({})).to.throw(TypeError);
    });

    it("a CID it does not hold (or was told to forget) is not 'no policy': the run key is refused", () => {
      resolvePolicies([{ group: "1", policy: structuredClone(PAY), cid: "cidF" }], false);
      expect(resolvePolicies([{ group: "1", cid: "cidF" }], true)).to.equal(UNRESOLVED);
      expect(resolvePolicies([{ group: "1", cid: "never-sent" }], false)).to.equal(UNRESOLVED);
      expect(resolvePolicies([{ cid: "cidF" }], false)).to.equal(UNRESOLVED);
      expect(resolvePolicies(null, false)).to.equal(null);
      const key = new ArrayBuffer(32);
      new Uint8Array(key).fill(7);
      const epochs = new Int32Array(new SharedArrayBuffer(16));
      const grant = {
        pkpId: pkpIds().allowed,
        key,
        slot: 0,
        epoch: 0,
        notAfterMs: 1e15,
        policies: UNRESOLVED,
      };
      expect(makeRunKey(grant, epochs, { request: async () => null })).to.equal(null);
      expect(new Uint8Array(key).every((b) => b === 0)).to.equal(true);
    });
  });

  describe("what the worker sends back (worker/policy-decisions.js)", () => {
    it("a decision travels as [group, rule, operation, digest] and is rebuilt equal to the engine's", () => {
      const sent: Array<Record<string, unknown>> = [];
      const carrier = carryDecisions((m: Record<string, unknown>) => sent.push(m));
      const pkp = "0x" + "ab".repeat(32);
      const digest = "0x" + "cd".repeat(32);
      const bytes = Buffer.from("login:1");
      const grants = [
        { group: "3", policy: PAY },
        { group: "7", policy: LOGIN },
      ];
      const message = { kind: "message" as const, digest, bytes };
      const raw = { kind: "digest" as const, digest };
      const noPolicy = [{ group: "9", policy: null }];
      const byRule = evaluateGrants(grants, message);
      const byNoPolicy = evaluateGrants(noPolicy, raw);
      // The worker notes which grant allowed it (allowingGrant) with the operation's facts.
      carrier.note(allowingGrant(grants, message), message);
      carrier.note(allowingGrant(noPolicy, raw), raw);
      carrier.post({ type: "log" });
      carrier.post({ type: "done" });
      // Both ride on the next message, none on the one after.
      expect(sent[0].decisions).to.have.length(2);
      expect(sent[1]).to.not.have.property("decisions");
      const gate = new PolicyGate(() => null);
      for (const d of sent[0].decisions as unknown[]) gate.noteWorkerDecision(d, pkp);
      expect(gate.decisions).to.deep.equal([
        { ...byRule, pkp },
        { ...byNoPolicy, pkp },
      ]);
      // What is not a decision (the worker also runs hostile code) is dropped.
      for (const bad of [null, "x", ["7", "login", "sign-anything", digest], ["7", 1, "message", digest], []])
        gate.noteWorkerDecision(bad, pkp);
      expect(gate.decisions).to.have.length(2);
    });
  });

  describe("what the engine derives from a document (evaluate.js)", () => {
    it("is kept for a frozen document only: a document that is not frozen is read afresh", () => {
      const op = { kind: "message" as const, digest: "0x" + "00".repeat(32), bytes: Buffer.from("pay:1") };
      const open: Policy = structuredClone(PAY);
      expect(evaluatePolicy(open, op).allowed).to.equal(true);
      (open.rules[0] as { prefix?: string }).prefix = "login:";
      expect(evaluatePolicy(open, op).allowed).to.equal(false);
      const frozen = deepFreeze(structuredClone(PAY));
      expect(evaluatePolicy(frozen, op).allowed).to.equal(true);
      expect(evaluatePolicy(frozen, { ...op, bytes: Buffer.from("login:1") })).to.include({
        allowed: false,
        rule: "pay",
        field: "prefix",
      });
    });
  });

  describe("the relayer's parsed documents (policyDocuments.ts)", () => {
    it("a stored document is parsed once per CID and shared frozen", async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-policy-cache-"));
      try {
        const store = new ContentStore(dir);
        const cid = await store.put(policyBytes(LOGIN));
        const ctx = { contentStore: store as unknown as PinnedCode, gateway: null };
        const a = await loadPolicy(ctx, cid);
        const b = await loadPolicy(ctx, cid);
        expect(a).to.equal(b);
        expect(a).to.deep.equal(LOGIN);
        expect(Object.isFrozen(a) && Object.isFrozen(a!.rules[0])).to.equal(true);
        expect(() => {
          (a!.rules as unknown[]).length = 0;
        }).to.throw(TypeError);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe("in the executor", () => {
    const keys = makeKeys();
    const { allowed: PKP } = pkpIds();
    const { run } = useExecutor(keys, { poolSize: 2 });

    /** One run under `grants` with the run's PKP handed over; how often the gate asked for policies. */
    const runUnder = async (grants: GroupPolicy[], messages: string[]) => {
      let asked = 0;
      const r = await run(SIGN_ALL, {
        jsParams: { pkpId: PKP, messages },
        runPkp: { ref: PKP, scope: 1 },
        policiesFor: () => {
          asked++;
          return grants;
        },
      });
      return { out: expectOk(r), asked, decisions: r.policy_decisions ?? [] };
    };

    it("runs of one CID after the first are decided in the worker from the document it holds", async () => {
      const login = deepFreeze(structuredClone(LOGIN));
      // More runs than workers: every worker gets the document once and the CID alone afterwards.
      for (let i = 0; i < 6; i++) {
        const { out, asked, decisions } = await runUnder(
          [{ group: "7", policy: login, cid: "cid-login" }],
          ["login:a", "login:b"],
        );
        expect(out).to.deep.equal(["string", "string"]);
        // Asked once, at hand-over: both signatures were the worker's (a CID it could not resolve
        // would have kept the key on the main thread, and the gate would have been asked per signature).
        expect(asked, `run ${i}`).to.equal(1);
        expect(decisions.map((d) => [d.allowed, d.rule, d.group])).to.deep.equal([
          [true, "login", "7"],
          [true, "login", "7"],
        ]);
      }
    });

    it("a group's changed policy is the one the next run is checked against", async () => {
      const login = deepFreeze(structuredClone(LOGIN));
      const pay = deepFreeze(structuredClone(PAY));
      const messages = ["login:a", "pay:b"];
      const underLogin = await runUnder([{ group: "7", policy: login, cid: "cid-login" }], messages);
      expect(underLogin.out).to.deep.equal(["string", "policy_denied"]);
      const underPay = await runUnder([{ group: "7", policy: pay, cid: "cid-pay" }], messages);
      expect(underPay.out).to.deep.equal(["policy_denied", "string"]);
      // Back to the first CID (sent by CID alone now): decided by it again.
      const again = await runUnder([{ group: "7", policy: login, cid: "cid-login" }], messages);
      expect(again.out).to.deep.equal(["string", "policy_denied"]);
      // Cleared: no policy applies.
      const cleared = await runUnder([{ group: "7", policy: null }], messages);
      expect(cleared.out).to.deep.equal(["string", "string"]);
    });
  });
});
