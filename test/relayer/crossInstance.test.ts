/**
 * Cross-instance read-your-writes (relayer/cluster): two relayer instances on one chain and one
 * PostgreSQL database, both polling the chain only once a minute, so that nothing but the shared write
 * mark can carry a change made through one of them to the other in time: the other honours it on its
 * very next request. And signed requests: one replayed byte for byte to the other instance is refused.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet, ZeroAddress } from "ethers";
import { AccountRegistry__factory } from "../../typechain-types";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { SharedWriteMark } from "../../relayer/cluster/writeMark";
import { SharedNonceStore } from "../../relayer/cluster/sharedNonces";
import { RegistryReader } from "../../relayer/chain/registryReader";
import { makeProvider } from "../../relayer/chain/rpc";
import { type DataLayer, openDataLayer } from "../../relayer/db";
import { PermissionCache } from "../../relayer/permissions/permissionCache";
import { signRequest, usageKeyWallet } from "../../sdk/index";
import { DEV_KEYS } from "../helpers/anvil";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { quietLogger, setupAccount, startStack, type Stack } from "../helpers/stack";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(
  baseUrl: string,
  method: string,
  route: string,
  opts: { key?: string; body?: unknown; headers?: Record<string, string>; raw?: string } = {},
): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers["x-api-key"] = opts.key;
  let body = opts.raw;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] = "application/json";
  }
  const r = await fetch(baseUrl + route, { method, headers, body });
  const text = await r.text();
  try {
    return { status: r.status, body: JSON.parse(text) };
  } catch {
    return { status: r.status, body: text };
  }
}

/** Neither instance's poller can carry a change in time: only the write mark can. */
const SLOW_POLL_MS = 60_000;

