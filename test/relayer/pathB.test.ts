/**
 * Path B: transactions sent straight to the registry by an owner wallet (not through the relayer) are
 * honoured by the relayer as soon as it has read their block: revocations, removed actions, ownership moves.
 */
import { expect } from "chai";
import { timeUntil } from "../../testkit/eventually";
import { Wallet, ZeroAddress } from "ethers";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEYS } from "../helpers/anvil";
import { startStack, type Stack } from "../helpers/stack";

const POLL_MS = 250;

describe("relayer: path-B writes reach the relayer once it has read their block", function () {
  this.timeout(120_000);
  let s: Stack;

  before(async () => {
    s = await startStack({ pollIntervalMs: POLL_MS });
  });
  after(async () => {
    await s?.close();
  });

  /**
   * Waits until the relayer's permission cache has applied `block` (its public metric), polled every
   * POLL_MS by the relayer. Whatever a request sees after that must already reflect the block's events:
   * a test of what the relayer answers once it has read a block, not of how fast the machine is.
   */
  async function relayerHasProcessed(block: number): Promise<void> {
    await timeUntil(
      async () => {
        const text = await (await fetch(`${s.url}/metrics`)).text();
        const m = /^sigil_cache_last_processed_block (\d+)$/m.exec(text);
        return m !== null && Number(m[1]) >= block;
      },
      { timeoutMs: 10_000 },
    );
  }

  describe("an account owned by a wallet", () => {
    let registry: ReturnType<typeof AccountRegistry__factory.connect>;
    let usageKey: string;
    let usageAddress: string;
    let groupId: bigint;
    let cid: string;
    let pkpId: string;

    before(async () => {
      const owner = new Wallet(DEV_KEYS[1], s.provider);
      registry = AccountRegistry__factory.connect(s.deployment.registry, owner);
      await (await registry.createAccount("wallet-owned", ZeroAddress)).wait();
      const gen = s.enclave.generateUsageKey();
      usageKey = gen.apiKey;
      usageAddress = gen.address;
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
      pkpId = registry.interface.parseLog(pkpRc!.logs[0])!.args.pkpId;
      // The key was registered on chain a moment ago: the relayer sees it within one poll interval.
      await timeUntil(async () => (await s.api("GET", "/core/v1/pkps", { key: usageKey })).status === 200, {
        timeoutMs: 5_000,
      });
      const pinned = await s.api("POST", "/core/v1/actions", {
        key: usageKey,
        body: { code: "async function main() { return 'ok'; }" },
      });
      cid = pinned.body.cid;
      const gRc = await (await registry.createGroup("g", "", [pkpId], [cid])).wait();
      groupId = registry.interface.parseLog(gRc!.logs[0])!.args.groupId;
    });

    it("the wallet's usage key executes through the relayer", async () => {
      await timeUntil(
        async () => (await s.api("GET", `/core/v1/groups/${groupId}`, { key: usageKey })).status === 200,
        { timeoutMs: 5_000 },
      );
      const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, pkp_id: pkpId } });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.response).to.equal("ok");
    });

    it("an action removed on chain is refused once the relayer has read its block", async () => {
      const rc = await (await registry.removeAction(groupId, cid)).wait();
      await relayerHasProcessed(rc!.blockNumber);
      const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, pkp_id: pkpId } });
      expect(r.status, JSON.stringify(r.body)).to.equal(403);
    });

    it("a key revoked on chain gets 401 once the relayer has read its block", async () => {
      await (await registry.addAction(groupId, cid)).wait();
      await timeUntil(
        async () =>
          (await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, pkp_id: pkpId } }))
            .status === 200,
        { timeoutMs: 5_000 },
      );
      const rc = await (await registry.removeKey(usageAddress)).wait();
      await relayerHasProcessed(rc!.blockNumber);
      const run = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, pkp_id: pkpId } });
      expect(run.status, JSON.stringify(run.body)).to.equal(401);
      const r = await s.api("GET", "/core/v1/pkps", { key: usageKey });
      expect(r.body.error.code).to.equal("unknown_api_key");
    });
  });

  describe("graduation: ownership moved to a wallet (ChainSecured)", () => {
    let accountKey: string;
    let accountId: number;
    let serverKey: string;
    let cid: string;

    before(async () => {
      const acct = await s.api("POST", "/core/v1/new_account", { body: { account_name: "graduating" } });
      accountKey = acct.body.api_key;
      accountId = acct.body.account_id;
      cid = (
        await s.api("POST", "/core/v1/actions", {
          key: accountKey,
          body: { code: "async function main() { return 1; }" },
        })
      ).body.cid;
      const g = await s.api("POST", "/core/v1/groups", {
        key: accountKey,
        body: { name: "g", actions: [cid] },
      });
      const k = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: accountKey,
        body: { name: "server", execute_in_groups: [g.body.group_id] },
      });
      serverKey = k.body.usage_api_key;
    });

    it("transfer_ownership records a pending owner; nothing changes until it is accepted", async () => {
      const wallet = new Wallet(DEV_KEYS[2], s.provider);
      const r = await s.api("POST", "/core/v1/account/transfer_ownership", {
        key: accountKey,
        body: { new_owner: wallet.address },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      const info = await s.api("GET", "/core/v1/account", { key: accountKey });
      expect(info.body.pending_owner).to.equal(wallet.address);
      expect(info.body.mode).to.equal("api");
    });

    it("after the wallet accepts, the account is chain_secured and the account key gets 409 before anything is sent", async () => {
      const wallet = new Wallet(DEV_KEYS[2], s.provider);
      await (
        await AccountRegistry__factory.connect(s.deployment.registry, wallet).acceptOwnership(accountId)
      ).wait();
      await timeUntil(
        async () =>
          (await s.api("GET", "/core/v1/account", { key: accountKey })).body.mode === "chain_secured",
        { timeoutMs: 5_000 },
      );
      const w = await s.api("POST", "/core/v1/pkps/create", { key: accountKey, body: {} });
      expect(w.status).to.equal(409);
      expect(w.body.error.code).to.equal("account_chain_secured");
      const k = await s.api("POST", "/core/v1/add_usage_api_key", { key: accountKey, body: { name: "x" } });
      expect(k.body.error.code).to.equal("account_chain_secured");
      const x = await s.api("POST", "/core/v1/svc_action", { key: accountKey, body: { cid } });
      expect(x.body.error.code).to.equal("account_chain_secured");
    });

    it("usage keys registered before keep working", async () => {
      const r = await s.api("POST", "/core/v1/svc_action", { key: serverKey, body: { cid } });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    });
  });
});
