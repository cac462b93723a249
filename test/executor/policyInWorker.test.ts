/**
 * Signing policies checked in the action worker's trusted side (worker/run-key.js): when every policy
 * that applies to the run's own PKP is stateless, the key is handed to the worker with those policies
 * and the worker checks each message and digest signature itself with the enclave's engine. These
 * tests hold that path to the main thread's policy gate: it refuses exactly what the gate refuses (the
 * same run, once with the run's PKP handed over and once without, gives the same answers and the same
 * decisions), a policy changed mid-run applies to the next signature, and a policy that is not
 * stateless keeps the key on the enclave side. Real enclave keys, real worker pool, no mocks.
 */
import { expect } from "chai";
import fc from "fast-check";
import { type RunRequest } from "../../enclave/executor";
import type { GroupPolicy, Policy, PolicyRule } from "../../enclave/policy";
import { expectOk, makeKeys, pkpIds, useExecutor } from "./helpers";

/** Signs each operation in turn; each answer is the signature or the refusal's code and message. */
const SIGN_ALL = `
  const out = [];
  for (const o of params.ops) {
    try {
      out.push(o.kind === "digest"
        ? await Actions.signEcdsa({ pkpId: params.pkpId, digest: o.digest })
        : await Actions.signMessage({ pkpId: params.pkpId,
            message: o.bytes ? new Uint8Array(o.bytes) : o.text }));
    } catch (e) { out.push({ code: e.code, message: e.message }); }
  }
  return out;`;

type Op = { kind: "digest"; digest: string } | { kind: "message"; text?: string; bytes?: number[] };

const PREFIXES = ["login:", "pay:", "", "ü"];

