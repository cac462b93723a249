/**
 * Exactly once across `kill -9` (issue: "a write retried with its Idempotency-Key after kill -9 never
 * lands twice"), with real processes: the service as `npm start` runs it (scripts/start.ts, through the
 * cluster script's instance launcher), a real anvil, concurrent idempotent pkps/create writes from
 * several accounts, SIGKILL in the middle of the burst, then every request retried with the same key,
 * body and Idempotency-Key:
 *  - SQLite: the one process restarted on the same data folder;
 *  - PostgreSQL: two instances, the retries sent to the one that was not killed.
 * Afterwards exactly one PKP per request on chain, the answers before the kill replayed unchanged,
 * one charge per write, and the billing audit clean.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { JsonRpcProvider, NonceManager, Wallet } from "ethers";
import { auditWriteCharges } from "../../relayer/billing/audit";
import { startCluster, type Cluster } from "../../scripts/cluster/cluster";
import { startInstance, type RunningInstance } from "../../scripts/cluster/instance";
import { deploySigil, type SigilDeployment } from "../../scripts/deploy";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEY, startChain, type TestChain } from "../helpers/anvil";

type Json = Record<string, unknown>;
const ACCOUNTS = 3;
const PER_ACCOUNT = 10;

async function call(
  url: string,
  route: string,
  key: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Json; replayed: boolean }> {
  const r = await fetch(url + route, {
    method: "POST",
    headers: { ...headers, ...(key ? { "x-api-key": key } : {}), "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return {
    status: r.status,
    body: (await r.json()) as Json,
    replayed: r.headers.get("idempotent-replayed") === "true",
  };
}

interface Request {
  key: string;
  accountId: number;
  name: string;
  idem: string;
  before?: { status: number; body: Json } | "connection_lost";
}

/** Accounts and the burst's requests: PER_ACCOUNT PKPs each, every one with its own name and key. */
async function accounts(url: string): Promise<Request[]> {
  const out: Request[] = [];
  for (let a = 0; a < ACCOUNTS; a++) {
    const r = await call(url, "/core/v1/new_account", undefined, { account_name: `once-${a}` });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    for (let i = 0; i < PER_ACCOUNT; i++)
      out.push({
        key: r.body.api_key as string,
        accountId: Number(r.body.account_id),
        name: `a${a}-p${i}`,
        idem: `burst-${a}-${i}`,
      });
  }
  return out;
}

const create = (url: string, q: Request) =>
  call(url, "/core/v1/pkps/create", q.key, { name: q.name }, { "idempotency-key": q.idem });

/**
 * The burst in two waves, and SIGKILL in the middle of it, timed so that the kill catches writes in
 * every state it can: a few answered first (the first wave); then the chain stops mining on arrival
 * and the second wave is sent, so its transactions wait in the pool (sent only after mining stopped:
 * had the whole burst gone at once, a fast machine could mine every write before mining stops); the
 * process is frozen (SIGSTOP), those transactions mined, and the process killed: its writes landed and
 * were never answered. The writes queued behind them were claimed and never sent. (Sent-and-not-mined
 * and the other states: test/relayer/idempotencyCrash.)
 */
