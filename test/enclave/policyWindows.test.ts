/**
 * Policy windows in the engine: the schema of the `window` condition, which counter and amount an
 * allowed operation claims (per PKP, group, rule, chain and token), the rolling-period arithmetic
 * (fast-check against a model that re-counts every period from scratch), and the gate: a full window
 * refuses with `policy_denied` naming the rule and the count or total, and a use is given back when
 * the signature is not produced.
 */
import { expect } from "chai";
import fc from "fast-check";
import { AbiCoder, getAddress } from "ethers";
import {
  checkPolicy,
  evaluateGrants,
  hasWindowRule,
  parseMessage,
  parseTransaction,
  parseTypedData,
  windowClaim,
  windowExcess,
  type GroupPolicy,
  type Policy,
  type WindowClaim,
  type WindowUse,
} from "../../enclave/policy";
import { PolicyGate } from "../../enclave/executor/policy-gate";
import type { PolicyWindowCounters } from "../../enclave/executor/policy-windows";

const USDC = getAddress("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48");
const DAI = getAddress("0x6b175474e89094c44da98b954eedeac495271d0f");
const ALICE = getAddress("0x00000000000000000000000000000000000a11ce");
const PKP = "0x" + "ab".repeat(32);
const SEED = process.env.FC_SEED ? Number(process.env.FC_SEED) : 27;
const coder = AbiCoder.defaultAbiCoder();
const transfer = (to: string, n: bigint) =>
  "0xa9059cbb" + coder.encode(["address", "uint256"], [to, n]).slice(2);
const tx = (fields: Record<string, unknown>) =>
  parseTransaction({ nonce: 0, gasLimit: 60000, gasPrice: 1, ...fields });

const WINDOWED: Policy = {
  version: 1,
  rules: [
    {
      name: "usdc-daily",
      effect: "allow",
      operation: "transaction",
      erc20: { token: USDC, methods: ["transfer"] },
      window: { seconds: 86400, maxValue: "1000" },
    },
    {
      name: "eth-hourly",
      effect: "allow",
      operation: "transaction",
      to: { in: [ALICE] },
      window: { seconds: 3600, maxCount: 3, maxValue: "100" },
    },
    { name: "login", effect: "allow", operation: "message", window: { seconds: 60, maxCount: 2 } },
    {
      name: "permits",
      effect: "allow",
      operation: "typedData",
      permit: { token: DAI },
      window: { seconds: 60, maxValue: "10" },
    },
    { name: "no-window", effect: "allow", operation: "digest" },
  ],
};
const GRANTS: GroupPolicy[] = [{ group: "7", policy: WINDOWED }];

function claimOf(op: ReturnType<typeof tx> | ReturnType<typeof parseMessage>): WindowClaim | null {
  return windowClaim(GRANTS, evaluateGrants(GRANTS, op), op, PKP);
}

