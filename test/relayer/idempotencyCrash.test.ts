/**
 * Exactly once across a crash, every state deterministic (relayer/idempotency.ts, chain/send/reconcile.ts):
 * the chain is driven by hand (automine off, blocks mined, transactions dropped, time moved) so that an
 * idempotent pkps/create is left in each state a crash can leave it in, then retried with the same key,
 * body and Idempotency-Key. Each retry makes exactly one PKP in all and the write is charged once (the
 * audit of the ledger against the chain is clean), on SQLite and on PostgreSQL. A claim "left by a dead
 * process" is a row written directly, as the process would have left it.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { expect } from "chai";
import { Client } from "pg";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { auditWriteCharges } from "../../relayer/billing/audit";
import { Wallet, type TypedDataField } from "ethers";
import { FORWARD_REQUEST_TYPES } from "../../enclave";
import { forwarderInterface, registryInterface } from "../../relayer/chain/abi";
import type { RecordedForwardRequest } from "../../relayer/chain/sender";
import { reconcile, type Reconciled } from "../../relayer/chain/send/reconcile";
import { fingerprint, sealContextOf } from "../../relayer/idempotency";
import { AccountRegistry__factory } from "../../typechain-types";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { describeOnEngines, describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { fundInstanceGasWallets, startStack, type Stack } from "../helpers/stack";

describeOnEngines("relayer: an Idempotency-Key write retried after a crash lands once", function (engine) {
  this.timeout(120_000);
  let s: Stack;
  let billing: Billing;
  let dir: string;
  let databaseUrl: string | undefined;
  let key: string;
  let accountId: number;
  let n = 0;

  before(async () => {
    databaseUrl = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-once-"));
    billing = await createBilling({
      dbPath: path.join(dir, "ledger.sqlite"),
      databaseUrl,
      processor: new SimulatedProcessor(),
      signupCreditCents: 10_000,
      chargeFlushMs: 0,
    });
    // A short receipt wait: a write whose transaction is not mined answers 503 quickly (sent, no answer).
    s = await startStack({ databaseUrl, billing, receiptTimeoutMs: 1_500, syncSend: "off" });
    const a = await s.api("POST", "/core/v1/new_account", { body: { account_name: "once" } });
    key = a.body.api_key;
    accountId = a.body.account_id;
  });
  after(async () => {
    await s?.provider.send("evm_setAutomine", [true]).catch(() => undefined);
    await s?.close();
    await billing?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await s.provider.send("evm_setAutomine", [true]);
  });

  const pkps = async () => {
    const registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
    const [items] = await registry.listPkps(accountId, 0, 100);
    return items.map((p) => ({ id: p.id.toLowerCase(), name: p.name }));
  };
  const named = async (name: string) => (await pkps()).filter((p) => p.name === name);
  const create = (name: string, idem: string) =>
    s.api("POST", "/core/v1/pkps/create", { key, body: { name }, headers: { "idempotency-key": idem } });
  const automine = (on: boolean) => s.provider.send("evm_setAutomine", [on]);
  const mine = () => s.provider.send("evm_mine", []);
  const fresh = () => {
    n++;
    return { name: `once-${n}`, idem: `once-key-${n}` };
  };

  /** The audit of the ledger against the chain: every billable write charged exactly once. */
  async function expectBillingClean() {
    const report = await auditWriteCharges({
      rpc: s.provider,
      ledgerPath: path.join(dir, "ledger.sqlite"),
      databaseUrl,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      chainId: 31337,
      fromBlock: s.deployment.deployBlock,
      gasWallets: null,
      settleMs: 0,
    });
    expect(report.differences).to.deep.equal([]);
    expect(report.writeCharges).to.equal(report.billableWrites);
  }

  /** The first attempt sends its transaction and loses its answer (503: not mined within the wait). */
  async function sentWithoutAnswer(name: string, idem: string) {
    await automine(false);
    const r = await create(name, idem);
    expect(r.status, JSON.stringify(r.body)).to.equal(503);
    expect(r.body.error.code).to.equal("chain_unavailable");
    expect(await s.provider.send("txpool_content", [])).to.not.deep.equal({ pending: {}, queued: {} });
  }

  /** One statement on the idempotency records, wherever this engine keeps them ($n placeholders). */
  async function records(query: string, values: unknown[]): Promise<Array<Record<string, unknown>>> {
    if (databaseUrl) {
      const c = new Client({ connectionString: databaseUrl });
      await c.connect();
      try {
        return (await c.query(query, values)).rows as Array<Record<string, unknown>>;
      } finally {
        await c.end();
      }
    }
    // The relayer keeps its tables in the billing ledger's database (one file).
    const db = new BetterSqlite3(path.join(dir, "ledger.sqlite"));
    try {
      const st = db.prepare(query.replace(/\$\d+/g, "?"));
      return st.reader ? (st.all(...values) as Array<Record<string, unknown>>) : (st.run(...values), []);
    } finally {
      db.close();
    }
  }

  /** Writes the row a process killed right after claiming would have left (nothing recorded). */
  async function deadClaim(name: string, idem: string) {
    const address = s.enclave.parseApiKey(key).address;
    const scope = `key:${address}`;
    const fp = fingerprint("POST", "/core/v1/pkps/create", { name }, sealContextOf(scope, key, idem));
    await records(
      `INSERT INTO idempotency (scope, key, fingerprint, status, body, created_ms, owner, heartbeat_ms, writes)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [scope, idem, fp, 0, "", Date.now(), "dead-process", 0, ""],
    );
  }

  it("claimed, nothing sent: the retry takes over the dead claim and writes once", async () => {
    const { name, idem } = fresh();
    await deadClaim(name, idem);
    const r = await create(name, idem);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.headers.get("idempotent-replayed")).to.equal(null);
    expect(await named(name)).to.deep.equal([{ id: r.body.pkp_id, name }]);
  });

  it("recorded, never broadcast: the retry sends the same signed request, which lands once", async () => {
    const { name, idem } = fresh();
    await sentWithoutAnswer(name, idem);
    // As if the broadcast had never reached the node.
    await s.provider.send("anvil_dropAllTransactions", []);
    await automine(true);
    const r = await create(name, idem);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(await named(name)).to.deep.equal([{ id: r.body.pkp_id, name }]);
    await expectBillingClean();
  });

  it("sent, not mined: the retry sends the same request again; one copy executes, one PKP", async () => {
    const { name, idem } = fresh();
    await sentWithoutAnswer(name, idem);
    const retry = create(name, idem);
    // Both copies wait in the pool; one block takes them both and the forwarder runs only one.
    await new Promise((r) => setTimeout(r, 400));
    await mine();
    const r = await retry;
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(await named(name)).to.deep.equal([{ id: r.body.pkp_id, name }]);
    await expectBillingClean();
  });

  it("mined without an answer: the retry answers from the receipt with Idempotent-Replayed", async () => {
    const { name, idem } = fresh();
    await sentWithoutAnswer(name, idem);
    await mine();
    await automine(true);
    const [landed] = await named(name);
    const r = await create(name, idem);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.headers.get("idempotent-replayed")).to.equal("true");
    expect(r.body.pkp_id).to.equal(landed.id);
    expect(r.body.name).to.equal(name);
    expect(await named(name)).to.deep.equal([landed]);
    await expectBillingClean();
  });

  it("mined, but recorded with a start block past it: found by the search over the whole chain", async () => {
    const { name, idem } = fresh();
    await sentWithoutAnswer(name, idem);
    await mine();
    await automine(true);
    const [landed] = await named(name);
    const [row] = await records("SELECT writes FROM idempotency WHERE key = $1", [idem]);
    const [w] = JSON.parse(row.writes as string) as RecordedForwardRequest[];
    // A deep reorganisation could leave the recorded start block after the execution: the search from
    // it finds nothing, the one over the whole chain must find it.
    await mine();
    const asked: Array<[number, number]> = [];
    const recording = {
      send: async (method: string, params: unknown[]) => {
        if (method === "eth_getLogs") {
          const { fromBlock, toBlock } = params[0] as { fromBlock: string; toBlock: string };
          asked.push([Number(fromBlock), Number(toBlock)]);
        }
        return s.provider.send(method, params);
      },
    };
    const head = await s.provider.getBlockNumber();
    const found = await reconcile(recording, s.deployment.forwarder, { ...w, fromBlock: head });
    expect(found.kind).to.equal("executed");
    const executed = found as Extract<Reconciled, { kind: "executed" }>;
    const receipt = await s.provider.getTransactionReceipt(executed.result.txHash);
    const created = receipt!.logs
      .map((l) => registryInterface.parseLog(l))
      .find((e) => e?.name === "PkpCreated");
    expect(String(created!.args.pkpId).toLowerCase()).to.equal(landed.id);
    expect(asked).to.deep.equal([
      [head, head],
      [0, head],
    ]);
    const r = await create(name, idem); // answered (and charged) by the relayer's own reconciliation
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.pkp_id).to.equal(landed.id);
    await expectBillingClean();
  });

  it("mined, charged by the billing catch-up first: the retry does not charge it again", async () => {
    const { name, idem } = fresh();
    await sentWithoutAnswer(name, idem);
    await mine();
    await automine(true);
    const gasWallets = Array.from({ length: 4 }, (_, i) => s.enclave.gasAddress(i));
    const pass = await billing
      .writeCatchUp({
        rpc: s.provider,
        chainId: 31337,
        registry: s.deployment.registry,
        forwarder: s.deployment.forwarder,
        deployBlock: s.deployment.deployBlock,
        confirmations: 0,
        gasWallets,
        settleMs: 0,
        everyMs: 0,
      })
      .runOnce();
    expect(pass.charged).to.equal(1);
    const r = await create(name, idem);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.headers.get("idempotent-replayed")).to.equal("true");
    await expectBillingClean();
  });

  it("answered: the retry replays the kept answer", async () => {
    const { name, idem } = fresh();
    const first = await create(name, idem);
    const r = await create(name, idem);
    expect(r.status).to.equal(201);
    expect(r.headers.get("idempotent-replayed")).to.equal("true");
    expect(r.body).to.deep.equal(first.body);
    expect(await named(name)).to.have.length(1);
  });

  it("never executed and past its deadline: only then a fresh request, which lands once", async () => {
    const { name, idem } = fresh();
    await sentWithoutAnswer(name, idem);
    await s.provider.send("anvil_dropAllTransactions", []);
    await automine(true);
    // The recorded request, as if it had been signed with a deadline that has passed since (the
    // relayer's own deadline is 10 minutes, and the chain's clock cannot be moved back afterwards).
    const [row] = await records("SELECT writes FROM idempotency WHERE key = $1", [idem]);
    const [w] = JSON.parse(row.writes as string) as RecordedForwardRequest[];
    const head = await s.provider.getBlock("latest");
    const deadline = head!.timestamp - 1;
    const resigned = await s.enclave.signForwardRequest(
      key,
      {
        to: w.to,
        data: w.data,
        value: BigInt(w.value),
        gas: BigInt(w.gas),
        nonce: BigInt(w.nonce),
        deadline,
      },
      { name: "SigilForwarder", version: "1", chainId: 31337, verifyingContract: s.deployment.forwarder },
    );
    await records("UPDATE idempotency SET writes = $1 WHERE key = $2", [
      JSON.stringify([{ ...w, deadline, signature: resigned.signature }]),
      idem,
    ]);
    const r = await create(name, idem);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(await named(name)).to.deep.equal([{ id: r.body.pkp_id, name }]);
    await expectBillingClean();
  });

  it("never executed, its nonce used by another write: a fresh request, which lands once", async () => {
    const { name, idem } = fresh();
    await sentWithoutAnswer(name, idem);
    await s.provider.send("anvil_dropAllTransactions", []);
    await automine(true);
    const other = await s.api("POST", "/core/v1/pkps/create", { key, body: { name: `${name}-other` } });
    expect(other.status).to.equal(201);
    const r = await create(name, idem);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(await named(name)).to.deep.equal([{ id: r.body.pkp_id, name }]);
    await expectBillingClean();
  });

  it("a new account mined without an answer: its key was never stored, so retries say so and write nothing", async () => {
    const idem = fresh().idem;
    const body = { account_name: `lost-${idem}` };
    const headers = { "idempotency-key": idem };
    await automine(false);
    const first = await s.api("POST", "/core/v1/new_account", { body, headers });
    expect(first.status, JSON.stringify(first.body)).to.equal(503);
    await mine();
    await automine(true);
    const created = async () =>
      (
        await s.provider.getLogs({
          address: s.deployment.registry,
          topics: [registryInterface.getEvent("AccountCreated")!.topicHash],
          fromBlock: s.deployment.deployBlock,
        })
      ).length;
    const before = await created();
    for (let i = 0; i < 2; i++) {
      const r = await s.api("POST", "/core/v1/new_account", { body, headers });
      expect(r.status, JSON.stringify(r.body)).to.equal(409);
      expect(r.body.error.code).to.equal("idempotency_key_reused");
      expect(r.body.error.details.reason).to.equal("answer_lost");
    }
    expect(await created()).to.equal(before);
  });
  it("a client-signed forward request mined without an answer: the retry answers from its receipt", async () => {
    const usage = await s.api("POST", "/core/v1/add_usage_api_key", {
      key,
      body: { name: "signer", can_create_groups: true },
    });
    expect(usage.status, JSON.stringify(usage.body)).to.equal(201);
    const wallet = new Wallet("0x" + (usage.body.usage_api_key as string).slice(3));
    const nonce = forwarderInterface.decodeFunctionResult(
      "nonces",
      await s.provider.call({
        to: s.deployment.forwarder,
        data: forwarderInterface.encodeFunctionData("nonces", [wallet.address]),
      }),
    )[0] as bigint;
    const request = {
      from: wallet.address,
      to: s.deployment.registry,
      value: "0",
      gas: "500000",
      nonce: nonce.toString(),
      deadline: Math.floor(Date.now() / 1000) + 300,
      data: registryInterface.encodeFunctionData("createGroup", ["signed-once", "", [], []]),
    };
    const signature = await wallet.signTypedData(
      { name: "SigilForwarder", version: "1", chainId: 31337, verifyingContract: s.deployment.forwarder },
      { ForwardRequest: FORWARD_REQUEST_TYPES.ForwardRequest as TypedDataField[] },
      request,
    );
    const send = () =>
      s.api("POST", "/core/v1/forward", {
        body: { ...request, signature },
        headers: { "idempotency-key": "forward-once" },
      });
    await automine(false);
    const first = await send();
    expect(first.status, JSON.stringify(first.body)).to.equal(503);
    await mine();
    await automine(true);
    const r = await send();
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.headers.get("idempotent-replayed")).to.equal("true");
    expect(r.body.operation).to.equal("createGroup");
    const groups = await s.api("GET", "/core/v1/groups", { key });
    expect(groups.body.items.filter((g: { name: string }) => g.name === "signed-once")).to.have.length(1);
    await expectBillingClean();
  });
});

describeOnPostgres("relayer: an Idempotency-Key write retried on another instance (PostgreSQL)", function () {
  this.timeout(120_000);
  let s: Stack;
  let other: RunningRelayer;
  let key: string;
  let accountId: number;

  before(async () => {
    const databaseUrl = await freshDatabaseUrl();
    s = await startStack({ databaseUrl, receiptTimeoutMs: 1_500, syncSend: "off" });
    await fundInstanceGasWallets(s, "b");
    other = await startRelayer({
      ...s.relayerOptions,
      instanceId: "b",
      dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "sigil-once-b-")),
      port: 0,
      // The original on the first instance waits for its receipt longer than this test takes.
      receiptTimeoutMs: 30_000,
    });
    const a = await s.api("POST", "/core/v1/new_account", { body: { account_name: "once-b" } });
    key = a.body.api_key;
    accountId = a.body.account_id;
  });
  after(async () => {
    await s?.provider.send("evm_setAutomine", [true]).catch(() => undefined);
    await other?.close();
    await s?.close();
  });

  const post = (url: string, name: string, idem: string) =>
    fetch(url + "/core/v1/pkps/create", {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": idem },
      body: JSON.stringify({ name }),
    }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as Record<string, unknown>,
      replayed: r.headers.get("idempotent-replayed") === "true",
    }));
  const named = async (name: string) => {
    const registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
    const [items] = await registry.listPkps(accountId, 0, 100);
    return items.filter((p) => p.name === name).map((p) => p.id.toLowerCase());
  };

  it("a retry reaching the other instance while the original is in flight waits for it and writes nothing", async () => {
    await s.provider.send("evm_setAutomine", [false]);
    // The original on the second instance: sent, waiting for its receipt.
    const original = post(other.url, "in-flight", "in-flight-1");
    for (;;) {
      const pool = (await s.provider.send("txpool_status", [])) as { pending: string };
      if (Number(BigInt(pool.pending)) >= 1) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const retry = post(s.url, "in-flight", "in-flight-1");
    await new Promise((r) => setTimeout(r, 500));
    await s.provider.send("evm_mine", []);
    await s.provider.send("evm_setAutomine", [true]);
    const [o, r] = await Promise.all([original, retry]);
    expect(o.status, JSON.stringify(o.body)).to.equal(201);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.replayed).to.equal(true);
    expect(r.body).to.deep.equal(o.body);
    expect(await named("in-flight")).to.deep.equal([o.body.pkp_id]);
  });

  it("mined without an answer on one instance: the retry on the other answers from the receipt", async () => {
    // The first instance learns the account's current forwarder nonce (the other one wrote last).
    expect((await post(s.url, "sync", "sync-1")).status).to.equal(201);
    await s.provider.send("evm_setAutomine", [false]);
    const first = await post(s.url, "elsewhere", "elsewhere-1");
    expect(first.status, JSON.stringify(first.body)).to.equal(503);
    await s.provider.send("evm_mine", []);
    await s.provider.send("evm_setAutomine", [true]);
    const r = await post(other.url, "elsewhere", "elsewhere-1");
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.replayed).to.equal(true);
    expect(await named("elsewhere")).to.deep.equal([r.body.pkp_id]);
  });
});
