/**
 * The policy endpoints over HTTP on the real stack (anvil, deployed registry, relayer): upload checks
 * the schema and pins the document like action code, GET reads it back by CID, and the dry run
 * answers allow/deny with the deciding rule for inline and stored policies.
 */
import { expect } from "chai";
import { eventually } from "../../testkit/eventually";
import { AbiCoder, Wallet, ZeroAddress, ethers, getAddress } from "ethers";
import { computeCid } from "../../enclave";
import { createSigil } from "../../sdk/index";
import { setupAccount, startStack, type Stack } from "../helpers/stack";
import { DEV_KEYS } from "../helpers/anvil";
import { solanaTransferMessage } from "../executor/chainFixtures";
import { AccountRegistry__factory } from "../../typechain-types";

const USDC = getAddress("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48");
const ALICE = getAddress("0x00000000000000000000000000000000000a11ce");
const MALLORY = getAddress("0x000000000000000000000000000000000000bad1");
const transfer = (to: string, n: bigint) =>
  "0xa9059cbb" + AbiCoder.defaultAbiCoder().encode(["address", "uint256"], [to, n]).slice(2);

const POLICY = {
  version: 1,
  rules: [
    {
      name: "usdc-payouts",
      effect: "allow",
      operation: "transaction",
      chainIds: [1],
      erc20: { token: USDC, recipients: { in: [ALICE] }, amount: { max: "1000" } },
    },
    { name: "weekdays-only", effect: "deny", operation: "transaction", time: { days: [0, 6] } },
  ],
};