describe("policy windows: the engine", () => {
  describe("the schema", () => {
    it("accepts windows on allow rules of signing operations", () => {
      expect(checkPolicy(WINDOWED)).to.deep.include({ ok: true });
    });

    it("refuses a window without a bound, with unknown fields, out of range, on a deny rule, or a value where nothing has one", () => {
      const bad = (rule: Record<string, unknown>) =>
        checkPolicy({
          version: 1,
          rules: [{ name: "r", effect: "allow", operation: "transaction", ...rule }],
        });
      for (const window of [
        { seconds: 60 },
        { seconds: 60, maxCount: 1, per: "pkp" },
        { seconds: 0, maxCount: 1 },
        { seconds: 366 * 86400 + 1, maxCount: 1 },
        { seconds: 60, maxCount: 0 },
        { seconds: 60, maxCount: 10_001 },
        { seconds: 60, maxValue: "-1" },
        { seconds: 1.5, maxCount: 1 },
      ]) {
        const r = bad({ window });
        expect(r.ok, JSON.stringify(window)).to.equal(false);
      }
      expect(bad({ window: { seconds: 60 } })).to.deep.equal({
        ok: false,
        errors: ["/rules/0/window: a window needs maxCount, maxValue or both"],
      });
      const deny = bad({ effect: "deny", window: { seconds: 60, maxCount: 1 } });
      expect(deny).to.deep.equal({
        ok: false,
        errors: ["/rules/0/window: only an allow rule can have a window (it bounds what the rule allows)"],
      });
      const msg = checkPolicy({
        version: 1,
        rules: [{ name: "m", effect: "allow", operation: "message", window: { seconds: 60, maxValue: "1" } }],
      });
      expect(msg.ok).to.equal(false);
      expect((msg as { errors: string[] }).errors[0]).to.match(/^\/rules\/0\/window\/maxValue: /);
      const exportWindow = checkPolicy({
        version: 1,
        rules: [{ name: "k", effect: "allow", operation: "keyExport", window: { seconds: 60, maxCount: 1 } }],
      });
      expect((exportWindow as { errors: string[] }).errors).to.include(
        '/rules/0: "window" is not a condition of this rule\'s operation',
      );
    });
  });

  describe("claims: which counter, which amount", () => {
    it("an ERC-20 rule counts the token's amount per chain; another transaction rule counts wei per chain", () => {
      const usdc1 = claimOf(tx({ chainId: 1, to: USDC, data: transfer(ALICE, 250n), value: 5n }))!;
      expect(usdc1).to.deep.include({
        rule: "usdc-daily",
        group: "7",
        amount: 250n,
        maxValue: 1000n,
        maxCount: 10_000,
        periodMs: 86_400_000,
        key: `${PKP}:7:usdc-daily:1:${USDC.toLowerCase()}`,
      });
      const usdc10 = claimOf(tx({ chainId: 10, to: USDC, data: transfer(ALICE, 1n) }))!;
      expect(usdc10.key).to.not.equal(usdc1.key);
      const eth = claimOf(tx({ chainId: 1, to: ALICE, value: 40n }))!;
      expect(eth).to.deep.include({ rule: "eth-hourly", amount: 40n, maxCount: 3, maxValue: 100n });
      expect(eth.key).to.equal(`${PKP}:7:eth-hourly:1:native`);
      expect(eth.unit).to.equal("wei on chain 1");
    });

    it("a permit rule counts the permitted amounts of its token; messages count signatures only", () => {
      const permit = parseTypedData(
        { name: "Dai", chainId: 1, verifyingContract: DAI },
        {
          Permit: [
            { name: "owner", type: "address" },
            { name: "spender", type: "address" },
            { name: "value", type: "uint256" },
            { name: "nonce", type: "uint256" },
            { name: "deadline", type: "uint256" },
          ],
        },
        { owner: ALICE, spender: ALICE, value: 7, nonce: 0, deadline: 1 },
      );
      const c = windowClaim(GRANTS, evaluateGrants(GRANTS, permit), permit, PKP)!;
      expect(c).to.deep.include({
        rule: "permits",
        amount: 7n,
        key: `${PKP}:7:permits:1:${DAI.toLowerCase()}`,
      });
      const m = claimOf(parseMessage("hello"))!;
      expect(m).to.deep.include({ rule: "login", amount: 0n, maxCount: 2, maxValue: null });
    });

    it("no claim for a rule without a window, a refusal, or a group without a policy", () => {
      const digest = { kind: "digest" as const, digest: "0x" + "11".repeat(32) };
      expect(windowClaim(GRANTS, evaluateGrants(GRANTS, digest), digest, PKP)).to.equal(null);
      const refused = tx({ chainId: 1, to: DAI, value: 1n });
      expect(evaluateGrants(GRANTS, refused).allowed).to.equal(false);
      expect(windowClaim(GRANTS, evaluateGrants(GRANTS, refused), refused, PKP)).to.equal(null);
      const open: GroupPolicy[] = [{ group: "8", policy: null }, ...GRANTS];
      const op = tx({ chainId: 1, to: ALICE, value: 1n });
      expect(windowClaim(open, evaluateGrants(open, op), op, PKP)).to.equal(null);
      expect(hasWindowRule(GRANTS)).to.equal(true);
      expect(
        hasWindowRule([{ group: "1", policy: { version: 1, rules: WINDOWED.rules.slice(4) } }]),
      ).to.equal(false);
      expect(hasWindowRule(null)).to.equal(false);
    });
  });

  describe("the rolling-period arithmetic", () => {
    const claim = (amount: bigint, maxCount: number, maxValue: bigint | null): WindowClaim => ({
      key: "k",
      rule: "r",
      group: "1",
      periodMs: 1000,
      maxCount,
      maxValue,
      amount,
      unit: "wei on chain 1",
    });

    it("names the bound and the count or total the use would reach", () => {
      const uses: WindowUse[] = [
        { id: "a", atMs: 100, amount: 60n },
        { id: "b", atMs: 900, amount: 30n },
      ];
      expect(windowExcess(claim(10n, 3, 100n), uses, 1000)).to.equal(null);
      expect(windowExcess(claim(11n, 3, 100n), uses, 1000)).to.include({
        field: "window.maxValue",
        value: "101",
      });
      expect(windowExcess(claim(0n, 2, null), uses, 1000)).to.include({
        field: "window.maxCount",
        value: "3",
      });
      // The use taken at 100 leaves the period at 1100 exactly.
      expect(windowExcess(claim(0n, 2, null), uses, 1100)).to.equal(null);
      expect(windowExcess(claim(71n, 3, 100n), uses, 1100)).to.include({ value: "101" });
    });

    it("admits exactly what a model re-counting every period admits, and no period ever exceeds a bound", () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.bigInt({ min: 0n, max: 50n })), {
            maxLength: 60,
          }),
          fc.integer({ min: 1, max: 6 }),
          fc.option(fc.bigInt({ min: 0n, max: 150n }), { nil: null }),
          (steps, maxCount, maxValue) => {
            let now = 0;
            const uses: WindowUse[] = [];
            steps.forEach(([dt, amount], i) => {
              now += dt;
              const c = claim(amount, maxCount, maxValue);
              const admitted = windowExcess(c, uses, now) === null;
              // The model: every use taken in (now - period, now], counted from scratch.
              const inPeriod = uses.filter((u) => now - u.atMs < 1000);
              const model =
                inPeriod.length < maxCount &&
                (maxValue === null || inPeriod.reduce((t, u) => t + u.amount, 0n) + amount <= maxValue);
              expect(admitted).to.equal(model);
              if (admitted) uses.push({ id: String(i), atMs: now, amount });
            });
            // Whatever period is looked at, the uses inside it respect both bounds.
            for (const u of uses) {
              const inside = uses.filter((v) => v.atMs >= u.atMs && v.atMs < u.atMs + 1000);
              expect(inside.length).to.be.at.most(maxCount);
              if (maxValue !== null)
                expect(inside.reduce((t, v) => t + v.amount, 0n) <= maxValue).to.equal(true);
            }
          },
        ),
        { seed: SEED, numRuns: 300 },
      );
    });
  });

  describe("the gate", () => {
    /** Counters in memory with the engine's arithmetic (the shared store is tested in test/policy/). */
    function memoryCounters(nowMs: () => number) {
      const rows = new Map<string, WindowUse[]>();
      let n = 0;
      const counters: PolicyWindowCounters = {
        async reserve(c) {
          const uses = rows.get(c.key) ?? [];
          const excess = windowExcess(c, uses, nowMs());
          if (excess !== null) return { excess };
          const id = String(++n);
          rows.set(c.key, [...uses, { id, atMs: nowMs(), amount: c.amount }]);
          return {
            release: async () =>
              void rows.set(
                c.key,
                (rows.get(c.key) ?? []).filter((u) => u.id !== id),
              ),
          };
        },
      };
      return { counters, rows };
    }
    const message = parseMessage("login: 1");

    it("a full window refuses with policy_denied naming the rule and the count; other windows are apart", async () => {
      const { counters } = memoryCounters(() => 0);
      const gate = new PolicyGate(() => GRANTS, undefined, counters);
      await gate.check(PKP, message);
      await gate.check(PKP, message);
      const refusal = await gate.check(PKP, message).then(
        () => null,
        (e) => e,
      );
      expect(refusal.code).to.equal("policy_denied");
      expect(refusal.message).to.contain("rule login (group 7)").and.contain("window.maxCount = 3");
      expect(gate.decisions.at(-1)).to.deep.include({
        allowed: false,
        rule: "login",
        field: "window.maxCount",
      });
      // Another PKP has its own window.
      await gate.check("0x" + "cd".repeat(32), message);
      // The total: 250 + 800 > 1000 USDC units.
      await gate.check(PKP, tx({ chainId: 1, to: USDC, data: transfer(ALICE, 250n) }));
      const over = await gate
        .check(PKP, tx({ chainId: 1, to: USDC, data: transfer(ALICE, 800n) }))
        .catch((e) => e);
      expect(over.message).to.contain("rule usdc-daily").and.contain("window.maxValue = 1050");
    });

    it("a use whose signature is not produced is given back; without counters a window allows nothing", async () => {
      const { counters, rows } = memoryCounters(() => 0);
      const gate = new PolicyGate(() => GRANTS, undefined, counters);
      const release = await gate.check(PKP, message);
      expect(rows.get(`${PKP}:7:login:any:none`)).to.have.length(1);
      await release();
      expect(rows.get(`${PKP}:7:login:any:none`)).to.have.length(0);
      const uncounted = new PolicyGate(() => GRANTS);
      const e = await uncounted.check(PKP, message).catch((err) => err);
      expect(e.code).to.equal("policy_denied");
      expect(e.message).to.contain("counters are not available");
      // A rule without a window needs no counters.
      await uncounted.check(PKP, { kind: "digest", digest: "0x" + "11".repeat(32) });
    });
  });
});
