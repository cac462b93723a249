/**
 * Restarts: the event cursor is checkpointed under dataDir and the relayer resumes from it; projections are
 * rebuilt on demand, so a key revoked on chain (path B) while the relayer was down is refused on the very
 * first request after the restart.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet, ZeroAddress } from "ethers";
import { computeCid } from "../../enclave";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEYS } from "../helpers/anvil";
import { startStack, type Stack, OPERATOR_HEADERS } from "../helpers/stack";

describe("relayer: restart", function () {
  this.timeout(120_000);
  let s: Stack;

  before(async () => {
    s = await startStack();
  });
  after(async () => {
    await s?.close();
  });

  it("resumes from the checkpoint; a key revoked on chain while it was down is refused at once", async () => {
    const wallet = new Wallet(DEV_KEYS[3], s.provider);
    const registry = AccountRegistry__factory.connect(s.deployment.registry, wallet);
    await (await registry.createAccount("w", ZeroAddress)).wait();
    const gen = s.enclave.generateUsageKey();
    const scopes = {
      canCreateGroups: false,
      canDeleteGroups: false,
      canCreatePkps: false,
      manageIpfsIdsInGroups: [],
      addPkpToGroups: [],
      removePkpFromGroups: [],
      executeInGroups: [0],
    };
    await (await registry.addKey(gen.address, gen.keyHash, "k", "", 0, scopes)).wait();
    const code = "async function main() { return 'up'; }";
    const cid = await computeCid(new TextEncoder().encode(code));
    await (await registry.createGroup("g", "", [], [cid])).wait();
    await s.relayer.close();
    await s.restartRelayer();
    expect((await s.api("POST", "/core/v1/svc_action", { key: gen.apiKey, body: { code } })).status).to.equal(
      200,
    );

    await s.relayer.close();
    const checkpoint = JSON.parse(fs.readFileSync(path.join(s.dataDir, "event-cursor.json"), "utf8"));
    expect(checkpoint.block).to.equal(await s.provider.getBlockNumber());
    await (await registry.removeKey(gen.address)).wait();
    await s.restartRelayer();
    const r = await s.api("POST", "/core/v1/svc_action", { key: gen.apiKey, body: { code } });
    expect(r.status).to.equal(401);
    expect(r.body.error.code).to.equal("unknown_api_key");
    const h = await s.api("GET", "/health", { headers: OPERATOR_HEADERS });
    expect(h.body.cache.last_processed_block).to.equal(await s.provider.getBlockNumber());
  });

  it("a chain reorganisation below the cursor drops the cache: state that vanished is refused", async () => {
    const before = (await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key;
    const snapshot = await s.provider.send("evm_snapshot", []);
    const a = await s.api("POST", "/core/v1/new_account", { body: {} });
    const k = await s.api("POST", "/core/v1/add_usage_api_key", { key: a.body.api_key, body: { name: "k" } });
    expect((await s.api("GET", "/core/v1/pkps", { key: k.body.usage_api_key })).status).to.equal(200);
    await s.provider.send("evm_revert", [snapshot]);
    const t0 = Date.now();
    let r;
    do {
      r = await s.api("GET", "/core/v1/pkps", { key: k.body.usage_api_key });
      if (r.status === 401) break;
      await new Promise((res) => setTimeout(res, 50));
    } while (Date.now() - t0 < 5_000);
    expect(r.status).to.equal(401);
    expect((await s.api("GET", "/core/v1/account", { key: a.body.api_key })).status).to.equal(401);
    // Writes go on: the relayer re-read its gas wallets' and principals' nonces after the reset.
    expect((await s.api("POST", "/core/v1/pkps/create", { key: before, body: {} })).status).to.equal(201);
  });
  it("rebuilds cold an account whose keys carry the maximum scope entries (key pages sized for the read-call gas cap)", async () => {
    const wallet = new Wallet(DEV_KEYS[4], s.provider);
    const registry = AccountRegistry__factory.connect(s.deployment.registry, wallet);
    await (await registry.createAccount("wide", ZeroAddress)).wait();
    const maxPerKey = Number(await registry.MAX_SCOPE_ENTRIES_PER_KEY());
    const groups = maxPerKey; // distinct live group ids to scope on
    let nonce = await wallet.getNonce();
    const sent = [];
    for (let i = 0; i < groups; i++)
      sent.push(await registry.createGroup(`g${i}`, "", [], [], { nonce: nonce++ }));
    await sent[sent.length - 1].wait();
    const ids = Array.from({ length: groups }, (_, i) => i + 1);
    const quarter = groups / 4;
    const scopes = {
      canCreateGroups: false,
      canDeleteGroups: false,
      canCreatePkps: false,
      manageIpfsIdsInGroups: ids.slice(0, quarter),
      addPkpToGroups: ids.slice(quarter, 2 * quarter),
      removePkpFromGroups: ids.slice(2 * quarter, 3 * quarter),
      executeInGroups: ids.slice(3 * quarter),
    };
    // 40 such keys read in one page of 100 would need ~40 × 128 × 7.6k gas, over any node's eth_call gas cap.
    const keys = Array.from({ length: 40 }, () => s.enclave.generateUsageKey());
    const adds = [];
    for (const k of keys)
      adds.push(await registry.addKey(k.address, k.keyHash, "w", "", 0, scopes, { nonce: nonce++ }));
    await adds[adds.length - 1].wait();

    await s.relayer.close();
    await s.restartRelayer();
    const r = await s.api("GET", "/core/v1/groups", { key: keys[39].apiKey });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.total).to.equal(groups);
  });
});
