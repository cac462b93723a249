/**
 * Chain outage: stop anvil mid-test → writes answer 503 chain_unavailable promptly (never hang); start it
 * again on the same port with the same --state file → the same relayer recovers without a restart.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { setupAccount, startStack, type Stack, OPERATOR_HEADERS } from "../helpers/stack";

describe("relayer: chain outage and recovery", function () {
  this.timeout(120_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let stateDir: string;

  before(async () => {
    stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-outage-"));
    s = await startStack({ stateFile: path.join(stateDir, "state.json"), rpcTimeoutMs: 1_000 });
    a = await setupAccount(s);
  });
  after(async () => {
    await s?.close();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  it("while the chain is down, a write answers 503 chain_unavailable with Retry-After, quickly", async () => {
    await s.chain.stop();
    const t0 = Date.now();
    const r = await s.api("POST", "/core/v1/pkps/create", {
      key: a.accountKey,
      body: { name: "during outage" },
    });
    expect(r.status).to.equal(503);
    expect(r.body.error.code).to.equal("chain_unavailable");
    expect(Number(r.headers.get("retry-after"))).to.be.greaterThan(0);
    expect(Date.now() - t0).to.be.lessThan(5_000);
  });

  it("while the chain is down, /health says so with 503", async () => {
    const h = await s.api("GET", "/health", { headers: OPERATOR_HEADERS });
    expect(h.status).to.equal(503);
    expect(h.body.chain.reachable).to.equal(false);
    expect(h.body.executor.alive).to.be.greaterThan(0);
  });

  it("while the chain is down, /health without the operator token says only degraded and the processed block", async () => {
    const h = await s.api("GET", "/health");
    expect(h.status).to.equal(503);
    expect(Object.keys(h.body).sort()).to.deep.equal(["last_processed_block", "status"]);
    expect(h.body.status).to.equal("degraded");
  });

  it("while the chain is down, a new key that needs a chain lookup answers 503, not 401", async () => {
    const r = await s.api("GET", "/core/v1/pkps", { key: s.enclave.generateUsageKey().apiKey });
    expect(r.status).to.equal(503);
    expect(r.body.error.code).to.equal("chain_unavailable");
  });

  it("executions authorized from the cache keep working while the chain is down", async () => {
    const r = await s.api("POST", "/core/v1/svc_action", {
      key: a.accountKey,
      body: { cid: a.cid, pkp_id: a.pkpId },
    });
    expect(r.status).to.equal(200);
  });

  it("after the chain is back on the same port, writes succeed again without restarting the relayer", async () => {
    await s.chain.restart();
    const t0 = Date.now();
    let r;
    do {
      r = await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "after outage" } });
      if (r.status === 201) break;
      expect(r.status).to.equal(503);
      await new Promise((res) => setTimeout(res, 100));
    } while (Date.now() - t0 < 15_000);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    const h = await s.api("GET", "/health", { headers: OPERATOR_HEADERS });
    expect(h.status).to.equal(200);
    expect(h.body.cache.last_processed_block).to.be.at.least(h.body.chain.head_block - 1);
  });

  it("the state written before the outage survived, and the cache still matches it", async () => {
    const r = await s.api("GET", "/core/v1/pkps", { key: a.accountKey });
    expect(r.body.total).to.equal(2);
    expect(r.body.items[0].pkp_id).to.equal(a.pkpId);
  });
});
