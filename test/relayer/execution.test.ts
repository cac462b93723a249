/**
 * Execution details: signatures verify against the PKP's address, PKPs by address, per-key-operation
 * re-authorization (a key removed during a run cannot sign afterwards), code fetched from an IPFS gateway
 * and verified against its CID, and a saturated executor answering 503 executor_busy with Retry-After.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { Wallet, verifyMessage } from "ethers";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEYS } from "../helpers/anvil";
import { computeCid } from "../../enclave";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("relayer: execution", function () {
  this.timeout(120_000);
  let s: Stack;
  let gateway: http.Server;
  const served = new Map<string, string>();
  /** CIDs whose answer the gateway holds back until the promise settles (and who asked for them). */
  const held = new Map<string, Promise<void>>();
  const asked = new Set<string>();

  const SIGN = `async function main(p) {
    if (p.wait) await sleep(p.wait);
    return { sig: await Actions.signMessage({ pkpId: p.pkp, message: "hello" }), address: await Actions.getAddress({ pkpId: p.pkp }) };
  }`;

  before(async () => {
    gateway = http.createServer(async (req, res) => {
      const cid = (req.url ?? "").replace(/^\/ipfs\//, "");
      asked.add(cid);
      await held.get(cid);
      const body = served.get(cid);
      if (body === undefined) {
        res.statusCode = 404;
        res.end();
        return;
      }
      res.end(body);
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", () => r()));
    s = await startStack({
      ipfsGateways: [`http://127.0.0.1:${(gateway.address() as AddressInfo).port}`],
      executor: { poolSize: 1 },
      rateLimits: {
        perKeyPerMinute: 1e6,
        perAccountPerMinute: 1e6,
        newAccountPerIpPerHour: 1e6,
        concurrentExecutionsPerAccount: 1000,
      },
    });
  });
  after(async () => {
    await s?.close();
    gateway?.close();
  });

  it("a PKP signature verifies against the PKP's address; the PKP may be named by address", async () => {
    const a = await setupAccount(s, SIGN);
    const address = s.enclave.pkpAddress(a.pkpId);
    const r = await s.api("POST", "/core/v1/svc_action", {
      key: a.accountKey,
      body: { cid: a.cid, pkp_id: address, js_params: { pkp: a.pkpId } },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
    expect(r.body.response.address).to.equal(address);
    expect(verifyMessage("hello", r.body.response.sig)).to.equal(address);
  });

  it("PKP addresses resolve to their own PKP every time, inside the action too (address index)", async () => {
    const a = await setupAccount(s, SIGN);
    const second = await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "p2" } });
    expect(second.status).to.equal(201);
    const added = await s.api("POST", `/core/v1/groups/${a.groupId}/pkps`, {
      key: a.accountKey,
      body: { add: [second.body.pkp_id] },
    });
    expect(added.status, JSON.stringify(added.body)).to.equal(200);
    const ids = [a.pkpId, second.body.pkp_id as string];
    for (const id of [...ids, ...ids.slice().reverse(), ...ids]) {
      const address = s.enclave.pkpAddress(id);
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        body: { cid: a.cid, pkp_id: address, js_params: { pkp: address } },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
      expect(r.body.response.address).to.equal(address);
      expect(verifyMessage("hello", r.body.response.sig)).to.equal(address);
    }
  });

  it("the address of another account's PKP, even one resolved before, is refused (404, and inside the action)", async () => {
    const mine = await setupAccount(s, SIGN);
    const theirs = await setupAccount(s, SIGN);
    const theirAddress = s.enclave.pkpAddress(theirs.pkpId);
    // Resolved once by its owner, so the address index knows it.
    const own = await s.api("POST", "/core/v1/svc_action", {
      key: theirs.accountKey,
      body: { cid: theirs.cid, pkp_id: theirAddress, js_params: { pkp: theirAddress } },
    });
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    const r = await s.api("POST", "/core/v1/svc_action", {
      key: mine.accountKey,
      body: { cid: mine.cid, pkp_id: theirAddress, js_params: { pkp: theirAddress } },
    });
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal("pkp_not_found");
    const inside = await s.api("POST", "/core/v1/svc_action", {
      key: mine.accountKey,
      body: { cid: mine.cid, pkp_id: mine.pkpId, js_params: { pkp: theirAddress } },
    });
    expect(inside.status).to.equal(200);
    expect(inside.body.has_error).to.equal(true);
    expect(inside.body.error.code).to.equal("pkp_not_authorized");
    expect(inside.body.error.message).to.include("no PKP of this account has address");
  });

  it("an account key's run cannot sign after the account becomes ChainSecured during it", async () => {
    const a = await setupAccount(s, SIGN);
    const run = s.api("POST", "/core/v1/svc_action", {
      key: a.accountKey,
      body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId, wait: 2000 } },
    });
    await new Promise((r) => setTimeout(r, 200));
    const wallet = new Wallet(DEV_KEYS[4], s.provider);
    const t = await s.api("POST", "/core/v1/account/transfer_ownership", {
      key: a.accountKey,
      body: { new_owner: wallet.address },
    });
    expect(t.status, JSON.stringify(t.body)).to.equal(200);
    await (
      await AccountRegistry__factory.connect(s.deployment.registry, wallet).acceptOwnership(a.accountId)
    ).wait();
    const r = await run;
    expect(r.status).to.equal(200);
    expect(r.body.has_error, JSON.stringify(r.body)).to.equal(true);
    expect(r.body.error.code).to.equal("pkp_not_authorized");
    expect(r.body.error.message).to.include("ChainSecured");
  });

  it("a key removed while its action runs cannot sign afterwards", async () => {
    const a = await setupAccount(s, SIGN);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "k", execute_in_groups: [a.groupId] },
    });
    const run = s.api("POST", "/core/v1/svc_action", {
      key: k.body.usage_api_key,
      body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId, wait: 1500 } },
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(
      (await s.api("POST", "/core/v1/remove_usage_api_key", { key: a.accountKey, body: { id: k.body.id } }))
        .status,
    ).to.equal(200);
    const r = await run;
    expect(r.status).to.equal(200);
    expect(r.body.has_error).to.equal(true);
    expect(r.body.response ?? null).to.equal(null);
  });

  it("a key whose expiration is brought forward while its execution is admitted cannot sign after it", async () => {
    const a = await setupAccount(s);
    // Not pinned: the relayer fetches it from the gateway after authenticating the request.
    const code = `async function main(p) {
      await sleep(p.wait);
      return await Actions.signMessage({ pkpId: p.pkp, message: "after the expiration" });
    }`;
    const cid = await computeCid(new TextEncoder().encode(code));
    served.set(cid, code);
    await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, { key: a.accountKey, body: { add: [cid] } });
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "k", execute_in_groups: [a.groupId] },
    });
    expect(k.status, JSON.stringify(k.body)).to.equal(201);
    let release = () => {};
    held.set(cid, new Promise<void>((r) => (release = r)));
    // Authenticated with no expiration, then held while its code is fetched.
    const run = s.api("POST", "/core/v1/svc_action", {
      key: k.body.usage_api_key,
      body: { cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId, wait: 5_000 } },
    });
    const deadline = Date.now() + 10_000;
    while (!asked.has(cid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(asked.has(cid)).to.equal(true);
    // Meanwhile the key gets an expiration 3 s from now; the action signs after it.
    const updated = await s.api("POST", "/core/v1/update_usage_api_key", {
      key: a.accountKey,
      body: {
        id: k.body.id,
        name: "k",
        expiration: Math.floor(Date.now() / 1000) + 3,
        execute_in_groups: [a.groupId],
      },
    });
    expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
    release();
    const r = await run;
    expect(r.status).to.equal(200);
    expect(r.body.has_error, JSON.stringify(r.body)).to.equal(true);
    expect(r.body.error.code).to.equal("pkp_not_authorized");
  });

  it("code by CID comes from an IPFS gateway when not pinned, verified against the CID", async () => {
    const a = await setupAccount(s);
    const code = "async function main() { return 'from ipfs'; }";
    const cid = await computeCid(new TextEncoder().encode(code));
    served.set(cid, code);
    await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, { key: a.accountKey, body: { add: [cid] } });
    const r = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid } });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.response).to.equal("from ipfs");
    const got = await s.api("GET", `/core/v1/actions/${cid}`, { key: a.accountKey });
    expect(got.body.code).to.equal(code);
  });

  it("a gateway serving content that does not match the CID is refused: 502 action_fetch_failed", async () => {
    const a = await setupAccount(s);
    const cid = await computeCid(new TextEncoder().encode("async function main() { return 'genuine'; }"));
    served.set(cid, "async function main() { return 'forged'; }");
    await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, { key: a.accountKey, body: { add: [cid] } });
    const r = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid } });
    expect(r.status).to.equal(502);
    expect(r.body.error.code).to.equal("action_fetch_failed");
  });

  it("a saturated executor answers 503 executor_busy with Retry-After, and recovers", async () => {
    const a = await setupAccount(s, "async function main() { await sleep(60); return 1; }");
    const rs = await Promise.all(
      Array.from({ length: 45 }, () =>
        s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: a.cid } }),
      ),
    );
    const busy = rs.filter((r) => r.status === 503);
    expect(busy.length).to.be.greaterThan(0);
    expect(busy[0].body.error.code).to.equal("executor_busy");
    expect(Number(busy[0].headers.get("retry-after"))).to.be.greaterThan(0);
    expect(rs.filter((r) => r.status === 200).length + busy.length).to.equal(45);
    expect(
      (await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: a.cid } })).status,
    ).to.equal(200);
  });
});
