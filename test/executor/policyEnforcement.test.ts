/**
 * Signing policies enforced by the executor at the moment of signing: every path an action can take to
 * a signature or to key bytes (the Lit.Actions-style API, the older signEcdsa, the ethers v5 and v6
 * signers, getPrivateKey, encrypt/decrypt, WebCrypto) is checked, a refusal is a `policy_denied` error
 * the action can catch and the caller sees in `error`, and an allowed signature recovers over the
 * transaction that was checked. Real enclave keys, real worker pool, no mocks.
 */
import { expect } from "chai";
import fc from "fast-check";
import { AbiCoder, Transaction, getAddress, verifyMessage } from "ethers";
import { type RunRequest } from "../../enclave/executor";
import type { GroupPolicy, Policy } from "../../enclave/policy";
import { expectOk, makeKeys, pkpIds, useExecutor } from "./helpers";

const USDC = getAddress("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48");
const ALICE = getAddress("0x00000000000000000000000000000000000a11ce");
const MALLORY = getAddress("0x000000000000000000000000000000000000bad1");
const coder = AbiCoder.defaultAbiCoder();
const transferData = (to: string, amount: bigint) =>
  "0xa9059cbb" + coder.encode(["address", "uint256"], [to, amount]).slice(2);

const PAYOUTS: Policy = {
  version: 1,
  rules: [
    {
      name: "usdc-payouts",
      effect: "allow",
      operation: "transaction",
      chainIds: [1],
      value: { max: "0" },
      erc20: { token: USDC, methods: ["transfer"], recipients: { in: [ALICE] }, amount: { max: "1000" } },
    },
    { name: "login", effect: "allow", operation: "message", prefix: "login:" },
  ],
};

