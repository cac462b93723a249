/**
 * Graduation from API mode to ChainSecured mode exactly as docs/background.md §5.5, end to end on a real chain (anvil),
 * with a real 2-of-3 Safe and the real relayer:
 *   1. deploy the governance Safe;  2. the API-mode owner starts transferOwnership(safe) over HTTP with
 *   the account key;  3. the Safe accepts;  4. the Safe creates restricted keys (server: execute(1);
 *   onboarding: pkp:create + addPkp(1));  5. the Safe revokes the old broad key.
 * Then every row of the ChainSecured permission picture is checked, one behaviour per `it`.
 */
import { expect } from "chai";
import { ethers } from "ethers";
import {
  decodeRegistryError,
  generateUsageKey,
  type LocalUsageKey,
  type RegistryOp,
} from "../../scripts/safe/lib";
import { createSafeOwner, type SafeOwner } from "../helpers/safeOwner";
import { AccountRegistry__factory, type AccountRegistry } from "../../typechain-types";
import { sigilWorld, type ApiResponse, type SigilWorld } from "./support";

const ACTION_1 = "async function main() { return 'group one'; }";
const ACTION_2 = "async function main() { return 'group two'; }";

function expectError(r: ApiResponse, status: number, code: string): void {
  expect({ status: r.status, code: r.body?.error?.code }).to.deep.equal({ status, code });
}