const ruleArb: fc.Arbitrary<PolicyRule> = fc
  .record(
    {
      name: fc.constantFrom("r1", "r2", "r3"),
      effect: fc.constantFrom("allow" as const, "deny" as const),
      operation: fc.constantFrom("message" as const, "digest" as const, "keyExport" as const),
      prefix: fc.constantFrom(...PREFIXES),
      time: fc.record(
        {
          // Whole days and the hours of the whole day or none of it: the two paths read the clock a
          // moment apart, so a window that could close between them would make the property flaky.
          days: fc.constantFrom([0, 1, 2, 3, 4, 5, 6], [(new Date().getUTCDay() + 3) % 7]),
          hours: fc.constantFrom({ from: 0, to: 24 }),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ["name", "effect", "operation"] },
  )
  .map((r) => {
    // The schema allows a prefix on message rules only.
    if (r.operation !== "message") delete (r as Partial<PolicyRule>).prefix;
    return r as PolicyRule;
  });

const grantsArb: fc.Arbitrary<GroupPolicy[]> = fc.array(
  fc.record({
    group: fc.constantFrom("1", "2", "3"),
    policy: fc.option(
      fc.array(ruleArb, { minLength: 0, maxLength: 5 }).map((rules): Policy => ({ version: 1, rules })),
      { freq: 5, nil: null },
    ),
  }),
  { minLength: 1, maxLength: 3 },
);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc
    .uint8Array({ minLength: 32, maxLength: 32 })
    .map((b): Op => ({ kind: "digest", digest: "0x" + Buffer.from(b).toString("hex") })),
  fc
    .tuple(fc.constantFrom(...PREFIXES, "night:"), fc.string({ maxLength: 8 }))
    .map(([p, s]): Op => ({ kind: "message", text: p + s })),
  fc
    .tuple(fc.constantFrom(...PREFIXES), fc.uint8Array({ maxLength: 8 }))
    .map(([p, b]): Op => ({ kind: "message", bytes: [...Buffer.from(p, "utf8"), ...b] })),
);

describe("signing policies: checked in the worker's trusted side", function () {
  this.timeout(300_000);
  const keys = makeKeys();
  const { allowed: PKP, second } = pkpIds();
  const ex = useExecutor(keys, { poolSize: 2 });
  const { run } = ex;

  /** A run under `grants`, counting how often the policies were asked for (once per gate check). */
  const counted = async (code: string, grants: () => GroupPolicy[] | null, extra: Partial<RunRequest>) => {
    let asked = 0;
    const r = await run(code, {
      policiesFor: () => {
        asked++;
        return grants();
      },
      ...extra,
    });
    return { r, asked };
  };

  it("a stateless policy goes with the key: signatures cost no round trip, decisions are in the result", async () => {
    const policy: Policy = {
      version: 1,
      rules: [{ name: "login", effect: "allow", operation: "message", prefix: "login:" }],
    };
    const ops: Op[] = [
      { kind: "message", text: "login:1" },
      { kind: "message", text: "login:2" },
      { kind: "message", text: "login:3" },
    ];
    const { r, asked } = await counted(SIGN_ALL, () => [{ group: "7", policy }], {
      jsParams: { pkpId: PKP, ops },
      runPkp: { ref: PKP, scope: 1 },
    });
    const out = expectOk(r) as unknown[];
    expect(out.every((s) => typeof s === "string")).to.equal(true);
    // Asked once, when the key was handed over; never per signature.
    expect(asked).to.equal(1);
    expect(r.policy_decisions).to.have.length(3);
    for (const d of r.policy_decisions!)
      expect(d).to.include({ allowed: true, rule: "login", operation: "message", group: "7", pkp: PKP });
  });

  it("a policy with a condition the engine does not know statelessly keeps the key on the enclave side", async () => {
    // Stands for a window rule (counters shared across runs and instances): only the gate may decide.
    const stateful = {
      version: 1,
      rules: [{ name: "login", effect: "allow", operation: "message", window: { count: 10, seconds: 60 } }],
    } as unknown as Policy;
    const ops: Op[] = [
      { kind: "message", text: "login:1" },
      { kind: "message", text: "login:2" },
    ];
    const { r, asked } = await counted(SIGN_ALL, () => [{ group: "7", policy: stateful }], {
      jsParams: { pkpId: PKP, ops },
      runPkp: { ref: PKP, scope: 1 },
    });
    expectOk(r);
    // Once at hand-over (refused), then once per signature at the gate.
    expect(asked).to.equal(3);
    expect(r.policy_decisions).to.have.length(2);
  });

  it("property: the worker-side path refuses exactly what the main thread's gate refuses, with the same decisions", async () => {
    await fc.assert(
      fc.asyncProperty(grantsArb, fc.array(opArb, { minLength: 1, maxLength: 4 }), async (grants, ops) => {
        const jsParams = { pkpId: PKP, ops };
        const inWorker = await counted(SIGN_ALL, () => grants, { jsParams, runPkp: { ref: PKP, scope: 1 } });
        const atGate = await counted(SIGN_ALL, () => grants, { jsParams });
        // Same signatures (deterministic ECDSA) and same refusals, in the same order.
        expect(expectOk(inWorker.r)).to.deep.equal(expectOk(atGate.r));
        expect(inWorker.r.policy_decisions).to.deep.equal(atGate.r.policy_decisions);
        // The gate asked for the policies at every operation; the worker path only at hand-over and
        // for what the worker did not sign itself (refusals, which the gate words).
        const refused = (atGate.r.policy_decisions ?? []).filter((d) => !d.allowed).length;
        expect(inWorker.asked).to.equal(1 + refused);
      }),
      { numRuns: 30, seed: 2727 },
    );
  });

  it("a policy changed during the run applies to the run's next signature on the worker-side path", async () => {
    const allowAll: Policy = {
      version: 1,
      rules: [
        { name: "any-message", effect: "allow", operation: "message" },
        { name: "any-digest", effect: "allow", operation: "digest" },
      ],
    };
    const noMessages: Policy = {
      version: 1,
      rules: [{ name: "digests-only", effect: "allow", operation: "digest" }],
    };
    let current: GroupPolicy[] = [{ group: "7", policy: allowAll }];
    const { r, asked } = await counted(
      `const first = await Actions.signMessage({ pkpId: params.pkpId, message: "a" });
       await Actions.getPublicKey({ pkpId: params.second });
       let second;
       try { second = await Actions.signMessage({ pkpId: params.pkpId, message: "b" }); }
       catch (e) { second = e.code; }
       return { first: typeof first, second };`,
      () => current,
      {
        jsParams: { pkpId: PKP, second },
        runPkp: { ref: PKP, scope: 1 },
        // The relayer's side of a change: the new policy is in its cache, and the account's run keys
        // (and the policies handed over with them) are invalidated, as for any permission change.
        authorizePkp: async (ref: string) => {
          if (ref === second) {
            current = [{ group: "7", policy: noMessages }];
            ex.executor.invalidateRunKeys(1);
          }
          return ref;
        },
      },
    );
    expect(expectOk(r)).to.deep.equal({ first: "string", second: "policy_denied" });
    // The first signature was the worker's (asked once, at hand-over); the second the gate's.
    expect(asked).to.equal(2);
    expect(r.policy_decisions!.map((d) => [d.allowed, d.rule])).to.deep.equal([
      [true, "any-message"],
      [false, "(default deny)"],
    ]);
  });

  it("a decision made in the worker reaches the main thread before anything that could carry its signature out", async () => {
    const policy: Policy = {
      version: 1,
      rules: [{ name: "login", effect: "allow", operation: "message", prefix: "login:" }],
    };
    // The signature goes out in a log line, then the run never ends: it is killed at its time limit.
    // Its decision rode on the log line (worker/policy-decisions.js): the killed run still has it.
    const { r } = await counted(
      `const s = await Actions.signMessage({ pkpId: params.pkpId, message: "login:1" });
       console.log(s);
       for (;;) {}`,
      () => [{ group: "7", policy }],
      { jsParams: { pkpId: PKP }, runPkp: { ref: PKP, scope: 1 }, limits: { wallTimeMs: 500 } },
    );
    expect(r.has_error).to.equal(true);
    expect(r.logs).to.match(/^0x[0-9a-f]{130}/);
    expect(r.policy_decisions).to.have.length(1);
    expect(r.policy_decisions![0]).to.include({
      allowed: true,
      rule: "login",
      operation: "message",
      group: "7",
    });
    // The worker was replaced: the next run signs and decides as before.
    const { r: next } = await counted(SIGN_ALL, () => [{ group: "7", policy }], {
      jsParams: { pkpId: PKP, ops: [{ kind: "message", text: "login:2" }] },
      runPkp: { ref: PKP, scope: 1 },
    });
    expectOk(next);
    expect(next.policy_decisions).to.have.length(1);
  });
});