describe("signing policies: enforcement in the executor", function () {
  this.timeout(120_000);
  const keys = makeKeys();
  const { allowed: PKP } = pkpIds();
  const address = keys.pkpAddress(PKP);
  const ex = useExecutor(keys, { poolSize: 2 });
  const { run } = ex;

  /** A run of `code` whose PKP (the request's own, so also the run-key path) is under `grants`. */
  const underPolicy = (code: string, grants: GroupPolicy[] | null, extra: Partial<RunRequest> = {}) =>
    run(code, {
      jsParams: { pkpId: PKP, usdc: USDC, alice: ALICE, mallory: MALLORY },
      runPkp: { ref: PKP, scope: 1 },
      policiesFor: () => grants,
      ...extra,
    });
  const payouts: GroupPolicy[] = [{ group: "7", policy: PAYOUTS }];

  it("an allowed transaction is signed over exactly the transaction checked; the decision is in the result", async () => {
    const r = await underPolicy(
      `const raw = await Actions.signTransaction({ pkpId: params.pkpId, transaction: {
         chainId: 1, nonce: 0, gasLimit: 60000, maxFeePerGas: 10, maxPriorityFeePerGas: 1, to: params.usdc,
         data: "${transferData(ALICE, 1000n)}" } });
       return raw;`,
      payouts,
    );
    const raw = expectOk(r) as string;
    const tx = Transaction.from(raw);
    expect(tx.from).to.equal(address);
    expect(tx.to).to.equal(USDC);
    expect(tx.data).to.equal(transferData(ALICE, 1000n));
    expect(r.policy_decisions).to.have.length(1);
    expect(r.policy_decisions![0]).to.include({
      allowed: true,
      rule: "usdc-payouts",
      operation: "transaction",
      group: "7",
      pkp: PKP,
      digest: tx.unsignedHash,
    });
  });

  it("a refused operation throws policy_denied in the action, naming the rule and the value", async () => {
    const r = await underPolicy(
      `try {
         await Actions.signTransaction({ pkpId: params.pkpId, transaction: { chainId: 1, to: params.usdc,
           data: "${transferData(MALLORY, 5n)}" } });
         return "signed";
       } catch (e) { return { code: e.code, message: e.message }; }`,
      payouts,
    );
    const caught = expectOk(r) as { code: string; message: string };
    expect(caught.code).to.equal("policy_denied");
    expect(caught.message)
      .to.contain("rule usdc-payouts (group 7)")
      .and.contain(`erc20.recipients = ${MALLORY}`);
    expect(r.policy_decisions![0]).to.include({ allowed: false, field: "erc20.recipients", value: MALLORY });
  });

  it("uncaught, the refusal is the run's error with has_error", async () => {
    const r = await underPolicy(
      `return await Actions.signMessage({ pkpId: params.pkpId, message: "pay me" });`,
      payouts,
    );
    expect(r.has_error).to.equal(true);
    expect(r.error!.code).to.equal("policy_denied");
    expect(r.error!.message).to.contain("rule login");
    expect(r.response).to.equal(null);
  });

  it("an allowed message signature recovers to the PKP", async () => {
    const sig = expectOk(
      await underPolicy(
        `return await Actions.signMessage({ pkpId: params.pkpId, message: "login: 42" });`,
        payouts,
      ),
    ) as string;
    expect(verifyMessage("login: 42", sig)).to.equal(address);
  });

  it("the ethers v5 and v6 signers go through the check and sign the checked transaction", async () => {
    for (const version of [5, 6]) {
      const code = `
        const signer = Actions.getSigner({ pkpId: params.pkpId${version === 6 ? ", ethers: 6" : ""} });
        const out = { address: await signer.getAddress() };
        out.raw = await signer.signTransaction({ chainId: 1, nonce: 1, gasLimit: 60000, gasPrice: 5, type: 0,
          to: params.usdc, data: "${transferData(ALICE, 7n)}" });
        try { await signer.signTransaction({ chainId: 1, to: params.mallory, value: 1, gasLimit: 21000, gasPrice: 5 }); out.second = "signed"; }
        catch (e) { out.second = e.code; }
        try { await signer.signMessage("hello"); out.msg = "signed"; } catch (e) { out.msg = e.code; }
        try { await signer.${version === 6 ? "signTypedData" : "_signTypedData"}({ name: "x", chainId: 1 }, { M: [{ name: "a", type: "uint256" }] }, { a: 1 }); out.typed = "signed"; }
        catch (e) { out.typed = e.code; }
        return out;`;
      const out = expectOk(await underPolicy(code, payouts)) as Record<string, string>;
      expect(out.address, `v${version}`).to.equal(address);
      expect(Transaction.from(out.raw).from, `v${version}`).to.equal(address);
      expect(Transaction.from(out.raw).type).to.equal(0);
      expect([out.second, out.msg, out.typed], `v${version}`).to.deep.equal([
        "policy_denied",
        "policy_denied",
        "policy_denied",
      ]);
    }
  });

  it("a hostile action gets neither key bytes nor a signature outside the policy, by any path", async () => {
    const code = `
      const id = params.pkpId;
      const tries = {
        getPrivateKey: () => Actions.getPrivateKey({ pkpId: id }),
        signEcdsa: () => Actions.signEcdsa({ pkpId: id, digest: "0x" + "11".repeat(32) }),
        signEcdsaBytes: () => Actions.signEcdsa({ pkpId: id, digest: new Uint8Array(32) }),
        legacy: async () => Actions.signEcdsa({ toSign: new Uint8Array(32).fill(1), publicKey: await Actions.getPublicKey({ pkpId: id }), sigName: "s" }),
        byAddress: async () => Actions.signEcdsa({ pkpId: await Actions.getAddress({ pkpId: id }), digest: "0x" + "22".repeat(32) }),
        message: () => Actions.signMessage({ pkpId: id, message: new Uint8Array([1, 2]) }),
        typed: () => Actions.signTypedData({ pkpId: id, domain: { chainId: 1 }, types: { M: [{ name: "a", type: "uint256" }] }, value: { a: 1 } }),
        encrypt: () => Actions.Encrypt({ pkpId: id, message: "x" }),
        decrypt: () => Actions.Decrypt({ pkpId: id, ciphertext: "0x00" }),
        creation: () => Actions.signTransaction({ pkpId: id, transaction: { chainId: 1, data: "0x6000" } }),
        otherChain: () => Actions.signTransaction({ pkpId: id, transaction: { chainId: 5, to: params.usdc, data: "${transferData(ALICE, 1n)}" } }),
        noChain: () => Actions.signTransaction({ pkpId: id, transaction: { to: params.usdc, data: "${transferData(ALICE, 1n)}" } }),
        litName: () => LitActions.signEcdsa({ pkpId: id, digest: "0x" + "33".repeat(32) }),
        walletV5: async () => new ethers.Wallet(await Actions.getPrivateKey({ pkpId: id })).address,
        webcrypto: async () => {
          const k = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign"]);
          return "webcrypto has no PKP key: " + typeof k;
        },
      };
      const out = {};
      for (const [name, f] of Object.entries(tries)) {
        try { out[name] = { ok: await f() }; } catch (e) { out[name] = { code: e.code }; }
      }
      return out;`;
    const r = await underPolicy(code, payouts);
    const out = expectOk(r) as Record<string, { ok?: unknown; code?: string }>;
    for (const name of Object.keys(out)) {
      if (name === "webcrypto" || name === "noChain") continue;
      expect(out[name], name).to.deep.equal({ code: "policy_denied" });
    }
    expect(out.noChain.code).to.equal("invalid_argument");
    expect(out.webcrypto.ok).to.match(/no PKP key/);
    expect(r.signatures ?? {}).to.deep.equal({});
    expect(r.policy_decisions!.every((d) => !d.allowed)).to.equal(true);
  });

  it("without a policy (null) every path works as before and no decision is recorded", async () => {
    const r = await underPolicy(
      `const k = await Actions.getPrivateKey({ pkpId: params.pkpId });
       const s = await Actions.getSigner({ pkpId: params.pkpId }).signMessage("anything");
       return { address: new ethers.Wallet(k).address, s };`,
      null,
    );
    const out = expectOk(r) as { address: string; s: string };
    expect(out.address).to.equal(address);
    expect(verifyMessage("anything", out.s)).to.equal(address);
    expect(r.policy_decisions).to.equal(undefined);
  });

  it("a policy changed during the run applies to the run's next signature", async () => {
    // The relayer's side of a change: it reads the new policy from its cache and invalidates the run
    // keys of the account (as for any permission change), so a key handed to the worker stops signing.
    const { second } = pkpIds();
    let current: GroupPolicy[] | null = null;
    const r = await underPolicy(
      `const first = await Actions.signMessage({ pkpId: params.pkpId, message: "a" });
       await Actions.getPublicKey({ pkpId: params.second });
       try { await Actions.signMessage({ pkpId: params.pkpId, message: "b" }); return "signed twice"; }
       catch (e) { return e.code; }`,
      null,
      {
        jsParams: { pkpId: PKP, second },
        policiesFor: () => current,
        authorizePkp: async (ref: string) => {
          if (ref === second) {
            current = [{ group: "7", policy: PAYOUTS }];
            ex.executor.invalidateRunKeys(1);
          }
          return ref;
        },
      },
    );
    expect(expectOk(r)).to.equal("policy_denied");
  });

  it("property: no signature outside the policy, whichever API the action uses", async () => {
    const api = fc.constantFrom("actions", "v5", "v6");
    const recipient = fc.constantFrom(ALICE, MALLORY);
    const amount = fc.bigInt({ min: 0n, max: 2000n });
    const chain = fc.constantFrom(1, 10);
    await fc.assert(
      fc.asyncProperty(api, recipient, amount, chain, async (how, to, n, chainId) => {
        const tx = `{ chainId: ${chainId}, nonce: 0, gasLimit: 60000, gasPrice: 1, type: 0, to: params.usdc, data: "${transferData(to, n)}" }`;
        const sign =
          how === "actions"
            ? `Actions.signTransaction({ pkpId: params.pkpId, transaction: ${tx} })`
            : `Actions.getSigner({ pkpId: params.pkpId${how === "v6" ? ", ethers: 6" : ""} }).signTransaction(${tx})`;
        const r = await underPolicy(
          `try { return await ${sign}; } catch (e) { return { refused: e.code }; }`,
          payouts,
        );
        const out = expectOk(r) as string | { refused: string };
        const shouldAllow = to === ALICE && n <= 1000n && chainId === 1;
        if (shouldAllow) {
          const signed = Transaction.from(out as string);
          expect(signed.from).to.equal(address);
          expect(signed.data).to.equal(transferData(to, n));
          expect(signed.chainId).to.equal(BigInt(chainId));
        } else expect(out).to.deep.equal({ refused: "policy_denied" });
      }),
      { numRuns: 40, seed: 27 },
    );
  });
});