async function burstWithKill(
  url: string,
  rpcUrl: string,
  reqs: Request[],
  instance: { pid: number; kill(): Promise<void> },
): Promise<void> {
  const provider = new JsonRpcProvider(rpcUrl, undefined, { staticNetwork: true, batchMaxCount: 1 });
  const FIRST_WAVE = 6;
  let answered = 0;
  let fourAnswers!: () => void;
  const enoughAnswered = new Promise<void>((r) => (fourAnswers = r));
  const send = (wave: Request[]) =>
    wave.map(async (q) => {
      try {
        const r = await create(url, q);
        q.before = { status: r.status, body: r.body };
        if (++answered === 4) fourAnswers();
      } catch {
        q.before = "connection_lost";
      }
    });
  const firstWave = send(reqs.slice(0, FIRST_WAVE));
  let secondWave: Array<Promise<void>> = [];
  try {
    await enoughAnswered;
    await provider.send("evm_setAutomine", [false]);
    secondWave = send(reqs.slice(FIRST_WAVE));
    for (const givenUp = Date.now() + 30_000; ;) {
      const pool = (await provider.send("txpool_status", [])) as { pending: string };
      if (Number(BigInt(pool.pending)) >= 1) break;
      if (Date.now() > givenUp) throw new Error("no write reached the pool within 30 s");
      await new Promise((r) => setTimeout(r, 5));
    }
    process.kill(instance.pid, "SIGSTOP");
    await provider.send("evm_mine", []);
    await instance.kill();
    await provider.send("evm_setAutomine", [true]);
    await Promise.all([...firstWave, ...secondWave]);
  } finally {
    provider.destroy();
  }
  expect(
    reqs.filter((q) => q.before === "connection_lost").length,
    "requests cut by the kill",
  ).to.be.greaterThan(0);
}

/**
 * Every request again, same key, body and Idempotency-Key, all at once, as a client following
 * docs/errors.md does: 409 idempotency_key_in_flight (the original's claim is still held: a dead
 * instance's until its lease ends), 503 (the chain or database slow on a loaded machine) and 409
 * write_reverted (stale_nonce) are retried with the same key.
 */
async function retryAll(url: string, reqs: Request[]) {
  return Promise.all(
    reqs.map(async (q) => {
      for (let attempt = 0; ; attempt++) {
        const r = await create(url, q);
        const code = (r.body.error as Json | undefined)?.code;
        const temporary =
          r.status === 503 || code === "idempotency_key_in_flight" || code === "write_reverted";
        if (!temporary || attempt >= 5) return r;
        await new Promise((done) => setTimeout(done, 500));
      }
    }),
  );
}

async function expectExactlyOnce(
  rpcUrl: string,
  deployment: { registry: string; forwarder: string; deployBlock: number },
  reqs: Request[],
  retried: Array<{ status: number; body: Json; replayed: boolean }>,
  ledger: { ledgerPath: string; databaseUrl?: string },
) {
  const provider = new JsonRpcProvider(rpcUrl, undefined, { staticNetwork: true, batchMaxCount: 1 });
  try {
    expect(
      retried.filter((r) => r.status !== 201).map((r) => [r.status, r.body]),
      "every retry answered 201",
    ).to.deep.equal([]);
    const registry = AccountRegistry__factory.connect(deployment.registry, provider);
    const names = new Map<string, string[]>();
    let minedWithoutAnswer = 0;
    for (const id of new Set(reqs.map((q) => q.accountId))) {
      const [items] = await registry.listPkps(id, 0, 100);
      for (const p of items)
        names.set(`${id}/${p.name}`, [...(names.get(`${id}/${p.name}`) ?? []), p.id.toLowerCase()]);
    }
    reqs.forEach((q, i) => {
      const onChain = names.get(`${q.accountId}/${q.name}`) ?? [];
      expect(onChain, `PKPs named ${q.name}`).to.have.length(1);
      expect(retried[i].body.pkp_id, `the retry of ${q.name} names its PKP`).to.equal(onChain[0]);
      if (q.before === "connection_lost" && retried[i].replayed) minedWithoutAnswer++;
      if (q.before !== "connection_lost" && q.before?.status === 201) {
        expect(retried[i].replayed).to.equal(true);
        expect(retried[i].body).to.deep.equal(q.before.body);
      }
    });
    expect([...names.values()].flat()).to.have.length(reqs.length);
    // The kill caught writes that had landed without an answer: their retries answered from the chain.
    expect(
      minedWithoutAnswer,
      "writes mined without an answer, replayed from their receipts",
    ).to.be.greaterThan(0);
    const report = await auditWriteCharges({
      rpc: provider,
      ledgerPath: ledger.ledgerPath,
      databaseUrl: ledger.databaseUrl,
      registry: deployment.registry,
      forwarder: deployment.forwarder,
      chainId: 31337,
      fromBlock: deployment.deployBlock,
      gasWallets: null,
      settleMs: 0,
    });
    expect(report.differences, "the billing audit").to.deep.equal([]);
    // One charge per write: every PKP of the burst, and nothing else.
    expect(report.writeCharges).to.equal(report.billableWrites);
    expect(report.billableWrites).to.equal(reqs.length);
  } finally {
    provider.destroy();
  }
}