describe("graduation to ChainSecured mode (docs/background.md §5.5)", function () {
  this.timeout(120_000);
  let w: SigilWorld;
  let registry: AccountRegistry;
  let accountKey: string;
  let accountId: number;
  let broadKey: string;
  let safeOwner: SafeOwner;
  let safe: string;
  let server: LocalUsageKey;
  let onboarding: LocalUsageKey;
  let cid1: string;
  let cid2: string;
  let pkp1: string;
  let pkp2: string;
  let whilePending: { listKeys: number; mode: string; pendingOwner: string };

  /** One Safe transaction: propose, two owners sign, any funded key executes; the relayer then catches up. */
  async function safeTx(op: RegistryOp): Promise<{ blockNumber: number }> {
    const r = await safeOwner.tx(op);
    await w.api.waitForBlock(r.blockNumber);
    return r;
  }

  before(async function () {
    w = await sigilWorld();
    registry = AccountRegistry__factory.connect(w.registry, w.chain.provider);

    // API mode: the account, a broad key, two groups each with an action and a PKP.
    const acct = await w.api.post("/new_account", undefined, {
      account_name: "acme",
      account_description: "",
    });
    expect(acct.status).to.equal(201);
    [accountKey, accountId] = [acct.body.api_key, acct.body.account_id];
    const broad = await w.api.post("/add_usage_api_key", accountKey, {
      name: "broad",
      can_create_groups: true,
      can_delete_groups: true,
      can_create_pkps: true,
      manage_ipfs_ids_in_groups: [0],
      add_pkp_to_groups: [0],
      remove_pkp_from_groups: [0],
      execute_in_groups: [0],
    });
    broadKey = broad.body.usage_api_key;
    cid1 = (await w.api.post("/actions", broadKey, { code: ACTION_1 })).body.cid;
    cid2 = (await w.api.post("/actions", broadKey, { code: ACTION_2 })).body.cid;
    pkp1 = (await w.api.post("/pkps/create", broadKey, { name: "pkp1", description: "" })).body.pkp_id;
    pkp2 = (await w.api.post("/pkps/create", broadKey, { name: "pkp2", description: "" })).body.pkp_id;
    expect(
      (await w.api.post("/groups", broadKey, { name: "one", description: "", pkps: [pkp1], actions: [cid1] }))
        .body.group_id,
    ).to.equal(1);
    expect(
      (await w.api.post("/groups", broadKey, { name: "two", description: "", pkps: [pkp2], actions: [cid2] }))
        .body.group_id,
    ).to.equal(2);

    // 1. The governance wallet.
    safeOwner = await createSafeOwner(w.ctx, w.registry);
    safe = safeOwner.address;
    // 2. The current owner authorizes transferOwnership(safe) with the account key.
    const transfer = await w.api.post("/account/transfer_ownership", accountKey, { new_owner: safe });
    expect(transfer.status).to.equal(200);
    const account = await w.api.get("/account", accountKey);
    whilePending = {
      listKeys: (await w.api.get("/list_api_keys", accountKey)).status,
      mode: account.body.mode,
      pendingOwner: account.body.pending_owner,
    };
    // 3. The Safe accepts and becomes owner.
    await safeTx({ op: "accept-ownership", accountId });
    // 4. Restricted keys, made locally; only their addresses and hashes go on chain.
    server = generateUsageKey();
    onboarding = generateUsageKey();
    await safeTx({
      op: "add-key",
      key: server.address,
      keyHash: server.keyHash,
      name: "server",
      scopes: { execute_in_groups: [1] },
    });
    await safeTx({
      op: "add-key",
      key: onboarding.address,
      keyHash: onboarding.keyHash,
      name: "onboarding",
      scopes: { can_create_pkps: true, add_pkp_to_groups: [1] },
    });
    // 5. The old broad key is revoked.
    await safeTx({ op: "remove-key", key: broad.body.id });
  });
  after(async function () {
    await w?.stopAll();
  });

  describe("ownership", function () {
    it("nothing changed while the transfer was only pending", async function () {
      expect(whilePending).to.deep.equal({ listKeys: 200, mode: "api", pendingOwner: safe });
    });

    it("the Safe owns the account on chain", async function () {
      const a = await registry.getAccount(accountId);
      expect([a.owner, a.pendingOwner]).to.deep.equal([safe, ethers.ZeroAddress]);
    });

    it("the relayer reports the account as chain_secured", async function () {
      const r = await w.api.get("/account", server.usageApiKey);
      expect([r.body.mode, r.body.owner_address]).to.deep.equal(["chain_secured", safe]);
    });

    it("a single Safe owner acting alone is nobody to the registry", async function () {
      const wallet = new ethers.Wallet(safeOwner.ownerKeys[0], w.chain.provider);
      const err = await registry
        .connect(wallet)
        .createGroup.staticCall("solo", "", [], [])
        .then(
          () => null,
          (e: { data?: string }) => e,
        );
      expect(decodeRegistryError(err?.data)?.name).to.equal("NoAccount");
    });
  });

  describe("the account key after graduation", function () {
    it("cannot add usage keys (409 account_chain_secured)", async function () {
      expectError(
        await w.api.post("/add_usage_api_key", accountKey, { name: "sneaky", execute_in_groups: [0] }),
        409,
        "account_chain_secured",
      );
    });

    it("cannot remove usage keys", async function () {
      expectError(
        await w.api.post("/remove_usage_api_key", accountKey, { usage_api_key: server.usageApiKey }),
        409,
        "account_chain_secured",
      );
    });

    it("cannot update usage keys", async function () {
      expectError(
        await w.api.post("/update_usage_api_key", accountKey, {
          usage_api_key: server.usageApiKey,
          name: "x",
          execute_in_groups: [0],
        }),
        409,
        "account_chain_secured",
      );
    });

    it("cannot list usage keys", async function () {
      expectError(await w.api.get("/list_api_keys", accountKey), 409, "account_chain_secured");
    });

    it("cannot transfer ownership back", async function () {
      expectError(
        await w.api.post("/account/transfer_ownership", accountKey, {
          new_owner: ethers.Wallet.createRandom().address,
        }),
        409,
        "account_chain_secured",
      );
    });

    it("cannot create groups", async function () {
      expectError(
        await w.api.post("/groups", accountKey, { name: "x", description: "", pkps: [], actions: [] }),
        409,
        "account_chain_secured",
      );
    });

    it("cannot execute", async function () {
      expectError(
        await w.api.post("/svc_action", accountKey, { cid: cid1, pkp_id: pkp1 }),
        409,
        "account_chain_secured",
      );
    });

    it("cannot delete groups", async function () {
      expectError(await w.api.call("DELETE", "/groups/2", accountKey), 409, "account_chain_secured");
    });

    it("cannot change a group's actions", async function () {
      expectError(
        await w.api.post("/groups/1/actions", accountKey, { add: [cid2] }),
        409,
        "account_chain_secured",
      );
    });

    it("cannot remove PKPs from a group", async function () {
      expectError(
        await w.api.post("/groups/1/pkps", accountKey, { remove: [pkp1] }),
        409,
        "account_chain_secured",
      );
    });
  });

  describe("the old broad key", function () {
    it("is refused (401 unknown_api_key)", async function () {
      expectError(
        await w.api.post("/svc_action", broadKey, { cid: cid1, pkp_id: pkp1 }),
        401,
        "unknown_api_key",
      );
    });
  });

  describe("the server key: execute(1) only", function () {
    it("executes in group 1", async function () {
      const r = await w.api.post("/svc_action", server.usageApiKey, { cid: cid1, pkp_id: pkp1 });
      expect([r.status, r.body.has_error, r.body.response]).to.deep.equal([200, false, "group one"]);
    });

    it("cannot execute in group 2", async function () {
      expectError(
        await w.api.post("/svc_action", server.usageApiKey, { cid: cid2, pkp_id: pkp2 }),
        403,
        "not_authorized_to_execute",
      );
    });

    it("cannot create a PKP", async function () {
      expectError(
        await w.api.post("/pkps/create", server.usageApiKey, { name: "x", description: "" }),
        403,
        "missing_scope",
      );
    });

    it("cannot add a PKP to group 1", async function () {
      expectError(
        await w.api.post("/groups/1/pkps", server.usageApiKey, { add: [pkp2] }),
        403,
        "missing_scope",
      );
    });

    it("cannot change group 1's actions", async function () {
      expectError(
        await w.api.post("/groups/1/actions", server.usageApiKey, { add: [cid2] }),
        403,
        "missing_scope",
      );
    });

    it("cannot create a group", async function () {
      expectError(
        await w.api.post("/groups", server.usageApiKey, {
          name: "x",
          description: "",
          pkps: [],
          actions: [],
        }),
        403,
        "missing_scope",
      );
    });

    it("cannot manage keys", async function () {
      expectError(
        await w.api.post("/add_usage_api_key", server.usageApiKey, { name: "x", execute_in_groups: [0] }),
        403,
        "owner_only",
      );
    });
  });

  describe("the onboarding key: pkp:create + addPkp(1) only", function () {
    let fresh: string;

    it("creates a PKP", async function () {
      const r = await w.api.post("/pkps/create", onboarding.usageApiKey, {
        name: "new user",
        description: "",
      });
      expect(r.status).to.equal(201);
      fresh = r.body.pkp_id;
    });

    it("adds the new PKP to group 1", async function () {
      const r = await w.api.post("/groups/1/pkps", onboarding.usageApiKey, { add: [fresh] });
      expect([r.status, r.body.pkps.includes(fresh)]).to.deep.equal([200, true]);
    });

    it("cannot add a PKP to group 2", async function () {
      expectError(
        await w.api.post("/groups/2/pkps", onboarding.usageApiKey, { add: [fresh] }),
        403,
        "missing_scope",
      );
    });

    it("cannot remove a PKP from group 1", async function () {
      expectError(
        await w.api.post("/groups/1/pkps", onboarding.usageApiKey, { remove: [fresh] }),
        403,
        "missing_scope",
      );
    });

    it("cannot execute", async function () {
      expectError(
        await w.api.post("/svc_action", onboarding.usageApiKey, { cid: cid1, pkp_id: pkp1 }),
        403,
        "not_authorized_to_execute",
      );
    });

    it("cannot change actions", async function () {
      expectError(
        await w.api.post("/groups/1/actions", onboarding.usageApiKey, { add: [cid2] }),
        403,
        "missing_scope",
      );
    });

    it("cannot create a group", async function () {
      expectError(
        await w.api.post("/groups", onboarding.usageApiKey, {
          name: "x",
          description: "",
          pkps: [],
          actions: [],
        }),
        403,
        "missing_scope",
      );
    });

    it("cannot delete a group", async function () {
      expectError(await w.api.call("DELETE", "/groups/2", onboarding.usageApiKey), 403, "missing_scope");
    });
  });

  describe("structural changes are Safe transactions", function () {
    it("the Safe creates a group", async function () {
      await safeTx({ op: "create-group", name: "three" });
      const r = await w.api.get("/groups/3", server.usageApiKey);
      expect([r.status, r.body.name]).to.deep.equal([200, "three"]);
    });

    it("the Safe adds an action to a group", async function () {
      await safeTx({ op: "add-action", groupId: 1, cid: cid2 });
      expect((await w.api.get("/groups/1", server.usageApiKey)).body.actions).to.include(cid2);
    });

    it("the Safe removes an action from a group", async function () {
      await safeTx({ op: "remove-action", groupId: 1, cid: cid2 });
      expect((await w.api.get("/groups/1", server.usageApiKey)).body.actions).to.not.include(cid2);
    });

    it("the Safe removes a PKP from a group, and execution with it stops", async function () {
      await safeTx({ op: "remove-pkp", groupId: 1, pkpId: pkp1 });
      expect((await w.api.get("/groups/1", server.usageApiKey)).body.pkps).to.not.include(pkp1);
      expectError(
        await w.api.post("/svc_action", server.usageApiKey, { cid: cid1, pkp_id: pkp1 }),
        403,
        "not_authorized_to_execute",
      );
    });

    it("the Safe deletes a group", async function () {
      await safeTx({ op: "delete-group", groupId: 2 });
      expectError(await w.api.get("/groups/2", server.usageApiKey), 404, "group_not_found");
    });
  });
});
