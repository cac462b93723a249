/**
 * The policy engine: the schema, the parsing of what is signed, rule evaluation, and the two
 * properties the service's promise rests on (fast-check): no operation a matching deny rule covers is
 * ever allowed, and several granting groups are independent grants.
 */
import { expect } from "chai";
import fc from "fast-check";
import { AbiCoder, Transaction, TypedDataEncoder, Wallet, getAddress, hashMessage, id } from "ethers";
import {
  DEFAULT_DENY,
  NO_POLICY,
  allowingGrant,
  checkPolicy,
  deepFreeze,
  evaluateGrants,
  evaluatePolicy,
  parseDigest,
  parseMessage,
  parsePolicy,
  parseTransaction,
  parseTypedData,
  plainOperation,
  refusalMessage,
  ruleMatches,
  type OperationFacts,
  type Policy,
  type PolicyRule,
} from "../../enclave/policy";

const USDC = getAddress("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48");
const ALICE = getAddress("0x00000000000000000000000000000000000a11ce");
const BOB = getAddress("0x0000000000000000000000000000000000000b0b");
const MALLORY = getAddress("0x000000000000000000000000000000000000bad1");
const coder = AbiCoder.defaultAbiCoder();
const SEED = process.env.FC_SEED ? Number(process.env.FC_SEED) : 27;

function transferData(to: string, amount: bigint): string {
  return "0xa9059cbb" + coder.encode(["address", "uint256"], [to, amount]).slice(2);
}
function approveData(spender: string, amount: bigint): string {
  return "0x095ea7b3" + coder.encode(["address", "uint256"], [spender, amount]).slice(2);
}

/** The example: USDC transfers of at most 1,000 to two addresses on chain 1, nothing else. */
const USDC_ONLY: Policy = {
  version: 1,
  rules: [
    {
      name: "usdc-payouts",
      effect: "allow",
      operation: "transaction",
      chainIds: [1],
      value: { max: "0" },
      erc20: {
        token: USDC,
        methods: ["transfer"],
        recipients: { in: [ALICE, BOB] },
        amount: { max: "1000000000" },
      },
    },
  ],
};

const MONDAY_NOON = new Date("2026-11-23T12:00:00Z");

