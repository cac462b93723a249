/**
 * docs/background.md §5.4 through HTTP: every scope granted and denied (status and code), owner-only operations refused
 * to usage keys whatever they hold, the wildcard 0 in all four arrays, and cross-account isolation.
 */
import { expect } from "chai";
import { setupAccount, startStack, type ApiResponse, type Stack } from "../helpers/stack";

const ALL = {
  can_create_groups: true,
  can_delete_groups: true,
  can_create_pkps: true,
  manage_ipfs_ids_in_groups: [0],
  add_pkp_to_groups: [0],
  remove_pkp_from_groups: [0],
  execute_in_groups: [0],
};

describe("relayer: docs/background.md §5.4 permission matrix over HTTP", function () {
  this.timeout(120_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let otherGroup: number;
  let spareCid: string;

  const key = async (perms: Record<string, unknown>) => {
    const r = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "k", ...perms },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.usage_api_key as string;
  };
  const expectError = (r: ApiResponse, status: number, code: string) => {
    expect(r.status, JSON.stringify(r.body)).to.equal(status);
    expect(r.body.error.code).to.equal(code);
  };

  before(async () => {
    s = await startStack();
    a = await setupAccount(s);
    const g2 = await s.api("POST", "/core/v1/groups", { key: a.accountKey, body: { name: "other" } });
    otherGroup = g2.body.group_id;
    spareCid = (
      await s.api("POST", "/core/v1/actions", {
        key: a.accountKey,
        body: { code: "async function main() { return 2; }" },
      })
    ).body.cid;
  });
  after(async () => {
    await s?.close();
  });

  describe("execute(group)", () => {
    it("granted on the group: 200", async () => {
      const k = await key({ execute_in_groups: [a.groupId] });
      const r = await s.api("POST", "/core/v1/svc_action", { key: k, body: { cid: a.cid, pkp_id: a.pkpId } });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.response).to.deep.equal({ hello: "world" });
    });
    it("granted on another group only: 403 not_authorized_to_execute", async () => {
      const k = await key({ execute_in_groups: [otherGroup] });
      expectError(
        await s.api("POST", "/core/v1/svc_action", { key: k, body: { cid: a.cid, pkp_id: a.pkpId } }),
        403,
        "not_authorized_to_execute",
      );
    });
    it("wildcard 0: 200", async () => {
      const k = await key({ execute_in_groups: [0] });
      expect((await s.api("POST", "/core/v1/svc_action", { key: k, body: { cid: a.cid } })).status).to.equal(
        200,
      );
    });
    it("the account key executes in its own groups (API mode)", async () => {
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        body: { cid: a.cid, pkp_id: a.pkpId, js_params: { who: "owner" } },
      });
      expect(r.status).to.equal(200);
      expect(r.body.response).to.deep.equal({ hello: "owner" });
    });
    it("the account key runs a pinned CID listed in no group (owner-direct): 200", async () => {
      const r = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: spareCid } });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.response).to.equal(2);
    });
    it("a usage key may not run that CID: 403 not_authorized_to_execute naming the group and the command", async () => {
      const k = await key({ execute_in_groups: [a.groupId] });
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: k,
        body: { cid: spareCid, pkp_id: a.pkpId },
      });
      expectError(r, 403, "not_authorized_to_execute");
      expect(r.body.error.details).to.include({
        group_id: a.groupId,
        command: `npx sigil groups add ${a.groupId} --action ${spareCid}`,
      });
      expect(r.body.error.message).to.contain(`npx sigil groups add ${a.groupId} --action ${spareCid}`);
    });
    it("a usage key with no execute scope is told to be granted one", async () => {
      const k = await key({ can_create_pkps: true });
      const r = await s.api("POST", "/core/v1/svc_action", { key: k, body: { cid: a.cid } });
      expectError(r, 403, "not_authorized_to_execute");
      expect(r.body.error.details.missing).to.deep.equal(["execute"]);
      expect(r.body.error.details.command).to.match(/^npx sigil keys update 0x[0-9a-fA-F]{40} .*--execute/);
    });
  });

  describe("execute: owner-direct with a PKP in no group", () => {
    let loosePkp: string;
    const signingCode = `async function main() {
      return await Actions.signMessage({ pkpId: "LOOSE", message: "hi" });
    }`;
    before(async () => {
      loosePkp = (await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: {} })).body.pkp_id;
    });
    it("the account key runs unpinned inline code with its own PKP: 200 and a signature", async () => {
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        body: { code: signingCode.replace("LOOSE", loosePkp), pkp_id: loosePkp },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
      expect(r.body.response).to.match(/^0x[0-9a-f]{130}$/);
    });
    it("the account key naming another account's PKP is refused: 403 not_authorized_to_execute", async () => {
      const b = await setupAccount(s);
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        body: { code: "async function main() { return 1; }", pkp_id: b.pkpId },
      });
      expectError(r, 403, "not_authorized_to_execute");
    });
    it("inside an owner's run, signing with another account's PKP fails: pkp_not_authorized", async () => {
      const b = await setupAccount(s);
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        body: { code: signingCode.replace("LOOSE", b.pkpId) },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.has_error).to.equal(true);
      expect(r.body.error.code).to.equal("pkp_not_authorized");
    });
    it("a usage key that may execute in the group keeps the group rule for that PKP: 403", async () => {
      const k = await key({ execute_in_groups: [a.groupId] });
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: k,
        body: { cid: a.cid, pkp_id: loosePkp },
      });
      expectError(r, 403, "not_authorized_to_execute");
      expect(r.body.error.details.command).to.equal(`npx sigil groups add ${a.groupId} --pkp ${loosePkp}`);
    });
  });

  describe("pkp:create", () => {
    it("granted: 201", async () => {
      const k = await key({ can_create_pkps: true });
      expect((await s.api("POST", "/core/v1/pkps/create", { key: k, body: {} })).status).to.equal(201);
    });
    it("denied: 403 missing_scope naming pkp:create", async () => {
      const k = await key({ execute_in_groups: [0] });
      const r = await s.api("POST", "/core/v1/pkps/create", { key: k, body: {} });
      expectError(r, 403, "missing_scope");
      expect(r.body.error.details).to.deep.equal({ scope: "pkp:create", group_id: 0 });
    });
  });

  describe("group:create", () => {
    it("granted: 201", async () => {
      const k = await key({ can_create_groups: true });
      expect((await s.api("POST", "/core/v1/groups", { key: k, body: { name: "by key" } })).status).to.equal(
        201,
      );
    });
    it("denied: 403 missing_scope naming group:create", async () => {
      const k = await key({ can_create_pkps: true });
      const r = await s.api("POST", "/core/v1/groups", { key: k, body: { name: "x" } });
      expectError(r, 403, "missing_scope");
      expect(r.body.error.details.scope).to.equal("group:create");
    });
    it("initial members need the wildcard addPkp scope", async () => {
      const k = await key({ can_create_groups: true });
      const r = await s.api("POST", "/core/v1/groups", { key: k, body: { name: "x", pkps: [a.pkpId] } });
      expectError(r, 403, "missing_scope");
      expect(r.body.error.details).to.deep.equal({ scope: "group:addPkp", group_id: 0 });
    });
  });

  describe("group:delete", () => {
    it("granted: 200, and the group is gone", async () => {
      const g = (await s.api("POST", "/core/v1/groups", { key: a.accountKey, body: { name: "tmp" } })).body
        .group_id;
      const k = await key({ can_delete_groups: true });
      expect((await s.api("DELETE", `/core/v1/groups/${g}`, { key: k })).status).to.equal(200);
      expectError(await s.api("GET", `/core/v1/groups/${g}`, { key: a.accountKey }), 404, "group_not_found");
    });
    it("denied: 403 missing_scope naming group:delete", async () => {
      const k = await key({ can_create_groups: true });
      const r = await s.api("DELETE", `/core/v1/groups/${otherGroup}`, { key: k });
      expectError(r, 403, "missing_scope");
      expect(r.body.error.details.scope).to.equal("group:delete");
    });
  });

  describe("group:manageActions(group)", () => {
    it("granted on the group: 200", async () => {
      const k = await key({ manage_ipfs_ids_in_groups: [otherGroup] });
      const r = await s.api("POST", `/core/v1/groups/${otherGroup}/actions`, {
        key: k,
        body: { add: [spareCid] },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.actions).to.include(spareCid);
      expect(
        (
          await s.api("POST", `/core/v1/groups/${otherGroup}/actions`, {
            key: k,
            body: { remove: [spareCid] },
          })
        ).status,
      ).to.equal(200);
    });
    it("granted on another group: 403 missing_scope naming the group", async () => {
      const k = await key({ manage_ipfs_ids_in_groups: [a.groupId] });
      const r = await s.api("POST", `/core/v1/groups/${otherGroup}/actions`, {
        key: k,
        body: { add: [spareCid] },
      });
      expectError(r, 403, "missing_scope");
      expect(r.body.error.details).to.deep.equal({ scope: "group:manageActions", group_id: otherGroup });
    });
    it("wildcard 0 works for manageActions too (reference gap 7, docs/background.md)", async () => {
      const k = await key({ manage_ipfs_ids_in_groups: [0] });
      expect(
        (await s.api("POST", `/core/v1/groups/${otherGroup}/actions`, { key: k, body: { add: [spareCid] } }))
          .status,
      ).to.equal(200);
      expect(
        (
          await s.api("POST", `/core/v1/groups/${otherGroup}/actions`, {
            key: k,
            body: { remove: [spareCid] },
          })
        ).status,
      ).to.equal(200);
    });
  });

  describe("group:addPkp / group:removePkp(group)", () => {
    it("addPkp granted: 200; removePkp granted: 200", async () => {
      const add = await key({ add_pkp_to_groups: [otherGroup] });
      expect(
        (await s.api("POST", `/core/v1/groups/${otherGroup}/pkps`, { key: add, body: { add: [a.pkpId] } }))
          .status,
      ).to.equal(200);
      const rm = await key({ remove_pkp_from_groups: [0] });
      expect(
        (await s.api("POST", `/core/v1/groups/${otherGroup}/pkps`, { key: rm, body: { remove: [a.pkpId] } }))
          .status,
      ).to.equal(200);
    });
    it("addPkp denied: 403 missing_scope naming group:addPkp", async () => {
      const k = await key({ remove_pkp_from_groups: [0] });
      const r = await s.api("POST", `/core/v1/groups/${otherGroup}/pkps`, {
        key: k,
        body: { add: [a.pkpId] },
      });
      expectError(r, 403, "missing_scope");
      expect(r.body.error.details).to.deep.equal({ scope: "group:addPkp", group_id: otherGroup });
    });
    it("removePkp denied: 403 missing_scope naming group:removePkp", async () => {
      const k = await key({ add_pkp_to_groups: [0] });
      const r = await s.api("POST", `/core/v1/groups/${a.groupId}/pkps`, {
        key: k,
        body: { remove: [a.pkpId] },
      });
      expectError(r, 403, "missing_scope");
      expect(r.body.error.details).to.deep.equal({ scope: "group:removePkp", group_id: a.groupId });
    });
  });

  describe("owner-only operations refused to a usage key holding every scope", () => {
    let broad: string;
    let victimId: string;
    before(async () => {
      broad = await key(ALL);
      const victim = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "victim" },
      });
      victimId = victim.body.id;
    });
    const cases: Array<[string, string, () => unknown]> = [
      ["POST", "/core/v1/add_usage_api_key", () => ({ name: "x" })],
      ["GET", "/core/v1/list_api_keys", () => undefined],
      ["POST", "/core/v1/update_usage_api_key", () => ({ id: victimId, ...ALL })],
      ["POST", "/core/v1/update_usage_api_key_metadata", () => ({ id: victimId, name: "y" })],
      ["POST", "/core/v1/remove_usage_api_key", () => ({ id: victimId })],
      [
        "POST",
        "/core/v1/account/transfer_ownership",
        () => ({ new_owner: "0x000000000000000000000000000000000000dEaD" }),
      ],
      ["POST", "/core/v1/account/cancel_ownership_transfer", () => ({})],
    ];
    for (const [method, route, body] of cases) {
      it(`${method} ${route}: 403 owner_only`, async () => {
        expectError(await s.api(method, route, { key: broad, body: body() }), 403, "owner_only");
      });
    }
    it("a usage key cannot rewrite its own scopes (reference gap 1, docs/background.md)", async () => {
      const narrow = await key({ execute_in_groups: [a.groupId] });
      expectError(
        await s.api("POST", "/core/v1/update_usage_api_key", {
          key: narrow,
          body: { usage_api_key: narrow, ...ALL },
        }),
        403,
        "owner_only",
      );
    });
  });

  describe("cross-account isolation", () => {
    let b: Awaited<ReturnType<typeof setupAccount>>;
    let bBroad: string;
    before(async () => {
      b = await setupAccount(s);
      const r = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: b.accountKey,
        body: { name: "b", ...ALL },
      });
      bBroad = r.body.usage_api_key;
    });
    it("another account's key cannot execute this account's CID with its PKP", async () => {
      expectError(
        await s.api("POST", "/core/v1/svc_action", { key: bBroad, body: { cid: a.cid, pkp_id: a.pkpId } }),
        403,
        "not_authorized_to_execute",
      );
    });
    it("another account's group ids resolve in the caller's own account only", async () => {
      const r = await s.api("GET", `/core/v1/groups/${otherGroup}`, { key: b.accountKey });
      expectError(r, 404, "group_not_found");
    });
    it("another account's PKP cannot be added to a group", async () => {
      expectError(
        await s.api("POST", `/core/v1/groups/${b.groupId}/pkps`, { key: bBroad, body: { add: [a.pkpId] } }),
        404,
        "pkp_not_found",
      );
    });
    it("another account's usage key cannot be removed", async () => {
      const aKey = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "a-only" },
      });
      expectError(
        await s.api("POST", "/core/v1/remove_usage_api_key", {
          key: b.accountKey,
          body: { id: aKey.body.id },
        }),
        404,
        "usage_key_not_found",
      );
    });
    it("lists show only the caller's own resources", async () => {
      const pk = await s.api("GET", "/core/v1/pkps", { key: b.accountKey });
      expect(pk.body.items.map((x: { pkp_id: string }) => x.pkp_id)).to.deep.equal([b.pkpId]);
    });
  });
});
