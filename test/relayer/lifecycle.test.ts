import { expect } from "chai";
import { startStack, type Stack } from "../helpers/stack";

describe("relayer: lifecycle through HTTP", function () {
  this.timeout(60_000);
  let s: Stack;
  let accountKey: string;
  let pkpId: string;
  let cid: string;
  let groupId: number;
  let usageKey: string;
  let usageKeyId: string;

  before(async () => {
    s = await startStack();
  });
  after(async () => {
    await s?.close();
  });

  it("creates an account and returns the account key once", async () => {
    const r = await s.api("POST", "/core/v1/new_account", {
      body: { account_name: "acme", email: "ops@example.com" },
    });
    expect(r.status).to.equal(201);
    expect(r.body.api_key).to.match(/^ak_[0-9a-f]{64}$/);
    expect(r.body.account_id).to.be.a("number");
    expect(r.body.mode).to.equal("api");
    accountKey = r.body.api_key;
  });

  it("creates a PKP and reports its id, address and public key", async () => {
    const r = await s.api("POST", "/core/v1/pkps/create", { key: accountKey, body: { name: "signer" } });
    expect(r.status).to.equal(201);
    expect(r.body.pkp_id).to.match(/^0x[0-9a-f]{64}$/);
    expect(r.body.address).to.equal(s.enclave.pkpAddress(r.body.pkp_id));
    pkpId = r.body.pkp_id;
  });

  it("creates a group", async () => {
    const r = await s.api("POST", "/core/v1/groups", { key: accountKey, body: { name: "g" } });
    expect(r.status).to.equal(201);
    expect(r.body.group_id).to.equal(1);
    groupId = r.body.group_id;
  });

  it("pins an action and adds it and the PKP to the group", async () => {
    const pinned = await s.api("POST", "/core/v1/actions", {
      key: accountKey,
      body: { code: "async function main(p) { return { doubled: p.n * 2 }; }" },
    });
    expect(pinned.status).to.equal(201);
    cid = pinned.body.cid;
    const a = await s.api("POST", `/core/v1/groups/${groupId}/actions`, {
      key: accountKey,
      body: { add: [cid] },
    });
    expect(a.status).to.equal(200);
    const p = await s.api("POST", `/core/v1/groups/${groupId}/pkps`, {
      key: accountKey,
      body: { add: [pkpId] },
    });
    expect(p.status).to.equal(200);
    const g = await s.api("GET", `/core/v1/groups/${groupId}`, { key: accountKey });
    expect(g.body).to.deep.include({ group_id: groupId, pkps: [pkpId], actions: [cid] });
  });

  it("adds a usage key with execute on the group", async () => {
    const r = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "server", execute_in_groups: [groupId] },
    });
    expect(r.status).to.equal(201);
    expect(r.body.usage_api_key).to.match(/^uk_[0-9a-f]{64}$/);
    expect(r.body.can_execute_in_groups).to.deep.equal([groupId]);
    usageKey = r.body.usage_api_key;
    usageKeyId = r.body.id;
  });

  it("executes immediately with the new key", async () => {
    const r = await s.api("POST", "/core/v1/svc_action", {
      key: usageKey,
      body: { cid, pkp_id: pkpId, js_params: { n: 21 } },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.has_error).to.equal(false);
    expect(r.body.response).to.deep.equal({ doubled: 42 });
    expect(r.body.cid).to.equal(cid);
  });

  it("updates the key to no scopes, then execution is refused with 403", async () => {
    const u = await s.api("POST", "/core/v1/update_usage_api_key", {
      key: accountKey,
      body: { usage_api_key: usageKey, name: "server" },
    });
    expect(u.status).to.equal(200);
    expect(u.body.can_execute_in_groups).to.deep.equal([]);
    const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, pkp_id: pkpId } });
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal("not_authorized_to_execute");
    expect(r.body.error.message).to.contain(cid).and.contain(pkpId);
  });

  it("removes the key, then the next request is 401", async () => {
    const rm = await s.api("POST", "/core/v1/remove_usage_api_key", {
      key: accountKey,
      body: { id: usageKeyId },
    });
    expect(rm.status).to.equal(200);
    const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, pkp_id: pkpId } });
    expect(r.status).to.equal(401);
    expect(r.body.error.code).to.equal("unknown_api_key");
  });
});
