/**
 * POST /core/v1/rotate_usage_api_key end to end: anvil, the deployed registry, the relayer with billing
 * (real ledger, simulated processor), real SES workers running the action.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet } from "ethers";
import { AccountRegistry__factory, type AccountRegistry } from "../../typechain-types";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { DEV_KEYS } from "../helpers/anvil";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

const ROTATE = "/core/v1/rotate_usage_api_key";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("rotation: POST /core/v1/rotate_usage_api_key", function () {
  this.timeout(180_000);
  let s: Stack;
  let billing: Billing;
  let dir: string;
  let registry: AccountRegistry;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let group2: number;

  const execute = (key: string, base?: string) =>
    base === undefined
      ? s.api("POST", "/core/v1/svc_action", { key, body: { cid: a.cid, pkp_id: a.pkpId } })
      : fetch(base + "/core/v1/svc_action", {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": key },
          // Inline: another instance has its own content store, without the pinned code.
          body: JSON.stringify({ code: a.code, pkp_id: a.pkpId }),
        }).then(async (r) => ({ status: r.status, body: await r.json() }));

  async function addKey(body: Record<string, unknown> = {}) {
    const r = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "server", description: "runs the signer", execute_in_groups: [a.groupId], ...body },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return { value: r.body.usage_api_key as string, id: r.body.id as string };
  }

  const rotate = (body: Record<string, unknown>, key = a.accountKey, headers?: Record<string, string>) =>
    s.api("POST", ROTATE, { key, body, headers });

  /** Block number and the owner's forwarder nonce: both unchanged means nothing was written. */
  async function chainState() {
    const owner = s.enclave.principalAddress(a.accountKey);
    const forwarder = new (await import("ethers")).Contract(
      s.deployment.forwarder,
      ["function nonces(address) view returns (uint256)"],
      s.provider,
    );
    return { block: await s.provider.getBlockNumber(), nonce: (await forwarder.nonces(owner)) as bigint };
  }

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-rotation-"));
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
      signupCreditCents: 1000,
      chargeFlushMs: 0,
    });
    s = await startStack({ billing });
    registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
    a = await setupAccount(s);
    const g = await s.api("POST", "/core/v1/groups", { key: a.accountKey, body: { name: "g2" } });
    group2 = g.body.group_id;
  });

  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("answers 201 with the new key's value once, in the shape of add_usage_api_key, plus the old key's end", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, overlap_seconds: 600 });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.usage_api_key).to.match(/^uk_[0-9a-f]{64}$/);
    expect(r.body.id).to.equal(s.enclave.parseApiKey(r.body.usage_api_key).address);
    expect(r.body.name).to.equal("server");
    expect(r.body.description).to.equal("runs the signer");
    expect(r.body.expiration).to.equal(null);
    expect(r.body.previous_key.id).to.equal(old.id);
    const receipt = await s.provider.getTransactionReceipt(r.body.tx_hash);
    const at = (await s.provider.getBlock(receipt!.blockNumber))!.timestamp;
    expect(r.body.previous_key.expiration).to.equal(at + 600);
    expect(Number((await registry.getKey(old.id)).expiration)).to.equal(at + 600);
  });

  it("the new key has exactly the old key's scopes in the registry's views, for every scope and group", async () => {
    const old = await addKey({
      can_create_pkps: true,
      can_delete_groups: true,
      manage_ipfs_ids_in_groups: [group2],
      add_pkp_to_groups: [0],
      remove_pkp_from_groups: [a.groupId, group2],
      execute_in_groups: [a.groupId],
    });
    const r = await rotate({ usage_api_key: old.value, overlap_seconds: 600 });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    const views = async (key: string) => {
      const out: boolean[] = [];
      for (let scope = 0; scope < 7; scope++)
        for (const g of [0, a.groupId, group2, group2 + 1]) out.push(await registry.hasScope(key, scope, g));
      return out;
    };
    const before = await views(old.id);
    expect(before.filter(Boolean).length).to.be.greaterThan(4);
    expect(await views(r.body.id)).to.deep.equal(before);
    const list = await s.api("GET", "/core/v1/list_api_keys?page_size=100", { key: a.accountKey });
    const [o, n] = [old.id, r.body.id].map((id) => list.body.items.find((k: { id: string }) => k.id === id));
    const strip = (k: Record<string, unknown>) => {
      const { id: _i, api_key_hash: _h, created_at: _c, expiration: _e, ...rest } = k;
      return rest;
    };
    expect(strip(n)).to.deep.equal(strip(o));
  });

  it("the new key keeps the old key's spend cap", async () => {
    const old = await addKey({ spend_cap_cents: 7 });
    const r = await rotate({ id: old.id, overlap_seconds: 60 });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.spend_cap_cents).to.equal(7);
    expect((await billing.keySpend(r.body.id)).cap_cents).to.equal(7);
  });

  it("is charged as one write", async () => {
    const balance = async () =>
      (await s.api("GET", "/core/v1/billing/balance", { key: a.accountKey })).body.balance_cents as number;
    const old = await addKey();
    const before = await balance();
    const r = await rotate({ id: old.id, overlap_seconds: 60 });
    expect(r.status).to.equal(201);
    expect(await balance()).to.equal(before - 1);
  });

  it("during the overlap both keys execute; from its end the old key gets 401 api_key_expired", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, overlap_seconds: 3 });
    expect(r.status).to.equal(201);
    const until: number = r.body.previous_key.expiration;
    expect((await execute(old.value)).status).to.equal(200);
    expect((await execute(r.body.usage_api_key)).status).to.equal(200);
    // The relayer decides expiry by its own clock against the on-chain expiration (block time + overlap).
    while (Date.now() / 1000 < until + 1) await sleep(100);
    const refused = await execute(old.value);
    expect(refused.status).to.equal(401);
    expect(refused.body.error.code).to.equal("api_key_expired");
    expect(refused.body.error.details).to.deep.equal({ expiration: until });
    expect((await execute(r.body.usage_api_key)).status).to.equal(200);
  });

  it("overlap 0: the old key is refused at once, the new one works", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, overlap_seconds: 0 });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    const refused = await execute(old.value);
    expect(refused.status).to.equal(401);
    expect(refused.body.error.code).to.equal("api_key_expired");
    expect((await execute(r.body.usage_api_key)).status).to.equal(200);
  });

  it("keeps the old key's own expiration when it is sooner", async () => {
    const soon = Math.floor(Date.now() / 1000) + 120;
    const old = await addKey({ expiration: soon });
    const r = await rotate({ id: old.id, overlap_seconds: 3600 });
    expect(r.status).to.equal(201);
    expect(r.body.previous_key.expiration).to.equal(soon);
    expect(Number((await registry.getKey(old.id)).expiration)).to.equal(soon);
  });

  it("expiration sets the new key's own expiration (not copied from the old key)", async () => {
    const old = await addKey({ expiration: Math.floor(Date.now() / 1000) + 7200 });
    const at = Math.floor(Date.now() / 1000) + 86_400;
    const r = await rotate({ id: old.id, overlap_seconds: 60, expiration: at });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.expiration).to.equal(at);
    expect(Number((await registry.getKey(r.body.id)).expiration)).to.equal(at);
  });

  it("an expiration in the past: 400 expiration_in_past, nothing written", async () => {
    const old = await addKey();
    const before = await chainState();
    const r = await rotate({ id: old.id, overlap_seconds: 60, expiration: 1_000 });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("expiration_in_past");
    expect(r.body.error.details).to.deep.equal({ field: "expiration" });
    expect(await chainState()).to.deep.equal(before);
  });

  it("an unknown key: 404 usage_key_not_found, nothing written", async () => {
    const before = await chainState();
    const unknown = Wallet.createRandom().address;
    const r = await rotate({ id: unknown, overlap_seconds: 60 });
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal("usage_key_not_found");
    expect(r.body.error.details).to.deep.equal({ id: unknown });
    expect(await chainState()).to.deep.equal(before);
  });

  it("an already-removed key: 404 usage_key_not_found, nothing written", async () => {
    const old = await addKey();
    const removed = await s.api("POST", "/core/v1/remove_usage_api_key", {
      key: a.accountKey,
      body: { id: old.id },
    });
    expect(removed.status).to.equal(200);
    const before = await chainState();
    const r = await rotate({ usage_api_key: old.value, overlap_seconds: 60 });
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal("usage_key_not_found");
    expect(await chainState()).to.deep.equal(before);
  });

  it("an expired key: 409 usage_key_expired, nothing written", async () => {
    const old = await addKey();
    expect((await rotate({ id: old.id, overlap_seconds: 0 })).status).to.equal(201);
    const before = await chainState();
    const r = await rotate({ id: old.id, overlap_seconds: 60 });
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal("usage_key_expired");
    expect(await chainState()).to.deep.equal(before);
  });

  it("overlap_seconds above 30 days: 400 overlap_too_long", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, overlap_seconds: 2_592_001 });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("overlap_too_long");
    expect(r.body.error.details).to.deep.equal({ field: "overlap_seconds", max: 2_592_000 });
  });

  for (const [label, overlap] of [
    ["missing", undefined],
    ["negative", -1],
    ["fractional", 1.5],
    ["a string", "60"],
  ] as const) {
    it(`overlap_seconds ${label}: 400 invalid_request naming the field`, async () => {
      const old = await addKey();
      const r = await rotate({ id: old.id, overlap_seconds: overlap });
      expect(r.status).to.equal(400);
      expect(r.body.error.code).to.equal("invalid_request");
      expect(r.body.error.details).to.deep.equal({ field: "overlap_seconds" });
    });
  }

  it("both usage_api_key and id: 400 invalid_request", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, usage_api_key: old.value, overlap_seconds: 60 });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_request");
  });

  it("an unknown field: 400 unknown_field", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, overlap_seconds: 60, execute_in_groups: [0] });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("unknown_field");
  });

  it("a usage key cannot rotate, not even itself: 403 owner_only, nothing written", async () => {
    const self = await addKey({ can_create_pkps: true, add_pkp_to_groups: [0] });
    const before = await chainState();
    const r = await rotate({ usage_api_key: self.value, overlap_seconds: 60 }, self.value);
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal("owner_only");
    expect(await chainState()).to.deep.equal(before);
  });

  it("honours Idempotency-Key: the replay returns the same new key and writes once", async () => {
    const old = await addKey();
    const headers = { "idempotency-key": `rotate-${old.id}` };
    const first = await rotate({ id: old.id, overlap_seconds: 60 }, a.accountKey, headers);
    expect(first.status).to.equal(201);
    const before = await chainState();
    const again = await rotate({ id: old.id, overlap_seconds: 60 }, a.accountKey, headers);
    expect(again.status).to.equal(201);
    expect(again.headers.get("idempotent-replayed")).to.equal("true");
    expect(again.body).to.deep.equal(first.body);
    expect(await chainState()).to.deep.equal(before);
  });

  it("with two relayer instances, both refuse the old key after the overlap", async () => {
    const second: RunningRelayer = await startRelayer({
      ...s.relayerOptions,
      dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "sigil-rotation-2-")),
      port: 0,
      billing: undefined,
    });
    try {
      const old = await addKey();
      const r = await rotate({ id: old.id, overlap_seconds: 3 });
      expect(r.status).to.equal(201);
      const until: number = r.body.previous_key.expiration;
      // The second instance learns of the rotation from the chain, within its poll interval.
      let seen = await execute(r.body.usage_api_key, second.url);
      while (seen.status !== 200 && Date.now() / 1000 < until) {
        await sleep(100);
        seen = await execute(r.body.usage_api_key, second.url);
      }
      expect(seen.status, JSON.stringify(seen.body)).to.equal(200);
      while (Date.now() / 1000 < until + 1) await sleep(100);
      for (const url of [s.url, second.url]) {
        const refused = await execute(old.value, url);
        expect(refused.status, url).to.equal(401);
        expect(refused.body.error.code, url).to.equal("api_key_expired");
      }
    } finally {
      await second.close();
    }
  });

  it("a ChainSecured account: 409 account_chain_secured, nothing written", async () => {
    const b = await setupAccount(s);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: b.accountKey,
      body: { name: "k", execute_in_groups: [b.groupId] },
    });
    const wallet = new Wallet(DEV_KEYS[4], s.provider);
    const t = await s.api("POST", "/core/v1/account/transfer_ownership", {
      key: b.accountKey,
      body: { new_owner: wallet.address },
    });
    expect(t.status).to.equal(200);
    await (await registry.connect(wallet).acceptOwnership(b.accountId)).wait();
    let r = await rotate({ id: k.body.id, overlap_seconds: 60 }, b.accountKey);
    // The relayer learns of the new owner from the chain (poll); until then the registry refuses it.
    for (let i = 0; i < 50 && r.status !== 409; i++) {
      await sleep(100);
      r = await rotate({ id: k.body.id, overlap_seconds: 60 }, b.accountKey);
    }
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal("account_chain_secured");
    expect((await registry.getKey(k.body.id)).expiration).to.equal(0n);
  });

  // Last: it moves the chain's clock ahead of the wall clock.
  it("on chain the old key is refused from the expiration on (block time), which path B and every instance share", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, overlap_seconds: 300 });
    const until: number = r.body.previous_key.expiration;
    expect(await registry.hasScope(old.id, 3, a.groupId)).to.equal(true);
    await s.provider.send("anvil_setNextBlockTimestamp", [until - 1]);
    await s.provider.send("evm_mine", []);
    expect(await registry.hasScope(old.id, 3, a.groupId)).to.equal(true);
    await s.provider.send("anvil_setNextBlockTimestamp", [until]);
    await s.provider.send("evm_mine", []);
    expect(await registry.hasScope(old.id, 3, a.groupId)).to.equal(false);
    expect(await registry.hasScope(r.body.id, 3, a.groupId)).to.equal(true);
  });

  it("the relayer decides expiry by its own clock: with only the chain's clock past the end, the old key still executes", async () => {
    const old = await addKey();
    const r = await rotate({ id: old.id, overlap_seconds: 300 });
    const until: number = r.body.previous_key.expiration;
    await s.provider.send("anvil_setNextBlockTimestamp", [until + 5]);
    await s.provider.send("evm_mine", []);
    expect(await registry.hasScope(old.id, 3, a.groupId)).to.equal(false);
    expect(Date.now() / 1000).to.be.below(until);
    expect((await execute(old.value)).status).to.equal(200);
  });
});
