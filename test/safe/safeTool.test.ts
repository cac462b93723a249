/**
 * The path-B Safe tooling against a real anvil chain, the real AccountRegistry and a real 2-of-3 Safe:
 * suite deployment, Safe creation, proposals for registry calls, signing, status, execution, and the
 * typed errors for every way a user can get it wrong.
 */
import { expect } from "chai";
import { ethers } from "ethers";
import path from "node:path";
import fs from "node:fs";
import {
  SafeCliError,
  chainIdAt,
  createSafe,
  encodeRegistryCall,
  ensureSafeSuite,
  executeProposal,
  proposalStatus,
  propose,
  proposeSignExecute,
  readDeploymentsFile,
  readProposal,
  signProposal,
  writeProposal,
  type ProposalFile,
  type RegistryOp,
} from "../../scripts/safe/lib";
import { AccountRegistry__factory, type AccountRegistry } from "../../typechain-types";
import { devKey, safeWorld, type SafeWorld } from "./support";

const OWNER_KEYS = [devKey(1), devKey(2), devKey(3)];
const OWNERS = OWNER_KEYS.map((k) => new ethers.Wallet(k).address);
const OUTSIDER_KEY = devKey(4);
const EXECUTOR_KEY = devKey(5);

async function expectSafeError(p: Promise<unknown>, code: string): Promise<SafeCliError> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(SafeCliError);
    expect((e as SafeCliError).code).to.equal(code);
    return e as SafeCliError;
  }
  expect.fail(`expected SafeCliError ${code}`);
}

