/**
 * Policy rules for Ed25519 (Solana) and Schnorr (Bitcoin Taproot) signatures (docs/policies.md): the
 * schema admits them only on their own operation, the engine reads the facts the enclave parsed from
 * real messages and PSBTs (built with @solana/kit and bitcoinjs-lib), deny wins, a message or digest the
 * rule cannot read never matches it, and a refusal names the rule and the value. Properties over random
 * transfers, then the same rules enforced in the executor.
 */
import { expect } from "chai";
import fc from "fast-check";
import { ethers } from "ethers";
import { ed25519 } from "@noble/curves/ed25519";
import {
  Enclave,
  checkPolicy,
  evaluatePolicy,
  parseEd25519,
  parseSchnorrDigest,
  parseSolanaMessage,
  parseTaprootInput,
  type GroupPolicy,
  type Policy,
} from "../../enclave";
import { expectOk, makeKeys, pkpIds, useExecutor } from "../executor/helpers";
import {
  MEMO_PROGRAM,
  SYSTEM_PROGRAM,
  p2trScript,
  solanaTransferMessage,
  taprootPsbt,
  verifyTaprootSpend,
} from "../executor/chainFixtures";

const keys = makeKeys() as Enclave;
const { allowed: PKP, second } = pkpIds();
const mine = keys.pkpPublicKeys(PKP);
const SOL = mine.ed25519.solanaAddress;
const RECIPIENT = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";
const OWN_SCRIPT = p2trScript(mine.taproot.xOnly);
const PAYEE = p2trScript(keys.pkpPublicKeys(second).taproot.xOnly);
const OTHER = p2trScript("0x" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798");
const hex = (b: Uint8Array) => ethers.hexlify(b);

const SOLANA_POLICY: Policy = {
  version: 1,
  rules: [
    {
      name: "small-sol",
      effect: "allow",
      operation: "ed25519",
      solana: { programIds: [SYSTEM_PROGRAM, MEMO_PROGRAM], maxLamports: "5000000" },
    },
    { name: "no-memos", effect: "deny", operation: "ed25519", solana: { programIds: [MEMO_PROGRAM] } },
  ],
};

const BITCOIN_POLICY: Policy = {
  version: 1,
  rules: [
    {
      name: "pay-payee",
      effect: "allow",
      operation: "schnorr",
      bitcoin: { outputScripts: [hex(PAYEE)], maxAmount: "50000" },
    },
  ],
};

describe("signing policies: ed25519 (Solana) and schnorr (Taproot) rules", function () {
  this.timeout(120_000);

  describe("schema", () => {
    it("accepts the new operations with their own conditions", () => {
      expect(checkPolicy(SOLANA_POLICY).ok).to.equal(true);
      expect(checkPolicy(BITCOIN_POLICY).ok).to.equal(true);
      expect(
        checkPolicy({ version: 1, rules: [{ name: "any", effect: "allow", operation: "schnorr" }] }).ok,
      ).to.equal(true);
    });

    it("refuses a condition on the wrong operation, a bad program id, a bad script and an unknown field", () => {
      const bad = [
        { name: "a", effect: "allow", operation: "schnorr", solana: { maxLamports: "1" } },
        { name: "b", effect: "allow", operation: "ed25519", bitcoin: { maxAmount: "1" } },
        { name: "c", effect: "allow", operation: "ed25519", solana: { programIds: ["0OIl"] } },
        { name: "d", effect: "allow", operation: "schnorr", bitcoin: { outputScripts: ["5120"] } },
        { name: "e", effect: "allow", operation: "ed25519", solana: { maxLamport: "1" } },
        { name: "f", effect: "allow", operation: "ed25519", solana: {} },
      ];
      for (const rule of bad) {
        const r = checkPolicy({ version: 1, rules: [rule] });
        expect(r.ok, rule.name).to.equal(false);
      }
    });
  });

  describe("engine", () => {
    it("reads a Solana transfer's program ids and lamports; a raw signature of it meets the same rules", () => {
      const msg = solanaTransferMessage(SOL, RECIPIENT, 7_000_000n);
      const facts = parseSolanaMessage(msg, SOL);
      expect(facts.solana).to.deep.equal({
        programIds: [SYSTEM_PROGRAM],
        lamports: 7_000_000n,
        signers: [SOL],
      });
      expect(parseEd25519(hex(msg)).solana).to.deep.equal(facts.solana);
      const d = evaluatePolicy(SOLANA_POLICY, parseEd25519(msg));
      expect(d).to.include({
        allowed: false,
        rule: "small-sol",
        operation: "ed25519",
        field: "solana.maxLamports",
        value: "7000000",
      });
    });

    it("bytes that are not a Solana message match no rule with Solana conditions (default deny)", () => {
      const d = evaluatePolicy(SOLANA_POLICY, parseEd25519("0x68656c6c6f"));
      expect(d).to.include({ allowed: false, rule: "small-sol", field: "solana" });
      const open: Policy = { version: 1, rules: [{ name: "any-ed", effect: "allow", operation: "ed25519" }] };
      expect(evaluatePolicy(open, parseEd25519("0x68656c6c6f")).allowed).to.equal(true);
    });

    it("reads a Taproot input's outputs without the change, and its sighash is what gets signed", () => {
      const psbt = taprootPsbt(mine.taproot.xOnly, 100_000n, [
        { script: PAYEE, value: 40_000n },
        { script: OWN_SCRIPT, value: 59_000n },
      ]);
      const facts = parseTaprootInput(psbt, 0, OWN_SCRIPT);
      expect(facts.bitcoin).to.deep.equal({
        outputs: [{ script: hex(PAYEE), amount: 40_000n }],
        amount: 40_000n,
      });
      expect(evaluatePolicy(BITCOIN_POLICY, facts)).to.include({ allowed: true, rule: "pay-payee" });
      // A raw digest, even that very sighash, is nothing the rule can read.
      const raw = evaluatePolicy(BITCOIN_POLICY, parseSchnorrDigest(facts.digest));
      expect(raw).to.include({ allowed: false, field: "bitcoin" });
    });

    it("property: a Solana transfer is allowed exactly when it stays under the limit and calls no denied program", () => {
      fc.assert(
        fc.property(
          fc.bigInt({ min: 0n, max: 20_000_000n }),
          fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
          (lamports, memo) => {
            const facts = parseSolanaMessage(solanaTransferMessage(SOL, RECIPIENT, lamports, memo), SOL);
            const d = evaluatePolicy(SOLANA_POLICY, facts);
            const expected = memo === undefined && lamports <= 5_000_000n;
            if (d.allowed !== expected) return false;
            if (memo !== undefined) return d.rule === "no-memos"; // deny wins, whatever the amount
            return expected || (d.field === "solana.maxLamports" && d.value === lamports.toString());
          },
        ),
        { numRuns: 60 },
      );
    });

    it("property: a Taproot spend is allowed exactly when every non-change output pays an allowed script within the amount", () => {
      const scripts = [PAYEE, OTHER, OWN_SCRIPT];
      fc.assert(
        fc.property(
          fc.array(
            fc.record({ to: fc.integer({ min: 0, max: 2 }), value: fc.bigInt({ min: 330n, max: 40_000n }) }),
            {
              minLength: 1,
              maxLength: 4,
            },
          ),
          (outs) => {
            const outputs = outs.map((o) => ({ script: scripts[o.to], value: o.value }));
            const psbt = taprootPsbt(mine.taproot.xOnly, 200_000n, outputs);
            const d = evaluatePolicy(BITCOIN_POLICY, parseTaprootInput(psbt, 0, OWN_SCRIPT));
            const paid = outs.filter((o) => o.to !== 2);
            const total = paid.reduce((t, o) => t + o.value, 0n);
            const expected = paid.every((o) => o.to === 0) && total <= 50_000n;
            if (d.allowed !== expected) return false;
            if (expected) return true;
            return paid.some((o) => o.to === 1)
              ? d.field === "bitcoin.outputScripts" && d.value === hex(OTHER)
              : d.field === "bitcoin.maxAmount" && d.value === total.toString();
          },
        ),
        { numRuns: 60 },
      );
    });
  });

  describe("in the executor", () => {
    const { run } = useExecutor(keys);

    const grants = (policy: Policy): GroupPolicy[] => [{ group: "3", policy }];
    const underPolicy = (code: string, policy: Policy, jsParams: Record<string, unknown>) =>
      run(code, { jsParams: { pkpId: PKP, ...jsParams }, policiesFor: () => grants(policy) });

    it("a Solana transfer under the limit is signed; over it, policy_denied names the rule and the value", async () => {
      const code = `try { return await Actions.solana.signTransactionMessage({ pkpId: params.pkpId, messageBytes: params.m }); }
                    catch (e) { return { code: e.code, message: e.message }; }`;
      const small = solanaTransferMessage(SOL, RECIPIENT, 1_000n);
      const ok = await underPolicy(code, SOLANA_POLICY, { m: hex(small) });
      const signed = expectOk(ok) as { signature: string };
      expect(
        ed25519.verify(ethers.getBytes(signed.signature), small, ethers.getBytes(mine.ed25519.publicKey)),
      ).to.equal(true);
      expect(ok.policy_decisions![0]).to.include({ allowed: true, rule: "small-sol", operation: "ed25519" });

      const big = await underPolicy(code, SOLANA_POLICY, {
        m: hex(solanaTransferMessage(SOL, RECIPIENT, 9_000_000n)),
      });
      const refusal = expectOk(big) as { code: string; message: string };
      expect(refusal.code).to.equal("policy_denied");
      expect(refusal.message)
        .to.contain("rule small-sol (group 3)")
        .and.contain("solana.maxLamports = 9000000");
      // The same bytes through the raw signEd25519 are refused the same way.
      const raw = await underPolicy(
        `try { return await Actions.signEd25519({ pkpId: params.pkpId, message: params.m }); }
         catch (e) { return e.code; }`,
        SOLANA_POLICY,
        { m: hex(solanaTransferMessage(SOL, RECIPIENT, 9_000_000n)) },
      );
      expect(expectOk(raw)).to.equal("policy_denied");
    });

    it("a Taproot spend to the allowed script is signed and finalizes; to another script it is refused; a raw digest too", async () => {
      const code = `try { return await Actions.bitcoin.signTaprootInput({ pkpId: params.pkpId, psbtBase64: params.p, inputIndex: 0 }); }
                    catch (e) { return { code: e.code, message: e.message }; }`;
      const good = taprootPsbt(mine.taproot.xOnly, 100_000n, [{ script: PAYEE, value: 30_000n }]);
      const signed = expectOk(await underPolicy(code, BITCOIN_POLICY, { p: good })) as string;
      expect(verifyTaprootSpend(signed, mine.taproot.tweakedXOnly).ok).to.equal(true);

      const bad = taprootPsbt(mine.taproot.xOnly, 100_000n, [{ script: OTHER, value: 30_000n }]);
      const refusal = expectOk(await underPolicy(code, BITCOIN_POLICY, { p: bad })) as {
        code: string;
        message: string;
      };
      expect(refusal.code).to.equal("policy_denied");
      expect(refusal.message)
        .to.contain("rule pay-payee")
        .and.contain(`bitcoin.outputScripts = ${hex(OTHER)}`);

      const raw = await underPolicy(
        `try { return await Actions.signSchnorr({ pkpId: params.pkpId, digest: "0x" + "11".repeat(32), tweak: "taproot" }); }
         catch (e) { return e.code; }`,
        BITCOIN_POLICY,
        {},
      );
      expect(expectOk(raw)).to.equal("policy_denied");
    });

    it("a policy with no ed25519 or schnorr rule refuses both (default deny)", async () => {
      const evmOnly: Policy = {
        version: 1,
        rules: [{ name: "msgs", effect: "allow", operation: "message" }],
      };
      const r = await underPolicy(
        `const out = [];
         for (const f of [() => Actions.signEd25519({ pkpId: params.pkpId, message: "0x01" }),
                          () => Actions.signSchnorr({ pkpId: params.pkpId, digest: "0x" + "22".repeat(32) })]) {
           try { await f(); out.push("signed"); } catch (e) { out.push(e.code); }
         }
         return out;`,
        evmOnly,
        {},
      );
      expect(expectOk(r)).to.deep.equal(["policy_denied", "policy_denied"]);
      expect(r.policy_decisions!.map((d) => d.rule)).to.deep.equal(["(default deny)", "(default deny)"]);
    });
  });
});