describe("exactly once across kill -9: one process on SQLite, restarted on its data folder", function () {
  this.timeout(300_000);
  let chain: TestChain;
  let deployment: SigilDeployment;
  let dir: string;
  let instance: RunningInstance | null = null;

  before(async () => {
    chain = await startChain();
    const provider = new JsonRpcProvider(chain.rpcUrl);
    deployment = await deploySigil(new NonceManager(new Wallet(DEV_KEY, provider)));
    provider.destroy();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-once-kill-"));
  });
  after(async () => {
    await instance?.stop();
    await chain?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const start = () =>
    startInstance({
      id: "",
      host: "127.0.0.1",
      port: 0,
      dataDir: dir,
      env: {
        ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SIGIL_"))),
        SIGIL_RPC_URL: chain.rpcUrl,
        SIGIL_CHAIN_ID: "31337",
        SIGIL_DEV_MODE: "true",
        SIGIL_REGISTRY_ADDRESS: deployment.registry,
        SIGIL_FORWARDER_ADDRESS: deployment.forwarder,
        SIGIL_DEPLOY_BLOCK: String(deployment.deployBlock),
        SIGIL_SIGNUP_CREDIT_CENTS: "10000",
        // Every charge committed before its answer (docs/deployment.md, wherever a process can be killed).
        SIGIL_CHARGE_FLUSH_MS: "0",
        SIGIL_LOG_LEVEL: "warn",
        SIGIL_RATE_LIMIT_PER_IP_PER_MINUTE: "100000",
      },
    });

  it("every request retried after the restart lands exactly once and is charged once", async () => {
    instance = await start();
    const reqs = await accounts(instance.url);
    const first = instance;
    await burstWithKill(first.url, chain.rpcUrl, reqs, first);
    instance = await start();
    const retried = await retryAll(instance.url, reqs);
    await expectExactlyOnce(chain.rpcUrl, deployment, reqs, retried, {
      ledgerPath: path.join(dir, "ledger.sqlite"),
    });
  });
});

describe("exactly once across kill -9: two instances on PostgreSQL, retried on the other one", function () {
  this.timeout(300_000);
  let dir: string;
  let cluster: Cluster;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-once-cluster-"));
    cluster = await startCluster({
      dataDir: dir,
      instances: 2,
      basePort: 0,
      anvilPort: 0,
      env: {
        SIGIL_LOG_LEVEL: "warn",
        SIGIL_SIGNUP_CREDIT_CENTS: "10000",
        // Every charge committed before its answer (docs/deployment.md, wherever a process can be killed).
        SIGIL_CHARGE_FLUSH_MS: "0",
        SIGIL_RATE_LIMIT_PER_IP_PER_MINUTE: "100000",
      },
    });
  });
  after(async () => {
    await cluster?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("every request retried on the surviving instance lands exactly once and is charged once", async () => {
    const [killed, survivor] = cluster.instances;
    const reqs = await accounts(killed.url);
    await burstWithKill(killed.url, cluster.rpcUrl, reqs, killed);
    const retried = await retryAll(survivor.url, reqs);
    await expectExactlyOnce(cluster.rpcUrl, cluster.deployment, reqs, retried, {
      ledgerPath: "",
      databaseUrl: cluster.databaseUrl,
    });
  });
});