describe("signing policies: the relayer's endpoints", function () {
  this.timeout(180_000);
  let s: Stack;
  let key: string;

  before(async () => {
    s = await startStack();
    key = (await setupAccount(s)).accountKey;
  });
  after(() => s?.close());

  it("uploads a valid policy (pinned under the CID of its JSON) and reads it back", async () => {
    const up = await s.api("POST", "/core/v1/policies", { key, body: { policy: POLICY } });
    expect(up.status, JSON.stringify(up.body)).to.equal(201);
    expect(up.body.cid).to.equal(await computeCid(new TextEncoder().encode(JSON.stringify(POLICY))));
    const pinned = await s.api("GET", "/core/v1/actions/pinned", { key });
    expect(pinned.body.items.map((i: { cid: string }) => i.cid)).to.include(up.body.cid);
    const back = await s.api("GET", `/core/v1/policies/${up.body.cid}`, { key });
    expect(back.status).to.equal(200);
    expect(back.body).to.deep.equal({ cid: up.body.cid, policy: POLICY });
  });

  it("refuses an invalid policy with 400 invalid_policy listing the problems, and pins nothing", async () => {
    const before = (await s.api("GET", "/core/v1/actions/pinned", { key })).body.total;
    const bad = {
      version: 1,
      rules: [{ name: "x", effect: "allow", operation: "transaction", prefix: "a" }],
    };
    const r = await s.api("POST", "/core/v1/policies", { key, body: { policy: bad } });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_policy");
    expect(r.body.error.details.errors.join()).to.contain('"prefix" is not a condition');
    expect((await s.api("GET", "/core/v1/actions/pinned", { key })).body.total).to.equal(before);
  });

  it("a stored code that is not a policy is invalid_policy; an unknown CID is 404 policy_not_found", async () => {
    const code = await s.api("POST", "/core/v1/actions", { key, body: { code: "return 1;" } });
    const r = await s.api("GET", `/core/v1/policies/${code.body.cid}`, { key });
    expect([r.status, r.body.error.code]).to.deep.equal([400, "invalid_policy"]);
    const unknown = await computeCid(new TextEncoder().encode("nothing stored"));
    const nf = await s.api("GET", `/core/v1/policies/${unknown}`, { key });
    expect([nf.status, nf.body.error.code]).to.deep.equal([404, "policy_not_found"]);
  });

  it("evaluates inline and stored policies: allow or deny with the deciding rule and the failing value", async () => {
    const { cid } = (await s.api("POST", "/core/v1/policies", { key, body: { policy: POLICY } })).body;
    const tx = (to: string, n: bigint) => ({
      kind: "transaction",
      transaction: { chainId: 1, nonce: 0, gasLimit: 60000, gasPrice: 1, to: USDC, data: transfer(to, n) },
    });
    const monday = "2026-11-23T12:00:00Z";
    const ok = await s.api("POST", "/core/v1/policies/evaluate", {
      key,
      body: { cid, operation: tx(ALICE, 1000n), at: monday },
    });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    expect(ok.body).to.include({ allowed: true, rule: "usdc-payouts", operation: "transaction" });
    expect(ok.body.digest).to.match(/^0x[0-9a-f]{64}$/);
    const stranger = await s.api("POST", "/core/v1/policies/evaluate", {
      key,
      body: { policy: POLICY, operation: tx(MALLORY, 1n), at: monday },
    });
    expect(stranger.body).to.include({
      allowed: false,
      rule: "usdc-payouts",
      field: "erc20.recipients",
      value: MALLORY,
    });
    const sunday = await s.api("POST", "/core/v1/policies/evaluate", {
      key,
      body: { cid, operation: tx(ALICE, 1n), at: "2026-11-22T12:00:00Z" },
    });
    expect(sunday.body).to.include({ allowed: false, rule: "weekdays-only" });
    const exportKey = await s.api("POST", "/core/v1/policies/evaluate", {
      key,
      body: { cid, operation: { kind: "keyExport" } },
    });
    expect(exportKey.body).to.include({ allowed: false, rule: "(default deny)", operation: "keyExport" });
  });

  it("dry-runs ed25519 (a Solana transfer message) and schnorr (a raw digest) operations", async () => {
    const from = "sx1jK2ShyyPZEPZUUC3vExuakFfS4iqDK1hfSApdfcW";
    const to = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";
    const policy = {
      version: 1,
      rules: [
        { name: "sol", effect: "allow", operation: "ed25519", solana: { maxLamports: "1000" } },
        { name: "btc", effect: "allow", operation: "schnorr", bitcoin: { maxAmount: "1000" } },
      ],
    };
    const message = (lamports: bigint) => ethers.hexlify(solanaTransferMessage(from, to, lamports));
    const evaluate = (operation: unknown) =>
      s.api("POST", "/core/v1/policies/evaluate", { key, body: { policy, operation } });
    const small = await evaluate({ kind: "ed25519", message: message(999n) });
    expect(small.status, JSON.stringify(small.body)).to.equal(200);
    expect(small.body).to.include({ allowed: true, rule: "sol", operation: "ed25519" });
    const big = await evaluate({ kind: "ed25519", message: message(5000n) });
    expect(big.body).to.include({ allowed: false, rule: "sol", field: "solana.maxLamports", value: "5000" });
    const digest = await evaluate({ kind: "schnorr", digest: "0x" + "11".repeat(32) });
    expect(digest.body).to.include({ allowed: false, rule: "btc", field: "bitcoin", operation: "schnorr" });
    const bad = await evaluate({ kind: "ed25519", message: "not hex" });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.code).to.equal("invalid_request");
  });

  it("a malformed dry run is a 400, never a 500", async () => {
    for (const body of [
      { operation: { kind: "keyExport" } },
      { policy: POLICY, cid: "x", operation: { kind: "keyExport" } },
      { policy: POLICY, operation: { kind: "sign" } },
      { policy: POLICY, operation: { kind: "transaction", transaction: { to: ALICE } } },
      { policy: POLICY, operation: { kind: "message", message: "zz", encoding: "hex" } },
      { policy: POLICY, operation: { kind: "keyExport" }, at: "yesterday" },
      { policy: { version: 1 }, operation: { kind: "keyExport" } },
    ]) {
      const r = await s.api("POST", "/core/v1/policies/evaluate", { key, body });
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(["invalid_request", "invalid_policy", "invalid_cid"]).to.include(r.body.error.code);
    }
  });
  describe("a group's policy, set through the API and enforced in runs", () => {
    const ACTION = `async function main(p) {
      const out = {};
      for (const m of p.messages) {
        try { out[m] = await Actions.signMessage({ pkpId: p.pkp, message: m }); }
        catch (e) { out[m] = e.code; }
      }
      return out;
    }`;
    const LOGIN_ONLY = {
      version: 1,
      rules: [{ name: "login-only", effect: "allow", operation: "message", prefix: "login:" }],
    };
    let a: Awaited<ReturnType<typeof setupAccount>>;
    let usageKey: string;
    const run = (key: string) =>
      s.api("POST", "/core/v1/svc_action", {
        key,
        body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId, messages: ["login: 1", "pay me"] } },
      });

    before(async () => {
      a = await setupAccount(s, ACTION);
      const k = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "runner", execute_in_groups: [a.groupId] },
      });
      usageKey = k.body.usage_api_key;
    });

    it("a group without a policy signs anything, as before", async () => {
      const r = await run(usageKey);
      expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
      expect(r.body.response["pay me"]).to.match(/^0x[0-9a-f]{130}$/);
      const g = await s.api("GET", `/core/v1/groups/${a.groupId}`, { key: a.accountKey });
      expect(g.body.policy_cid).to.equal(null);
    });

    it("setting the policy refuses what it does not allow, for a usage key and for the owner", async () => {
      const { cid } = (
        await s.api("POST", "/core/v1/policies", { key: a.accountKey, body: { policy: LOGIN_ONLY } })
      ).body;
      const set = await s.api("POST", `/core/v1/groups/${a.groupId}/policy`, {
        key: a.accountKey,
        body: { cid },
      });
      expect(set.status, JSON.stringify(set.body)).to.equal(200);
      expect(set.body.policy_cid).to.equal(cid);
      expect(set.body.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      const listed = await s.api("GET", "/core/v1/groups", { key: a.accountKey });
      expect(
        listed.body.items.find((g: { group_id: number }) => g.group_id === a.groupId).policy_cid,
      ).to.equal(cid);
      for (const key of [usageKey, a.accountKey]) {
        const r = await run(key);
        expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
        expect(r.body.response["login: 1"]).to.match(/^0x[0-9a-f]{130}$/);
        expect(r.body.response["pay me"]).to.equal("policy_denied");
      }
    });

    it("a key without manageActions on the group cannot set it; an unknown document is refused before any write", async () => {
      const r = await s.api("POST", `/core/v1/groups/${a.groupId}/policy`, {
        key: usageKey,
        body: { cid: null },
      });
      expect([r.status, r.body.error.code]).to.deep.equal([403, "missing_scope"]);
      const unknown = await computeCid(new TextEncoder().encode("no such policy"));
      const nf = await s.api("POST", `/core/v1/groups/${a.groupId}/policy`, {
        key: a.accountKey,
        body: { cid: unknown },
      });
      expect([nf.status, nf.body.error.code]).to.deep.equal([404, "policy_not_found"]);
    });

    it("clearing the policy restores today's behaviour", async () => {
      const clear = await s.api("POST", `/core/v1/groups/${a.groupId}/policy`, {
        key: a.accountKey,
        body: { cid: null },
      });
      expect(clear.status, JSON.stringify(clear.body)).to.equal(200);
      expect(clear.body.policy_cid).to.equal(null);
      const r = await run(usageKey);
      expect(r.body.response["pay me"]).to.match(/^0x[0-9a-f]{130}$/);
    });
  });
  it("the SDK: upload, read, evaluate, set and clear a group's policy", async () => {
    const a = await setupAccount(s);
    const sigil = createSigil({ baseUrl: s.url, apiKey: a.accountKey });
    const { cid } = await sigil.uploadPolicy(POLICY as never);
    expect((await sigil.policy(cid)).policy).to.deep.equal(POLICY);
    const d = await sigil.evaluatePolicy({ cid, operation: { kind: "keyExport" } });
    expect(d).to.include({ allowed: false, rule: "(default deny)" });
    expect((await sigil.setGroupPolicy(a.groupId, cid)).policy_cid).to.equal(cid);
    expect((await sigil.group(a.groupId)).policy_cid).to.equal(cid);
    expect((await sigil.setGroupPolicy(a.groupId, null)).policy_cid).to.equal(null);
  });

  it("the SDK with a usage key that signs: setting and clearing a group's policy is a signed forward request", async () => {
    const a = await setupAccount(s);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "policy editor", manage_ipfs_ids_in_groups: [a.groupId] },
    });
    expect(k.status, JSON.stringify(k.body)).to.equal(201);
    const { cid } = await createSigil({ baseUrl: s.url, apiKey: a.accountKey }).uploadPolicy(POLICY as never);
    const editor = createSigil({ baseUrl: s.url, apiKey: k.body.usage_api_key });
    expect(editor.keyAddress, "the client signs with the usage key").to.be.a("string");
    expect((await editor.setGroupPolicy(a.groupId, cid)).policy_cid).to.equal(cid);
    expect((await editor.setGroupPolicy(a.groupId, null)).policy_cid).to.equal(null);
  });

  describe("several groups granting the same run are independent grants", () => {
    it("allowed when one granting group allows it; a granting group without a policy allows everything", async () => {
      const code = `async function main(p) {
        const out = {};
        for (const m of ["a: 1", "b: 1", "c: 1"]) {
          try { await Actions.signMessage({ pkpId: p.pkp, message: m }); out[m] = "signed"; } catch (e) { out[m] = e.code; }
        }
        return out;
      }`;
      const a = await setupAccount(s, code);
      const upload = async (prefix: string) =>
        (
          await s.api("POST", "/core/v1/policies", {
            key: a.accountKey,
            body: {
              policy: {
                version: 1,
                rules: [{ name: `only-${prefix}`, effect: "allow", operation: "message", prefix }],
              },
            },
          })
        ).body.cid as string;
      const second = await s.api("POST", "/core/v1/groups", {
        key: a.accountKey,
        body: { name: "g2", pkps: [a.pkpId], actions: [a.cid] },
      });
      const g2 = second.body.group_id as number;
      const key = (
        await s.api("POST", "/core/v1/add_usage_api_key", {
          key: a.accountKey,
          body: { name: "both", execute_in_groups: [a.groupId, g2] },
        })
      ).body.usage_api_key as string;
      const run = async () =>
        (
          await s.api("POST", "/core/v1/svc_action", {
            key,
            body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId } },
          })
        ).body.response;
      const setPolicy = (group: number, cid: string | null) =>
        s.api("POST", `/core/v1/groups/${group}/policy`, { key: a.accountKey, body: { cid } });

      await setPolicy(a.groupId, await upload("a:"));
      // Group 2 has no policy: it grants everything.
      expect(await run()).to.deep.equal({ "a: 1": "signed", "b: 1": "signed", "c: 1": "signed" });
      await setPolicy(g2, await upload("b:"));
      // Each group allows its own prefix: the union is allowed, the rest refused.
      expect(await run()).to.deep.equal({ "a: 1": "signed", "b: 1": "signed", "c: 1": "policy_denied" });
      // A key that executes in group 1 only is bound by group 1's policy alone.
      const onlyFirst = (
        await s.api("POST", "/core/v1/add_usage_api_key", {
          key: a.accountKey,
          body: { name: "first", execute_in_groups: [a.groupId] },
        })
      ).body.usage_api_key as string;
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: onlyFirst,
        body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId } },
      });
      expect(r.body.response).to.deep.equal({
        "a: 1": "signed",
        "b: 1": "policy_denied",
        "c: 1": "policy_denied",
      });
    });
  });

  describe("path B: the owner's wallet sets a stricter policy on chain", () => {
    it("the next run's signature outside it is refused, within a poll of the chain; clearing it on chain restores", async () => {
      const owner = new Wallet(DEV_KEYS[1], s.provider);
      const registry = AccountRegistry__factory.connect(s.deployment.registry, owner);
      await (await registry.createAccount("wallet-owned", ZeroAddress)).wait();
      const gen = s.enclave.generateUsageKey();
      const scopes = {
        canCreateGroups: false,
        canDeleteGroups: false,
        canCreatePkps: false,
        manageIpfsIdsInGroups: [],
        addPkpToGroups: [],
        removePkpFromGroups: [],
        executeInGroups: [0],
      };
      await (await registry.addKey(gen.address, gen.keyHash, "server", "", 0, scopes)).wait();
      const pkpRc = await (await registry.createPkp("p", "")).wait();
      const pkpId = registry.interface.parseLog(pkpRc!.logs[0])!.args.pkpId as string;
      await eventually(async () => (await s.api("GET", "/core/v1/pkps", { key: gen.apiKey })).status === 200);
      const code = `async function main(p) {
        try { return await Actions.signMessage({ pkpId: p.pkp, message: "pay me" }); } catch (e) { return e.code; }
      }`;
      const cid = (await s.api("POST", "/core/v1/actions", { key: gen.apiKey, body: { code } })).body.cid;
      const policyCid = (
        await s.api("POST", "/core/v1/policies", {
          key: gen.apiKey,
          body: {
            policy: { version: 1, rules: [{ name: "no-messages", effect: "deny", operation: "message" }] },
          },
        })
      ).body.cid;
      const gRc = await (await registry.createGroup("g", "", [pkpId], [cid])).wait();
      const groupId = registry.interface.parseLog(gRc!.logs[0])!.args.groupId as bigint;
      const run = async () =>
        (
          await s.api("POST", "/core/v1/svc_action", {
            key: gen.apiKey,
            body: { cid, pkp_id: pkpId, js_params: { pkp: pkpId } },
          })
        ).body;
      await eventually(async () => /^0x[0-9a-f]{130}$/.test(String((await run()).response)));

      await (await registry.setGroupPolicy(groupId, policyCid)).wait();
      await eventually(async () => (await run()).response === "policy_denied");
      const g = await s.api("GET", `/core/v1/groups/${groupId}`, { key: gen.apiKey });
      expect(g.body.policy_cid).to.equal(policyCid);

      await (await registry.setGroupPolicy(groupId, "")).wait();
      await eventually(async () => /^0x[0-9a-f]{130}$/.test(String((await run()).response)));
    });
  });
});
