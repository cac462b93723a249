/**
 * Path B: the owner's wallet revokes the trigger's usage key straight on the registry (not through the
 * service). The service follows the registry's logs; the next run fails with the refusal recorded.
 */
import { expect } from "chai";
import { Wallet } from "ethers";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEYS } from "../helpers/anvil";
import { startStack, type Stack } from "../helpers/stack";
import { eventually } from "../../testkit/eventually";
import { scopes } from "../contracts/fixtures";
import { createTrigger, waitForRun } from "./helpers";

describe("triggers: the owner revokes the usage key on chain (path B)", function () {
  this.timeout(120_000);
  let s: Stack;

  before(async () => {
    s = await startStack({ pollIntervalMs: 250, triggers: { pollMs: 50 } });
  });
  after(async () => {
    await s?.close();
  });

  it("the next run after the on-chain removal is failed with unknown_api_key", async () => {
    const registry = AccountRegistry__factory.connect(
      s.deployment.registry,
      new Wallet(DEV_KEYS[1], s.provider),
    );
    // An account the wallet owns, with an account key (to manage triggers) and a usage key, all on chain.
    const ak = s.enclave.generateAccountKey();
    await (await registry.createAccount("path-b", ak.address)).wait();
    const uk = s.enclave.generateUsageKey();
    await (await registry.addKey(uk.address, uk.keyHash, "trigger", "", 0, scopes({ Execute: [0] }))).wait();
    const pkpRc = await (await registry.createPkp("p", "")).wait();
    const pkpId: string = registry.interface.parseLog(pkpRc!.logs[0])!.args.pkpId;
    await eventually(async () => (await s.api("GET", "/core/v1/pkps", { key: uk.apiKey })).status === 200, {
      timeoutMs: 10_000,
    });
    const pinned = await s.api("POST", "/core/v1/actions", {
      key: uk.apiKey,
      body: { code: "async function main() { return 'ok'; }" },
    });
    expect(pinned.status, JSON.stringify(pinned.body)).to.equal(201);
    const gRc = await (await registry.createGroup("g", "", [pkpId], [pinned.body.cid])).wait();
    const groupId = registry.interface.parseLog(gRc!.logs[0])!.args.groupId;
    await eventually(
      async () => (await s.api("GET", `/core/v1/groups/${groupId}`, { key: uk.apiKey })).status === 200,
      { timeoutMs: 10_000 },
    );
    const a = { accountKey: ak.apiKey, cid: pinned.body.cid as string, pkpId, keyAddress: uk.address };
    await eventually(
      async () => (await s.api("GET", "/core/v1/triggers", { key: ak.apiKey })).status === 200,
      { timeoutMs: 10_000 },
    );
    const t = await createTrigger(s, a, { kind: "webhook" });

    const first = await s.api("POST", `/core/v1/triggers/${t.id}/fire`, { key: ak.apiKey, body: {} });
    const ok = await waitForRun(s, ak.apiKey, t.id, first.body.run_id);
    expect(ok.status, JSON.stringify(ok)).to.equal("succeeded");

    await (await registry.removeKey(uk.address)).wait();
    await eventually(async () => (await s.api("GET", "/core/v1/pkps", { key: uk.apiKey })).status === 401, {
      timeoutMs: 10_000,
    });
    const next = await s.api("POST", `/core/v1/triggers/${t.id}/fire`, { key: ak.apiKey, body: {} });
    const run = await waitForRun(s, ak.apiKey, t.id, next.body.run_id);
    expect([run.status, run.error.code, run.attempt]).to.deep.equal(["failed", "unknown_api_key", 1]);
  });
});