describe("Safe tooling (path B)", function () {
  this.timeout(120_000);
  let w: SafeWorld;
  let registry: AccountRegistry;
  let safe: string;
  let accountId: bigint;

  const proposalFor = (op: RegistryOp, nonce?: number) => {
    const call = encodeRegistryCall(op);
    return propose(w.ctx, {
      safe,
      to: w.registry,
      data: call.data,
      call: { method: call.method, args: [] },
      nonce,
    });
  };
  const run = (op: RegistryOp) =>
    proposeSignExecute(w.ctx, {
      safe,
      to: w.registry,
      data: encodeRegistryCall(op).data,
      ownerKeys: OWNER_KEYS.slice(0, 2),
      executorKey: EXECUTOR_KEY,
    });

  before(async function () {
    w = await safeWorld();
    registry = AccountRegistry__factory.connect(w.registry, w.chain.provider);
    safe = await createSafe(w.ctx, devKey(0), { owners: OWNERS, threshold: 2 });
    await run({ op: "call", method: "createAccount", args: ["safe-owned", ethers.ZeroAddress] });
    accountId = await registry.accountOfOwner(safe);
    await run({ op: "create-group", name: "g1" });
  });
  after(async function () {
    await w?.chain.stop();
  });

  describe("suite and Safe", function () {
    it("records the suite per chain id and reuses it while it is on chain", async function () {
      const again = await ensureSafeSuite(new ethers.Wallet(devKey(0), w.chain.provider), w.deploymentsFile);
      expect(again.deployed).to.equal(false);
      expect(readDeploymentsFile(w.deploymentsFile)[String(w.ctx.chainId)]).to.deep.equal(w.ctx.suite);
    });

    it("redeploys when the recorded addresses have no code (a reset chain)", async function () {
      const file = path.join(w.dir, "stale.json");
      const bogus = Object.fromEntries(
        Object.keys(w.ctx.suite).map((k) => [k, ethers.Wallet.createRandom().address]),
      );
      fs.writeFileSync(file, JSON.stringify({ [String(w.ctx.chainId)]: bogus }));
      const r = await ensureSafeSuite(new ethers.Wallet(devKey(6), w.chain.provider), file);
      expect(r.deployed).to.equal(true);
      expect(await w.chain.provider.getCode(r.suite.safeSingletonAddress)).to.not.equal("0x");
    });

    it("creates a 2-of-3 Safe with the given owners", async function () {
      const abi = [
        "function getOwners() view returns (address[])",
        "function getThreshold() view returns (uint256)",
      ];
      const s = new ethers.Contract(safe, abi, w.chain.provider);
      expect(await s.getOwners()).to.deep.equal(OWNERS);
      expect(await s.getThreshold()).to.equal(2n);
    });

    it("refuses a threshold above the number of owners", async function () {
      await expectSafeError(
        createSafe(w.ctx, devKey(0), { owners: OWNERS, threshold: 4 }),
        "invalid_argument",
      );
    });

    it("made the Safe the owner of the account it created", async function () {
      expect(accountId).to.be.greaterThan(0n);
      expect((await registry.getAccount(accountId)).owner).to.equal(safe);
    });
  });

  describe("propose, sign, status, execute", function () {
    it("collects signatures against the threshold and executes an addKey with scopes", async function () {
      const key = ethers.Wallet.createRandom().address;
      let p = await proposalFor({
        op: "add-key",
        key,
        name: "server",
        scopes: { execute_in_groups: [1], can_create_pkps: true },
      });
      expect((await proposalStatus(w.ctx, p)).state).to.equal("collecting");
      p = await signProposal(w.ctx, p, OWNER_KEYS[0]);
      const half = await proposalStatus(w.ctx, p);
      expect([half.collected, half.threshold, half.state]).to.deep.equal([1, 2, "collecting"]);
      p = await signProposal(w.ctx, p, OWNER_KEYS[2]);
      expect((await proposalStatus(w.ctx, p)).state).to.equal("ready");
      await executeProposal(w.ctx, p, EXECUTOR_KEY);
      const info = await registry.getKey(key);
      const [added] = await registry.queryFilter(registry.filters.KeyAdded(undefined, key));
      expect([added.args.name, info.scopes.canCreatePkps, info.scopes.executeInGroups]).to.deep.equal([
        "server",
        true,
        [1n],
      ]);
      expect((await proposalStatus(w.ctx, p)).state).to.equal("executed");
    });

    it("round-trips a proposal through its JSON file", async function () {
      const p = await signProposal(w.ctx, await proposalFor({ op: "create-pkp", name: "p" }), OWNER_KEYS[0]);
      const file = path.join(w.dir, "roundtrip.json");
      writeProposal(file, p);
      expect(readProposal(file)).to.deep.equal(p);
    });

    it("refuses a signer who is not an owner", async function () {
      const p = await proposalFor({ op: "create-pkp", name: "x" });
      const e = await expectSafeError(signProposal(w.ctx, p, OUTSIDER_KEY), "not_owner");
      expect(e.details?.signer).to.equal(new ethers.Wallet(OUTSIDER_KEY).address);
    });

    it("refuses a second signature from the same owner", async function () {
      const p = await signProposal(w.ctx, await proposalFor({ op: "create-pkp", name: "x" }), OWNER_KEYS[0]);
      await expectSafeError(signProposal(w.ctx, p, OWNER_KEYS[0]), "already_signed");
    });

    it("refuses a proposal for another Safe than the one named", async function () {
      const other = await createSafe(w.ctx, devKey(0), { owners: OWNERS, threshold: 2 });
      const p = await proposalFor({ op: "create-pkp", name: "x" });
      await expectSafeError(signProposal(w.ctx, p, OWNER_KEYS[0], other), "wrong_safe");
    });

    it("refuses to execute with too few signatures", async function () {
      const p = await signProposal(w.ctx, await proposalFor({ op: "create-pkp", name: "x" }), OWNER_KEYS[0]);
      const e = await expectSafeError(executeProposal(w.ctx, p, EXECUTOR_KEY), "insufficient_signatures");
      expect(e.details).to.deep.equal({ collected: 1, threshold: 2 });
    });

    it("does not count a signature copied under another owner's name", async function () {
      const p = await signProposal(w.ctx, await proposalFor({ op: "create-pkp", name: "x" }), OWNER_KEYS[0]);
      const forged: ProposalFile = {
        ...p,
        signatures: [...p.signatures, { signer: OWNERS[1], data: p.signatures[0].data }],
      };
      expect((await proposalStatus(w.ctx, forged)).collected).to.equal(1);
      await expectSafeError(executeProposal(w.ctx, forged, EXECUTOR_KEY), "insufficient_signatures");
    });

    it("refuses to sign or execute once the Safe's nonce has moved on", async function () {
      const stale = await signProposal(
        w.ctx,
        await proposalFor({ op: "create-pkp", name: "stale" }),
        OWNER_KEYS[0],
      );
      await run({ op: "create-pkp", name: "winner" });
      await expectSafeError(signProposal(w.ctx, stale, OWNER_KEYS[1]), "stale_nonce");
      await expectSafeError(executeProposal(w.ctx, stale, EXECUTOR_KEY), "stale_nonce");
    });

    it("refuses to execute twice", async function () {
      const { proposal } = await run({ op: "create-pkp", name: "once" });
      await expectSafeError(executeProposal(w.ctx, proposal, EXECUTOR_KEY), "already_executed");
    });

    it("refuses a file whose transaction was edited after proposing", async function () {
      const p = await proposalFor({ op: "create-pkp", name: "x" });
      const edited: ProposalFile = {
        ...p,
        tx: { ...p.tx, data: encodeRegistryCall({ op: "delete-group", groupId: 1 }).data },
      };
      await expectSafeError(signProposal(w.ctx, edited, OWNER_KEYS[0]), "proposal_mismatch");
    });

    it("decodes a registry refusal before sending anything", async function () {
      const ghost = ethers.Wallet.createRandom().address;
      let p = await proposalFor({ op: "remove-key", key: ghost });
      p = await signProposal(w.ctx, await signProposal(w.ctx, p, OWNER_KEYS[0]), OWNER_KEYS[1]);
      const e = await expectSafeError(executeProposal(w.ctx, p, EXECUTOR_KEY), "execution_reverted");
      expect(e.details?.error).to.equal("UnknownKey");
      expect(e.details?.args).to.deep.equal([ghost]);
    });

    it("reports a proposal queued behind the Safe's nonce and refuses to execute it early", async function () {
      const nonce = Number(
        await new ethers.Contract(
          safe,
          ["function nonce() view returns (uint256)"],
          w.chain.provider,
        ).nonce(),
      );
      let p = await proposalFor({ op: "create-pkp", name: "later" }, nonce + 1);
      p = await signProposal(w.ctx, await signProposal(w.ctx, p, OWNER_KEYS[0]), OWNER_KEYS[1]);
      expect((await proposalStatus(w.ctx, p)).state).to.equal("queued");
      const e = await expectSafeError(executeProposal(w.ctx, p, EXECUTOR_KEY), "stale_nonce");
      expect(e.details).to.deep.equal({ proposalNonce: nonce + 1, safeNonce: nonce });
    });

    it("refuses a proposal made for another chain", async function () {
      const p = await proposalFor({ op: "create-pkp", name: "x" });
      await expectSafeError(signProposal(w.ctx, { ...p, chainId: "1" }, OWNER_KEYS[0]), "wrong_chain");
    });

    it("names an unreachable RPC endpoint", async function () {
      await expectSafeError(chainIdAt("http://127.0.0.1:1"), "rpc_unreachable");
    });

    it("refuses a file that is not a proposal", async function () {
      const file = path.join(w.dir, "not-a-proposal.json");
      fs.writeFileSync(file, JSON.stringify({ hello: "world" }));
      expect(() => readProposal(file))
        .to.throw(SafeCliError)
        .with.property("code", "invalid_proposal_file");
    });

    it("a Safe sets a group's policy with set-group-policy", async function () {
      const cid = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
      await run({ op: "set-group-policy", groupId: 1, cid });
      expect(await registry.groupPolicy(accountId, 1n)).to.equal(ethers.keccak256(ethers.toUtf8Bytes(cid)));
    });

    it("a Safe clears a group's policy with set-group-policy and an empty CID", async function () {
      await run({
        op: "set-group-policy",
        groupId: 1,
        cid: "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH",
      });
      await run({ op: "set-group-policy", groupId: 1, cid: "" });
      expect(await registry.groupPolicy(accountId, 1n)).to.equal(ethers.ZeroHash);
    });

    it("set-group-policy encodes setGroupPolicy(groupId, cid)", function () {
      const call = encodeRegistryCall({ op: "set-group-policy", groupId: "7", cid: "Qm-policy" });
      expect([call.method, call.args]).to.deep.equal(["setGroupPolicy", [7n, "Qm-policy"]]);
    });

    it("set-group-policy refuses a group id that is not a u64", function () {
      expect(() => encodeRegistryCall({ op: "set-group-policy", groupId: "-1", cid: "Qm-policy" }))
        .to.throw(SafeCliError)
        .with.property("code", "invalid_argument");
    });

    it("refuses a view as a proposal", async function () {
      expect(() => encodeRegistryCall({ op: "call", method: "getAccount", args: [1] }))
        .to.throw(SafeCliError)
        .with.property("code", "unknown_method");
    });

    it("refuses an unknown scope field", async function () {
      expect(() =>
        encodeRegistryCall({ op: "add-key", key: OWNERS[0], scopes: { execute_in_group: [1] } as never }),
      )
        .to.throw(SafeCliError)
        .with.property("code", "invalid_argument");
    });
  });
});
