/**
 * The owner of a ChainSecured account manages its triggers with a wallet session (docs/triggers.md,
 * "Who manages triggers"): a trigger is a record of the service, never a registry write, so the
 * session that may only read everywhere else may create, fire and delete one here. The trigger still
 * runs as the usage key the chain knows.
 */
import { expect } from "chai";
import { Wallet } from "ethers";
import { encodeRegistryCall } from "../../scripts/safe/lib";
import { signRequest } from "../../sdk/index";
import { DEV_KEYS } from "../helpers/anvil";
import { ownerSession, waitForBlock, type OwnerSession } from "../helpers/siweOwner";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, waitForRun } from "./helpers";

const ECHO = "async function main(p) { return { firing: p.trigger.firing_id }; }";
const owner = new Wallet(DEV_KEYS[4]);

describe("triggers: the owner's wallet session manages them (ChainSecured)", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof accountWithKey>>;
  let session: OwnerSession;

  /** A request signed by the session key, with the sign-in message. */
  async function asOwner(method: string, route: string, body?: unknown) {
    const bytes = body === undefined ? new Uint8Array() : new TextEncoder().encode(JSON.stringify(body));
    const headers: Record<string, string> = {
      ...signRequest(
        session.key,
        { chainId: 31337, registryAddress: s.deployment.registry },
        method,
        route,
        bytes,
      ),
      "sigil-siwe": Buffer.from(session.message, "utf8").toString("base64"),
      "sigil-siwe-signature": session.signature,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    };
    const r = await fetch(s.url + route, { method, headers, body: body === undefined ? undefined : bytes });
    return { status: r.status, body: (await r.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
  }

  before(async () => {
    s = await startStack({ triggers: { pollMs: 50 } });
    // The usage key first: once the wallet owns the account, the account key writes nothing.
    a = await accountWithKey(s, ECHO);
    const t = await s.api("POST", "/core/v1/account/transfer_ownership", {
      key: a.accountKey,
      body: { new_owner: owner.address },
    });
    expect(t.status, JSON.stringify(t.body)).to.equal(200);
    const tx = await owner.connect(s.provider).sendTransaction({
      to: s.deployment.registry,
      data: encodeRegistryCall({ op: "accept-ownership", accountId: a.accountId }).data,
    });
    await waitForBlock(s.url, (await tx.wait())!.blockNumber);
    session = await ownerSession(owner, { domain: new URL(s.url).host });
  });
  after(async () => {
    await s?.close();
  });

  it("creates a trigger, fires it, sees the run succeed as the usage key, and deletes it", async () => {
    const created = await asOwner("POST", "/core/v1/triggers", {
      name: "owner's heartbeat",
      kind: "schedule",
      schedule: { cron: "*/5 * * * *" },
      cid: a.cid,
      pkp_ids: [a.pkpId],
      run_as: { key_address: a.keyAddress },
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const fired = await asOwner("POST", `/core/v1/triggers/${created.body.id}/fire`, {});
    expect(fired.status, JSON.stringify(fired.body)).to.equal(202);
    const run = await waitForRun(s, a.accountKey, created.body.id, fired.body.run_id);
    expect([run.status, run.response]).to.deep.equal(["succeeded", { firing: fired.body.firing_id }]);
    expect((await asOwner("DELETE", `/core/v1/triggers/${created.body.id}`)).status).to.equal(200);
  });

  it("still may not write anything else: a group is 403 siwe_read_only", async () => {
    const r = await asOwner("POST", "/core/v1/groups", { name: "g" });
    expect([r.status, r.body.error?.code]).to.deep.equal([403, "siwe_read_only"]);
  });
});
