/**
 * Path B with a Safe as the owner, end to end: a ChainSecured account owned by a real 2-of-3 Safe on
 * anvil, a usage key that executes in the Safe's group, and an action that signs two messages. The Safe
 * (two owners' signatures, executed on chain through the Safe; the relayer takes no part in the write)
 * sets a policy that allows only one of them; once the relayer has followed the `GroupPolicySet` event,
 * the next run's signature outside the policy is refused with `policy_denied` naming the rule, while the
 * allowed one still signs. The Safe then clears the policy and both sign again.
 */
import { expect } from "chai";
import { ethers } from "ethers";
import { computeCid } from "../../enclave";
import { generateUsageKey } from "../../scripts/safe/lib";
import { createSafeOwner, safeAccountWithGroup, type SafeOwner } from "../helpers/safeOwner";
import { AccountRegistry__factory } from "../../typechain-types";
import { sigilWorld, type SigilWorld } from "../safe/support";

const ALLOWED = "login: 1";
const OUTSIDE = "pay me";
const GROUP_ID = 1; // the account's first group

/** Signs each message; a refusal is returned as its code and message instead of failing the run. */
const CODE = `async function main(p) {
  const out = {};
  for (const m of p.messages) {
    try { out[m] = { signature: await Actions.signMessage({ pkpId: p.pkp, message: m }) }; }
    catch (e) { out[m] = { code: e.code, message: e.message }; }
  }
  return out;
}`;

const LOGIN_ONLY = {
  version: 1,
  rules: [{ name: "login-only", effect: "allow", operation: "message", prefix: "login:" }],
};

const SIGNATURE = /^0x[0-9a-f]{130}$/;

interface Outcome {
  signature?: string;
  code?: string;
  message?: string;
}

describe("signing policies, path B: a Safe owner sets and clears a group's policy", function () {
  this.timeout(180_000);
  let w: SigilWorld;
  let safe: SafeOwner;
  let pkpId: string;
  let usageKey: string;
  let policyCid: string;

  const run = async (): Promise<Record<string, Outcome>> => {
    const r = await w.api.post("/svc_action", usageKey, {
      code: CODE,
      pkp_id: pkpId,
      js_params: { pkp: pkpId, messages: [ALLOWED, OUTSIDE] },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
    return r.body.response;
  };

  /** The relayer has followed the chain up to the Safe's write, and the group answers `cid`. */
  const waitForPolicy = async (blockNumber: number, cid: string | null) => {
    await w.api.waitForBlock(blockNumber);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const g = await w.api.get(`/groups/${GROUP_ID}`, usageKey);
      if (g.status === 200 && g.body.policy_cid === cid) return;
      if (Date.now() > deadline)
        throw new Error(`group ${GROUP_ID} still answers ${JSON.stringify(g.body)}, not policy_cid ${cid}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  before(async function () {
    w = await sigilWorld();
    safe = await createSafeOwner(w.ctx, w.registry);
    const cid = await computeCid(new TextEncoder().encode(CODE));
    ({ pkpId } = await safeAccountWithGroup(safe, w.registry, w.chain.provider, "safe-policy", [cid]));
    const key = generateUsageKey();
    const added = await safe.tx({
      op: "add-key",
      key: key.address,
      keyHash: key.keyHash,
      name: "runner",
      scopes: { execute_in_groups: [GROUP_ID] },
    });
    usageKey = key.usageApiKey;
    await w.api.waitForBlock(added.blockNumber);
    const up = await w.api.post("/policies", usageKey, { policy: LOGIN_ONLY });
    expect(up.status, JSON.stringify(up.body)).to.equal(201);
    policyCid = up.body.cid;
  });
  after(async function () {
    await w?.stopAll();
  });

  it("the Safe is the account's owner and the group starts without a policy", async function () {
    const registry = AccountRegistry__factory.connect(w.registry, w.chain.provider);
    expect((await registry.getAccount(await registry.accountOfOwner(safe.address))).owner).to.equal(
      safe.address,
    );
    const g = await w.api.get(`/groups/${GROUP_ID}`, usageKey);
    expect(g.status, JSON.stringify(g.body)).to.equal(200);
    expect(g.body.policy_cid).to.equal(null);
  });

  it("without a policy the run signs both messages", async function () {
    const out = await run();
    expect(out[ALLOWED].signature, JSON.stringify(out)).to.match(SIGNATURE);
    expect(out[OUTSIDE].signature, JSON.stringify(out)).to.match(SIGNATURE);
  });

  it("the Safe sets the policy on chain and the relayer follows it", async function () {
    const { blockNumber } = await safe.tx({ op: "set-group-policy", groupId: GROUP_ID, cid: policyCid });
    await waitForPolicy(blockNumber, policyCid);
  });

  it("the next run's signature outside the policy is refused with policy_denied naming the rule", async function () {
    const out = await run();
    expect(out[OUTSIDE].signature, JSON.stringify(out)).to.equal(undefined);
    expect(out[OUTSIDE].code).to.equal("policy_denied");
    expect(out[OUTSIDE].message).to.contain("rule login-only");
    expect(out[OUTSIDE].message).to.contain(`group ${GROUP_ID}`);
  });

  it("the signature the policy allows still signs, and recovers to the PKP's address", async function () {
    const out = await run();
    expect(out[ALLOWED].signature, JSON.stringify(out)).to.match(SIGNATURE);
    expect(ethers.verifyMessage(ALLOWED, out[ALLOWED].signature!)).to.equal(w.enclave.pkpAddress(pkpId));
  });

  it("the Safe clears the policy on chain and both messages sign again", async function () {
    const { blockNumber } = await safe.tx({ op: "set-group-policy", groupId: GROUP_ID, cid: "" });
    await waitForPolicy(blockNumber, null);
    const out = await run();
    expect(out[ALLOWED].signature, JSON.stringify(out)).to.match(SIGNATURE);
    expect(out[OUTSIDE].signature, JSON.stringify(out)).to.match(SIGNATURE);
  });
});
