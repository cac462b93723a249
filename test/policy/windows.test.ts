/**
 * Policy windows in the relayer, on SQLite and on PostgreSQL: the shared counters (relayer/policyWindows.ts)
 * are exact under 50 concurrent reservations, on two instances sharing one PostgreSQL database, and after
 * a restart; a released use frees its place; uses leave the window as they age out of its period. Then
 * the whole path: 50 concurrent runs against a window of 10 give exactly 10 signatures, on two relayer
 * instances on PostgreSQL, and a restarted instance still counts them; the dry run never counts.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import fc from "fast-check";
import { openEngine, migrate, type DataLayer } from "../../relayer/db";
import { PolicyWindowStore } from "../../relayer/policyWindows";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { windowExcess, type WindowClaim, type WindowUse } from "../../enclave";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

const claim = (over: Partial<WindowClaim> = {}): WindowClaim => ({
  key: "0xpkp:1:rule:1:native",
  rule: "rule",
  group: "1",
  periodMs: 60_000,
  maxCount: 10,
  maxValue: null,
  amount: 0n,
  unit: "wei on chain 1",
  ...over,
});

async function takeMany(stores: PolicyWindowStore[], n: number, c: WindowClaim) {
  const results = await Promise.all(
    Array.from({ length: n }, (_, i) => stores[i % stores.length].reserve(c)),
  );
  return {
    taken: results.filter((r) => "release" in r) as Array<{ release: () => Promise<void> }>,
    refused: results.filter((r) => "excess" in r) as Array<{ excess: { field: string; value: string } }>,
  };
}

describeOnEngines("policy windows: the shared counters", function (engine) {
  this.timeout(120_000);
  let dir: string;
  let url: string | undefined;
  const layers: DataLayer[] = [];

  async function open(): Promise<DataLayer> {
    const l = openEngine({ databaseUrl: url, sqlitePath: path.join(dir, "relayer.sqlite") });
    await migrate(l);
    layers.push(l);
    return l;
  }

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-windows-"));
    url = engine === "postgres" ? await freshDatabaseUrl() : undefined;
  });
  after(async () => {
    for (const l of layers) if (l.open) await l.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("50 concurrent reservations against a count of 10 take exactly 10 (on two instances on PostgreSQL)", async () => {
    const stores = [new PolicyWindowStore(await open())];
    if (engine === "postgres") stores.push(new PolicyWindowStore(await open()));
    const c = claim({ key: "count" });
    const { taken, refused } = await takeMany(stores, 50, c);
    expect(taken).to.have.length(10);
    expect(refused).to.have.length(40);
    for (const r of refused)
      expect(r.excess).to.deep.equal({ ...r.excess, field: "window.maxCount", value: "11" });
    expect(await stores[0].uses("count")).to.have.length(10);
  });

  it("50 concurrent reservations against a total: exactly as many as fit, per counter", async () => {
    const stores = [new PolicyWindowStore(await open())];
    if (engine === "postgres") stores.push(new PolicyWindowStore(await open()));
    // 7 per use, at most 100: 14 fit (98); the 15th would reach 105. Token amounts above 2^64 add up exactly.
    const big = 10n ** 30n;
    const c = claim({ key: "value", maxCount: 10_000, maxValue: 100n * big, amount: 7n * big });
    const { taken, refused } = await takeMany(stores, 50, c);
    expect(taken).to.have.length(14);
    expect(refused[0].excess).to.include({ field: "window.maxValue", value: (105n * big).toString() });
    // Another chain is another counter.
    expect("release" in (await stores[0].reserve({ ...c, key: "value-chain-10" }))).to.equal(true);
  });

  it("a released use frees its place; a use too large alone is refused and takes nothing", async () => {
    const store = new PolicyWindowStore(await open());
    const c = claim({ key: "release", maxCount: 2, maxValue: 10n, amount: 4n });
    const first = await store.reserve(c);
    const second = await store.reserve(c);
    expect("excess" in (await store.reserve(c))).to.equal(true);
    await (first as { release: () => Promise<void> }).release();
    await (first as { release: () => Promise<void> }).release(); // twice: still one place
    expect(await store.uses("release")).to.have.length(1);
    expect("release" in (await store.reserve(c))).to.equal(true);
    expect("excess" in (await store.reserve(c))).to.equal(true);
    void second;
    const huge = await store.reserve({ ...c, key: "huge", amount: 11n });
    expect(huge).to.deep.include({
      excess: {
        field: "window.maxValue",
        value: "11",
        reason: (huge as { excess: { reason: string } }).excess.reason,
      },
    });
    expect(await store.uses("huge")).to.deep.equal([]);
  });

  it("counters survive a restart (a new connection to the same database)", async () => {
    const before = await open();
    const c = claim({ key: "restart", maxCount: 3 });
    const s1 = new PolicyWindowStore(before);
    for (let i = 0; i < 3; i++) expect("release" in (await s1.reserve(c))).to.equal(true);
    await before.close();
    const s2 = new PolicyWindowStore(await open());
    expect(await s2.uses("restart")).to.have.length(3);
    expect(await s2.reserve(c))
      .to.have.property("excess")
      .that.includes({ value: "4" });
  });

  it("takes and releases decide exactly as the engine's arithmetic does (fast-check)", async () => {
    const store = new PolicyWindowStore(await open());
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.option(fc.bigInt({ min: 0n, max: 60n }), { nil: null }),
        fc.array(fc.tuple(fc.bigInt({ min: 0n, max: 25n }), fc.boolean()), { maxLength: 14 }),
        async (maxCount, maxValue, steps) => {
          const key = `model-${++run}`;
          const model: WindowUse[] = [];
          for (const [amount, releaseIt] of steps) {
            const c = claim({ key, maxCount, maxValue, amount, periodMs: 3_600_000 });
            const expected = windowExcess(c, model, Date.now());
            const got = await store.reserve(c);
            expect("excess" in got ? got.excess : null).to.deep.equal(expected);
            if ("release" in got) {
              if (releaseIt) await got.release();
              else model.push({ id: String(model.length), atMs: Date.now(), amount });
            }
          }
          expect(await store.uses(key)).to.have.length(model.length);
        },
      ),
      { seed: 27, numRuns: 40 },
    );
  });

  it("uses leave the window as they age out of its period (rolling)", async () => {
    let now = 1_000_000;
    const layer = await open();
    // SQLite counts on the instance's clock (injected here); PostgreSQL on the database's (waited for).
    const store = new PolicyWindowStore(layer, () => now);
    const c = claim({ key: "rolling", periodMs: engine === "postgres" ? 1500 : 1000, maxCount: 2 });
    expect("release" in (await store.reserve(c))).to.equal(true);
    if (engine === "sqlite") now += 600;
    else await new Promise((r) => setTimeout(r, 900));
    expect("release" in (await store.reserve(c))).to.equal(true);
    expect("excess" in (await store.reserve(c))).to.equal(true);
    // The first use leaves the period: one place again, not two.
    if (engine === "sqlite") now += 500;
    else await new Promise((r) => setTimeout(r, 800));
    expect("release" in (await store.reserve(c))).to.equal(true);
    expect("excess" in (await store.reserve(c))).to.equal(true);
    // The aged-out use was pruned by the take that followed it: two live uses are stored.
    expect(await store.uses("rolling")).to.have.length(2);
  });
});

describeOnEngines("policy windows: runs against a window", function (engine) {
  this.timeout(240_000);
  const ACTION = `async function main(p) {
    try { return { sig: await Actions.signMessage({ pkpId: p.pkp, message: "login: " + p.i }) }; }
    catch (e) { return { code: e.code, message: e.message }; }
  }`;
  const POLICY = {
    version: 1,
    rules: [
      { name: "ten-logins", effect: "allow", operation: "message", window: { seconds: 3600, maxCount: 10 } },
    ],
  };
  let s: Stack;
  let second: RunningRelayer | undefined;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let cid: string;

  const runOn = async (url: string, i: number) => {
    const r = await fetch(`${url}/core/v1/svc_action`, {
      method: "POST",
      headers: { "x-api-key": a.accountKey, "content-type": "application/json" },
      body: JSON.stringify({ cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId, i } }),
    });
    return {
      status: r.status,
      body: (await r.json()) as { response: { sig?: string; code?: string; message?: string } },
    };
  };

  before(async () => {
    const databaseUrl = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    s = await startStack({
      databaseUrl,
      executor: { poolSize: 2 },
      rateLimits: { concurrentExecutionsPerAccount: 200 },
    });
    a = await setupAccount(s, ACTION);
    cid = (await s.api("POST", "/core/v1/policies", { key: a.accountKey, body: { policy: POLICY } })).body
      .cid;
    const set = await s.api("POST", `/core/v1/groups/${a.groupId}/policy`, {
      key: a.accountKey,
      body: { cid },
    });
    expect(set.status, JSON.stringify(set.body)).to.equal(200);
    if (engine === "postgres") {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-windows-2-"));
      second = await startRelayer({ ...s.relayerOptions, dataDir, port: 0 });
      // The second instance learns of the account and the policy from the chain.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const r = await fetch(`${second.url}/core/v1/groups/${a.groupId}`, {
          headers: { "x-api-key": a.accountKey },
        });
        const body = (await r.json()) as { policy_cid?: string };
        if (r.status === 200 && body.policy_cid === cid) break;
        if (Date.now() > deadline) throw new Error("the second instance did not see the policy");
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  });
  after(async () => {
    await second?.close();
    await s?.close();
  });

  it("the dry run never counts", async () => {
    for (let i = 0; i < 12; i++) {
      const r = await s.api("POST", "/core/v1/policies/evaluate", {
        key: a.accountKey,
        body: { cid, operation: { kind: "message", message: "login: dry" } },
      });
      expect(r.body).to.include({ allowed: true, rule: "ten-logins" });
    }
  });

  it(`50 concurrent runs against a window of 10 give exactly 10 signatures${engine === "postgres" ? " on two instances" : ""}`, async () => {
    const urls = [s.url, ...(second ? [second.url] : [])];
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => runOn(urls[i % urls.length], i)));
    for (const r of results) expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const signed = results.filter((r) => typeof r.body.response.sig === "string");
    const refused = results.filter((r) => r.body.response.code === "policy_denied");
    expect(signed).to.have.length(10);
    expect(refused).to.have.length(40);
    expect(refused[0].body.response.message)
      .to.contain("rule ten-logins")
      .and.contain("window.maxCount = 11");
  });

  it("after a restart the window is still full", async () => {
    await s.restartRelayer();
    const r = await runOn(s.url, 99);
    expect(r.body.response.code, JSON.stringify(r.body)).to.equal("policy_denied");
    expect(r.body.response.message).to.contain("window.maxCount = 11");
  });
});