describeOnPostgres("relayer: every instance sees a change made through another at once", function () {
  this.timeout(180_000);
  let s: Stack;
  let second: RunningRelayer;
  let databaseUrl: string;
  let one: string;
  let two: string;

  before(async () => {
    databaseUrl = await freshDatabaseUrl();
    s = await startStack({ databaseUrl, pollIntervalMs: SLOW_POLL_MS });
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-relayer-2-"));
    second = await startRelayer({ ...s.relayerOptions, dataDir, port: 0 });
    one = s.url;
    two = second.url;
  });
  after(async () => {
    await second?.close();
    await s?.close();
  });

  const run = (url: string, key: string, a: { cid: string; pkpId: string }) =>
    call(url, "POST", "/core/v1/svc_action", { key, body: { cid: a.cid, pkp_id: a.pkpId } });

  /** An account made through instance 1, its action pinned there only: instance 2 reads the pinned code from the database. */
  async function account(code?: string) {
    return setupAccount(s, code);
  }

  async function usageKey(accountKey: string, groupId: number) {
    const r = await call(one, "POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "server", execute_in_groups: [groupId] },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return { key: r.body.usage_api_key as string, id: r.body.id as string };
  }

  it("a key created through instance 1 executes through instance 2 on the very next request", async () => {
    const a = await account();
    const k = await usageKey(a.accountKey, a.groupId);
    const r = await run(two, k.key, a);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
  });

  it("a key removed through instance 1 is refused by instance 2 on its next request", async () => {
    const a = await account();
    const k = await usageKey(a.accountKey, a.groupId);
    expect((await run(two, k.key, a)).status).to.equal(200); // instance 2 holds the account now
    const rm = await call(one, "POST", "/core/v1/remove_usage_api_key", {
      key: a.accountKey,
      body: { id: k.id },
    });
    expect(rm.status).to.equal(200);
    const r = await run(two, k.key, a);
    expect(r.status).to.equal(401);
    expect(r.body.error.code).to.equal("unknown_api_key");
  });

  it("an action removed from a group through instance 1 is refused by instance 2 on its next request", async () => {
    const a = await account();
    const k = await usageKey(a.accountKey, a.groupId);
    expect((await run(two, k.key, a)).status).to.equal(200);
    const rm = await call(one, "POST", `/core/v1/groups/${a.groupId}/actions`, {
      key: a.accountKey,
      body: { remove: [a.cid] },
    });
    expect(rm.status, JSON.stringify(rm.body)).to.equal(200);
    const r = await run(two, k.key, a);
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal("not_authorized_to_execute");
  });

  it("a signed request accepted by instance 1 and replayed byte for byte to instance 2 gets 401 signature_replayed", async () => {
    const a = await account();
    const k = await usageKey(a.accountKey, a.groupId);
    const body = JSON.stringify({ cid: a.cid, pkp_id: a.pkpId });
    const route = "/core/v1/svc_action";
    const headers = signRequest(
      usageKeyWallet(k.key),
      { chainId: 31337, registryAddress: s.deployment.registry },
      "POST",
      route,
      new TextEncoder().encode(body),
    );
    const send = (url: string) =>
      call(url, "POST", route, { raw: body, headers: { ...headers, "content-type": "application/json" } });
    const first = await send(one);
    expect(first.status, JSON.stringify(first.body)).to.equal(200);
    const replay = await send(two);
    expect(replay.status).to.equal(401);
    expect(replay.body.error.code).to.equal("signature_replayed");
    expect(replay.body).not.to.have.property("response"); // nothing ran
  });

  describe("the permission cache and the mark, on their own", () => {
    let layer: DataLayer;
    const closers: Array<() => unknown> = [];
    before(async () => {
      layer = await openDataLayer({ databaseUrl, sqlitePath: "" });
    });
    after(async () => {
      for (const c of closers) await c();
      await layer?.close();
    });

    function cacheReading(mark: SharedWriteMark | undefined) {
      const rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-cache-"));
      closers.push(() => {
        rpc.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      });
      return new PermissionCache({
        provider: rpc.provider,
        reader: new RegistryReader(rpc.provider, s.deployment.registry),
        registry: s.deployment.registry,
        chainId: 31337,
        deployBlock: s.deployment.deployBlock,
        dataDir,
        pollIntervalMs: SLOW_POLL_MS,
        logger: quietLogger(),
        sharedMark: mark,
      });
    }

    it("an unknown key remembered by one instance works there once a write elsewhere registered it and raised the mark", async () => {
      const mark = new SharedWriteMark(layer, `31337:test-${Date.now()}`);
      const cache = cacheReading(mark);
      await cache.ensureSynced();
      const owner = new Wallet(DEV_KEYS[2], s.provider);
      const registry = AccountRegistry__factory.connect(s.deployment.registry, owner);
      await (await registry.createAccount("miss", ZeroAddress)).wait();
      const gen = s.enclave.generateUsageKey();
      const now = () => Math.floor(Date.now() / 1000);
      expect((await cache.lookupKey(gen.address, now())).status).to.equal("unknown"); // remembered for 5 s
      const scopes = {
        canCreateGroups: false,
        canDeleteGroups: false,
        canCreatePkps: false,
        manageIpfsIdsInGroups: [],
        addPkpToGroups: [],
        removePkpFromGroups: [],
        executeInGroups: [],
      };
      const rc = await (await registry.addKey(gen.address, gen.keyHash, "k", "", 0, scopes)).wait();
      await mark.record(rc!.blockNumber); // what the writing instance does before it answers
      await cache.freshen();
      expect((await cache.lookupKey(gen.address, now())).status).to.equal("live");
    });

    it("the mark only ever rises", async () => {
      const mark = new SharedWriteMark(layer, `31337:rise-${Date.now()}`);
      expect(await mark.read()).to.equal(0);
      await mark.record(12);
      await mark.record(7);
      expect(await mark.read()).to.equal(12);
    });

    // Two, not one: callers arriving while the first read is on the wire may have seen a write that read
    // predates, so they share the next read instead (SharedWriteMark.read).
    it("concurrent reads of the mark share reads: 20 callers at once cost 2 queries", async () => {
      const mark = new SharedWriteMark(layer, `31337:share-${Date.now()}`);
      await mark.record(5);
      const reads = await Promise.all(Array.from({ length: 20 }, () => mark.read()));
      expect(reads).to.deep.equal(Array(20).fill(5));
      expect(mark.queries).to.equal(2);
    });

    it("a nonce is claimed once while live, and again once expired", async () => {
      const store = new SharedNonceStore(layer);
      const address = "0x" + "ab".repeat(20);
      expect(await store.claim(address, "n1", 1_000, 900)).to.equal(true);
      expect(await store.claim(address, "n1", 1_100, 950)).to.equal(false);
      expect(await store.claim(address, "n1", 1_200, 1_001)).to.equal(true);
      expect(await store.sweep(2_000)).to.equal(1);
    });
  });
});