describe("signing policies: the engine", () => {
  describe("schema", () => {
    it("accepts the example policy and every operation kind", () => {
      expect(checkPolicy(USDC_ONLY).ok).to.equal(true);
      const all: Policy = {
        version: 1,
        rules: [
          { name: "a", effect: "allow", operation: "message", prefix: "Sign in" },
          { name: "b", effect: "deny", operation: "keyExport" },
          {
            name: "c",
            effect: "allow",
            operation: "digest",
            time: { days: [1, 2], hours: { from: 22, to: 6 } },
          },
          {
            name: "d",
            effect: "allow",
            operation: "typedData",
            primaryTypes: ["Permit"],
            permit: { token: USDC },
          },
          { name: "e", effect: "allow", operation: "encrypt" },
          { name: "f", effect: "allow", operation: "decrypt" },
        ],
      };
      expect(checkPolicy(all)).to.deep.equal({ ok: true, policy: all });
    });

    it("refuses unknown fields, conditions of another operation, duplicate names and empty ranges", () => {
      const bad = (doc: unknown) => {
        const r = checkPolicy(doc);
        expect(r.ok).to.equal(false);
        return (r as { errors: string[] }).errors.join("\n");
      };
      expect(
        bad({ version: 1, rules: [{ name: "x", effect: "allow", operation: "transaction", chainId: [1] }] }),
      ).to.match(/unknown field "chainId"|not a condition/);
      expect(
        bad({ version: 1, rules: [{ name: "x", effect: "allow", operation: "transaction", prefix: "a" }] }),
      ).to.match(/"prefix" is not a condition of this rule's operation/);
      expect(
        bad({
          version: 1,
          rules: [
            { name: "x", effect: "allow", operation: "encrypt" },
            { name: "x", effect: "allow", operation: "decrypt" },
          ],
        }),
      ).to.match(/used by an earlier rule/);
      expect(
        bad({
          version: 1,
          rules: [{ name: "x", effect: "allow", operation: "transaction", value: { min: "5", max: "4" } }],
        }),
      ).to.match(/min is above max/);
      expect(bad({ version: 2, rules: [] })).to.match(/version/);
      expect(bad({ version: 1, rules: [{ name: "x", effect: "allow", operation: "sign" }] })).to.match(
        /must be one of transaction/,
      );
      expect(parsePolicy("{").ok).to.equal(false);
      expect(parsePolicy(JSON.stringify(USDC_ONLY)).ok).to.equal(true);
    });
  });

  describe("parsing what is signed", () => {
    it("hashes legacy, EIP-2930 and EIP-1559 transactions as the signed transaction recovers", () => {
      const wallet = new Wallet("0x" + "11".repeat(32));
      const base = {
        chainId: 1,
        nonce: 3,
        gasLimit: 60000,
        to: USDC,
        value: 0,
        data: transferData(ALICE, 5n),
      };
      for (const fields of [
        { ...base, type: 0, gasPrice: 10n ** 9n },
        { ...base, type: 1, gasPrice: 10n ** 9n, accessList: [] },
        { ...base, type: 2, maxFeePerGas: 2n * 10n ** 9n, maxPriorityFeePerGas: 10n ** 9n },
      ]) {
        const facts = parseTransaction(fields);
        const sig = wallet.signingKey.sign(facts.digest);
        const signed = facts.tx.clone();
        signed.signature = sig;
        expect(Transaction.from(signed.serialized).from).to.equal(wallet.address);
        expect(facts.erc20).to.deep.equal({ method: "transfer", recipient: ALICE, amount: 5n });
        expect(facts.selector).to.equal("0xa9059cbb");
      }
    });

    it("refuses a transaction without a chain id, an unknown field or an unknown type", () => {
      expect(() => parseTransaction({ to: ALICE, value: 1 })).to.throw(/chainId/);
      expect(() => parseTransaction({ chainId: 1, to: ALICE, valu: 1 })).to.throw(
        /unknown transaction field "valu"/,
      );
      expect(() => parseTransaction({ chainId: 1, to: ALICE, type: 4 })).to.throw();
    });

    it("an ERC-20 call with trailing bytes or dirty address bits is not an ERC-20 call", () => {
      expect(parseTransaction({ chainId: 1, to: USDC, data: transferData(ALICE, 1n) + "00" }).erc20).to.equal(
        null,
      );
      const dirty = "0xa9059cbb" + "ff" + transferData(ALICE, 1n).slice(12);
      expect(parseTransaction({ chainId: 1, to: USDC, data: dirty }).erc20).to.equal(null);
    });

    it("typed data: the digest is EIP-712's, Permit and Permit2 allowances are read", () => {
      const domain = { name: "USD Coin", version: "2", chainId: 1, verifyingContract: USDC };
      const types = {
        Permit: [
          { name: "owner", type: "address" },
          { name: "spender", type: "address" },
          { name: "value", type: "uint256" },
          { name: "nonce", type: "uint256" },
          { name: "deadline", type: "uint256" },
        ],
      };
      const value = { owner: ALICE, spender: BOB, value: 7n, nonce: 0, deadline: 1 };
      const facts = parseTypedData(domain, types, value);
      expect(facts.digest).to.equal(TypedDataEncoder.hash(domain, types, value));
      expect(facts.permits).to.deep.equal([{ token: USDC, spender: BOB, amount: 7n }]);
      const p2 = parseTypedData(
        { name: "Permit2", chainId: 1, verifyingContract: MALLORY },
        {
          PermitSingle: [
            { name: "details", type: "PermitDetails" },
            { name: "spender", type: "address" },
            { name: "sigDeadline", type: "uint256" },
          ],
          PermitDetails: [
            { name: "token", type: "address" },
            { name: "amount", type: "uint160" },
            { name: "expiration", type: "uint48" },
            { name: "nonce", type: "uint48" },
          ],
        },
        { details: { token: USDC, amount: 9, expiration: 1, nonce: 0 }, spender: BOB, sigDeadline: 1 },
      );
      expect(p2.primaryType).to.equal("PermitSingle");
      expect(p2.permits).to.deep.equal([{ token: USDC, spender: BOB, amount: 9n }]);
    });

    it("messages and digests", () => {
      expect(parseMessage("hello").digest).to.equal(hashMessage("hello"));
      expect(parseDigest("0x" + "AB".repeat(32)).digest).to.equal("0x" + "ab".repeat(32));
      expect(() => parseDigest("0x12")).to.throw(/32 bytes/);
    });
  });

  describe("evaluation", () => {
    const tx = (fields: Record<string, unknown>) =>
      parseTransaction({ chainId: 1, to: USDC, value: 0, ...fields });

    it("the example policy: allows the payouts, refuses everything else and names the failing value", () => {
      const ok = evaluatePolicy(USDC_ONLY, tx({ data: transferData(ALICE, 1000n * 10n ** 6n) }));
      expect(ok).to.include({ allowed: true, rule: "usdc-payouts", operation: "transaction" });
      const tooMuch = evaluatePolicy(USDC_ONLY, tx({ data: transferData(ALICE, 1000n * 10n ** 6n + 1n) }));
      expect(tooMuch).to.include({
        allowed: false,
        rule: "usdc-payouts",
        field: "erc20.amount",
        value: "1000000001",
      });
      const stranger = evaluatePolicy(USDC_ONLY, tx({ data: transferData(MALLORY, 1n) }));
      expect(stranger).to.include({ allowed: false, field: "erc20.recipients", value: MALLORY });
      expect(evaluatePolicy(USDC_ONLY, tx({ data: approveData(ALICE, 1n) }))).to.include({
        allowed: false,
        field: "erc20.method",
        value: "approve",
      });
      expect(evaluatePolicy(USDC_ONLY, tx({ chainId: 10, data: transferData(ALICE, 1n) }))).to.include({
        allowed: false,
        field: "chainIds",
        value: "10",
      });
      expect(evaluatePolicy(USDC_ONLY, tx({ to: ALICE, value: 1 }))).to.include({
        allowed: false,
        field: "value",
      });
      expect(evaluatePolicy(USDC_ONLY, tx({ to: undefined, data: "0x00" }))).to.include({
        allowed: false,
        field: "contractCreation",
      });
      for (const kind of ["keyExport", "encrypt", "decrypt"] as const)
        expect(evaluatePolicy(USDC_ONLY, plainOperation(kind))).to.include({
          allowed: false,
          rule: DEFAULT_DENY,
        });
      expect(evaluatePolicy(USDC_ONLY, parseMessage("hi"))).to.include({
        allowed: false,
        rule: DEFAULT_DENY,
      });
      expect(refusalMessage({ ...stranger, group: "7" })).to.match(
        /^policy refused transaction: rule usdc-payouts \(group 7\): .*erc20.recipients = 0x/,
      );
    });

    it("deny wins over allow; time windows are UTC hours and days", () => {
      const p: Policy = {
        version: 1,
        rules: [
          { name: "any-message", effect: "allow", operation: "message" },
          { name: "no-night", effect: "deny", operation: "message", time: { hours: { from: 22, to: 6 } } },
          { name: "weekdays", effect: "allow", operation: "digest", time: { days: [1, 2, 3, 4, 5] } },
        ],
      };
      expect(evaluatePolicy(p, parseMessage("x"), MONDAY_NOON)).to.include({
        allowed: true,
        rule: "any-message",
      });
      expect(evaluatePolicy(p, parseMessage("x"), new Date("2026-11-23T23:30:00Z"))).to.include({
        allowed: false,
        rule: "no-night",
      });
      expect(evaluatePolicy(p, parseMessage("x"), new Date("2026-11-23T05:59:00Z"))).to.include({
        allowed: false,
      });
      const digest = parseDigest("0x" + "00".repeat(32));
      expect(evaluatePolicy(p, digest, MONDAY_NOON)).to.include({ allowed: true });
      expect(evaluatePolicy(p, digest, new Date("2026-11-22T12:00:00Z"))).to.include({
        allowed: false,
        field: "time.days",
        value: "Sunday",
      });
    });

    it("message prefixes, typed-data domains and permit limits", () => {
      const p: Policy = {
        version: 1,
        rules: [
          {
            name: "login",
            effect: "allow",
            operation: "message",
            prefix: "example.com wants you to sign in",
          },
          {
            name: "usdc-permits",
            effect: "allow",
            operation: "typedData",
            domain: { chainIds: [1], verifyingContracts: { in: [USDC] } },
            primaryTypes: ["Permit"],
            permit: { token: USDC, spenders: { in: [BOB] }, amount: { max: "100" } },
          },
        ],
      };
      expect(evaluatePolicy(p, parseMessage("example.com wants you to sign in with…"))).to.include({
        allowed: true,
      });
      expect(evaluatePolicy(p, parseMessage("transfer everything"))).to.include({
        allowed: false,
        field: "prefix",
      });
      const types = {
        Permit: [
          { name: "owner", type: "address" },
          { name: "spender", type: "address" },
          { name: "value", type: "uint256" },
        ],
      };
      const domain = { name: "USD Coin", chainId: 1, verifyingContract: USDC };
      expect(
        evaluatePolicy(p, parseTypedData(domain, types, { owner: ALICE, spender: BOB, value: 100 })),
      ).to.include({
        allowed: true,
      });
      expect(
        evaluatePolicy(p, parseTypedData(domain, types, { owner: ALICE, spender: BOB, value: 101 })),
      ).to.include({
        allowed: false,
        field: "permit.amount",
      });
      expect(
        evaluatePolicy(
          p,
          parseTypedData({ ...domain, chainId: 5 }, types, { owner: ALICE, spender: BOB, value: 1 }),
        ),
      ).to.include({
        allowed: false,
        field: "domain.chainIds",
      });
    });

    it("granting groups: one allowing group is enough; a group without a policy allows everything", () => {
      const msg = parseMessage("hi");
      const denyAll: Policy = {
        version: 1,
        rules: [{ name: "nothing", effect: "deny", operation: "message" }],
      };
      const allowMsg: Policy = {
        version: 1,
        rules: [{ name: "msgs", effect: "allow", operation: "message" }],
      };
      expect(evaluateGrants([{ group: "1", policy: denyAll }], msg)).to.include({
        allowed: false,
        group: "1",
      });
      expect(
        evaluateGrants(
          [
            { group: "1", policy: denyAll },
            { group: "2", policy: allowMsg },
          ],
          msg,
        ),
      ).to.include({
        allowed: true,
        group: "2",
        rule: "msgs",
      });
      expect(
        evaluateGrants(
          [
            { group: "1", policy: denyAll },
            { group: "3", policy: null },
          ],
          msg,
        ),
      ).to.include({
        allowed: true,
        rule: NO_POLICY,
      });
      expect(evaluateGrants([], msg)).to.include({ allowed: false });
    });
  });

  describe("properties", () => {
    const addresses = fc.constantFrom(USDC, ALICE, BOB, MALLORY);
    const addressSet = fc.oneof(
      fc.uniqueArray(addresses, { minLength: 1, maxLength: 3 }).map((a) => ({ in: a })),
      fc.uniqueArray(addresses, { minLength: 1, maxLength: 3 }).map((a) => ({ notIn: a })),
    );
    const amount = fc.bigInt({ min: 0n, max: 2000n });
    const range = fc
      .record({ min: amount, max: amount }, { requiredKeys: [] })
      .filter((r) => r.min === undefined || r.max === undefined || r.min <= r.max)
      .filter((r) => r.min !== undefined || r.max !== undefined)
      .map((r) => ({
        ...(r.min !== undefined ? { min: r.min.toString() } : {}),
        ...(r.max !== undefined ? { max: r.max.toString() } : {}),
      }));
    const time = fc
      .record(
        {
          days: fc.uniqueArray(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 7 }),
          hours: fc
            .record({ from: fc.integer({ min: 0, max: 23 }), to: fc.integer({ min: 1, max: 24 }) })
            .filter((h) => h.from !== h.to % 24 || h.to === 24),
        },
        { requiredKeys: [] },
      )
      .filter((t) => Object.keys(t).length > 0);
    const txRule = fc.record(
      {
        chainIds: fc.uniqueArray(fc.constantFrom(1, 10, 137), { minLength: 1, maxLength: 2 }),
        to: addressSet,
        contractCreation: fc.boolean(),
        value: range,
        selectors: fc.uniqueArray(fc.constantFrom("0x", "0xa9059cbb", "0x095ea7b3", "0xdeadbeef"), {
          minLength: 1,
          maxLength: 3,
        }),
        erc20: fc.record(
          {
            token: fc.constantFrom(USDC, MALLORY),
            methods: fc.uniqueArray(
              fc.constantFrom("transfer" as const, "approve" as const, "transferFrom" as const),
              {
                minLength: 1,
                maxLength: 3,
              },
            ),
            recipients: addressSet,
            amount: range,
          },
          { requiredKeys: ["token"] },
        ),
        time,
      },
      { requiredKeys: [] },
    );
    const messageRule = fc.record({ prefix: fc.constantFrom("a", "ab", "b"), time }, { requiredKeys: [] });
    const rule = fc
      .tuple(
        fc.constantFrom("allow" as const, "deny" as const),
        fc.oneof(
          txRule.map((c) => ({ operation: "transaction" as const, ...c })),
          messageRule.map((c) => ({ operation: "message" as const, ...c })),
          fc.constantFrom("keyExport" as const, "digest" as const).map((operation) => ({ operation })),
        ),
      )
      .map(([effect, body]) => ({ effect, ...body }));
    const policy = fc.array(rule, { minLength: 1, maxLength: 6 }).map((rules): Policy => ({
      version: 1,
      rules: rules.map((r, i) => ({ name: `r${i}`, ...r }) as PolicyRule),
    }));
    const data = fc.oneof(
      fc.constant("0x"),
      fc.tuple(addresses, amount).map(([a, n]) => transferData(a, n)),
      fc.tuple(addresses, amount).map(([a, n]) => approveData(a, n)),
      fc.constant("0xdeadbeef"),
    );
    const operation: fc.Arbitrary<OperationFacts> = fc.oneof(
      fc
        .record({
          chainId: fc.constantFrom(1, 10, 137),
          to: fc.option(addresses, { nil: undefined }),
          value: amount,
          data,
        })
        .map((f) => parseTransaction(f)),
      fc.constantFrom("a", "abc", "b", "").map((m) => parseMessage(m)),
      fc.constant(plainOperation("keyExport")),
      fc.constant(parseDigest(id("x"))),
    );
    const when = fc.date({ min: new Date("2026-01-01T00:00:00Z"), max: new Date("2026-12-31T00:00:00Z") });

    it("every generated policy passes the schema (the generators write valid documents)", () => {
      fc.assert(
        fc.property(policy, (p) => {
          const r = checkPolicy(p);
          if (!r.ok) throw new Error(r.errors.join("; "));
        }),
        { numRuns: 300, seed: SEED },
      );
    });

    it("no operation that a deny rule of the policy matches is ever allowed; an allow names a matching allow rule", () => {
      fc.assert(
        fc.property(policy, operation, when, (p, op, now) => {
          const d = evaluatePolicy(p, op, now);
          const matching = p.rules.filter((r) => r.operation === op.kind && ruleMatches(r, op, now).ok);
          if (matching.some((r) => r.effect === "deny")) expect(d.allowed).to.equal(false);
          if (d.allowed) {
            const r = p.rules.find((x) => x.name === d.rule)!;
            expect(r.effect).to.equal("allow");
            expect(matching).to.include(r);
          } else {
            // A refusal without a matching deny rule: no allow rule matched (default deny).
            if (!matching.some((r) => r.effect === "deny"))
              expect(matching.filter((r) => r.effect === "allow")).to.have.length(0);
          }
          expect(d.operation).to.equal(op.kind);
        }),
        { numRuns: 1000, seed: SEED },
      );
    });

    it("several granting groups: allowed exactly when one group has no policy or its policy allows", () => {
      const grants = fc
        .array(fc.option(policy, { nil: null }), { minLength: 1, maxLength: 4 })
        .map((ps) => ps.map((p, i) => ({ group: String(i + 1), policy: p })));
      fc.assert(
        fc.property(grants, operation, when, (gs, op, now) => {
          const d = evaluateGrants(gs, op, now);
          const expected = gs.some((g) => g.policy === null || evaluatePolicy(g.policy, op, now).allowed);
          expect(d.allowed).to.equal(expected);
          // Adding a group never takes an allowed operation away; one more group can only allow more.
          if (expected)
            expect(evaluateGrants([...gs, { group: "x", policy: gs[0].policy }], op, now).allowed).to.equal(
              true,
            );
        }),
        { numRuns: 500, seed: SEED },
      );
    });

    it("allowingGrant (the action worker's check, unworded) names the group and rule evaluateGrants allows by, and nothing when it refuses", () => {
      const grants = fc
        .tuple(fc.array(fc.option(policy, { nil: null }), { minLength: 1, maxLength: 4 }), fc.boolean())
        .map(([ps, frozen]) =>
          ps.map((p, i) => ({ group: String(i + 1), policy: p !== null && frozen ? deepFreeze(p) : p })),
        );
      fc.assert(
        fc.property(grants, operation, when, (gs, op, now) => {
          const d = evaluateGrants(gs, op, now);
          const by = allowingGrant(gs, op, now);
          expect(by).to.deep.equal(d.allowed ? { group: d.group, rule: d.rule } : null);
        }),
        { numRuns: 1000, seed: SEED },
      );
    });

    it("without an instant, the clock is read for time conditions (and only then)", () => {
      const today = new Date().getUTCDay();
      const notToday: Policy = {
        version: 1,
        rules: [
          { name: "other-day", effect: "allow", operation: "message", time: { days: [(today + 3) % 7] } },
        ],
      };
      const anyDay: Policy = {
        version: 1,
        rules: [{ name: "any", effect: "allow", operation: "message", prefix: "a" }],
      };
      const op = parseMessage("abc");
      expect(evaluateGrants([{ group: "1", policy: notToday }], op)).to.include({
        allowed: false,
        field: "time.days",
      });
      expect(allowingGrant([{ group: "1", policy: notToday }], op)).to.equal(null);
      // A policy without a time condition never constructs a Date.
      const RealDate = globalThis.Date;
      let constructed = 0;
      globalThis.Date = class extends RealDate {
        constructor(...args: ConstructorParameters<DateConstructor>) {
          super(...args);
          constructed++;
        }
      } as DateConstructor;
      try {
        expect(allowingGrant([{ group: "1", policy: deepFreeze(anyDay) }], op)).to.deep.equal({
          group: "1",
          rule: "any",
        });
        expect(evaluateGrants([{ group: "1", policy: anyDay }], op).allowed).to.equal(true);
        expect(constructed).to.equal(0);
        allowingGrant([{ group: "1", policy: notToday }], op);
        expect(constructed).to.equal(1);
      } finally {
        globalThis.Date = RealDate;
      }
    });
  });
});
