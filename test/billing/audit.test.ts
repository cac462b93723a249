/**
 * Every path-A write is charged exactly once, also when many writes share one executeBatch
 * transaction, and `npm run audit:billing` agrees with the chain: against the real stack (anvil, the
 * contracts, the relayer with a real ledger). Then the ledger is tampered with (a copy of it) and the
 * audit must name the difference and exit 1.
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { expect } from "chai";
import { auditWriteCharges, type AuditReport } from "../../relayer/billing/audit";
import { balanceOf, newAccount, startBilledStack, type BilledStack } from "./support";

const ROOT = path.resolve(__dirname, "../..");

describe("billing: batched writes are each charged, and the audit agrees with the chain", function () {
  this.timeout(180_000);
  let b: BilledStack;
  let gasWallets: string[];

  before(async () => {
    b = await startBilledStack();
    gasWallets = Array.from({ length: b.s.relayerOptions.gasWallets ?? 4 }, (_, i) =>
      b.s.enclave.gasAddress(i),
    );
  });
  after(async () => {
    await b?.close();
  });

  const audit = (ledgerPath = b.ledgerPath): Promise<AuditReport> =>
    auditWriteCharges({
      rpc: b.s.provider,
      ledgerPath,
      registry: b.s.deployment.registry,
      forwarder: b.s.deployment.forwarder,
      chainId: 31337,
      fromBlock: b.s.deployment.deployBlock,
      gasWallets,
      settleMs: 0,
    });

  /** The CLI, as an operator runs it: npm start's configuration in the environment, plus flags. */
  function cli(ledgerPath: string): { status: number | null; stdout: string; stderr: string } {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("SIGIL_")) env[k] = v;
    Object.assign(env, {
      SIGIL_DATA_DIR: b.dir,
      SIGIL_RPC_URL: b.s.chain.rpcUrl,
      SIGIL_DEV_MODE: "true",
      SIGIL_CHAIN_ID: "31337",
      SIGIL_REGISTRY_ADDRESS: b.s.deployment.registry,
      SIGIL_FORWARDER_ADDRESS: b.s.deployment.forwarder,
      SIGIL_DEPLOY_BLOCK: String(b.s.deployment.deployBlock),
    });
    const r = spawnSync(
      process.execPath,
      [
        "-r",
        "ts-node/register/transpile-only",
        "scripts/audit-billing.ts",
        "--ledger",
        ledgerPath,
        "--gas-wallets",
        gasWallets.join(","),
        "--settle-ms",
        "0",
      ],
      { cwd: ROOT, env, encoding: "utf8", timeout: 120_000 },
    );
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  /** A copy of the ledger to tamper with (the live one stays as the relayer wrote it). */
  async function ledgerCopy(name: string): Promise<BetterSqlite3.Database> {
    await b.billing.flushCharges();
    const target = path.join(b.dir, name);
    const live = new BetterSqlite3(b.ledgerPath, { readonly: true });
    await live.backup(target);
    live.close();
    return new BetterSqlite3(target);
  }

  it("8 accounts creating a PKP at the same moment share one transaction and are each charged 1 cent", async () => {
    const accounts = [];
    for (let i = 0; i < 8; i++) accounts.push(await newAccount(b));
    for (const a of accounts) expect(await balanceOf(b, a.key)).to.equal(100);
    b.batchNext(8);
    const created = await Promise.all(
      accounts.map((a) => b.s.api("POST", "/core/v1/pkps/create", { key: a.key, body: {} })),
    );
    expect(created.map((r) => r.status)).to.deep.equal(Array(8).fill(201));
    expect(new Set(created.map((r) => r.body.tx_hash)).size).to.equal(1);
    const balances = await Promise.all(accounts.map((a) => balanceOf(b, a.key)));
    expect(balances).to.deep.equal(Array(8).fill(99));
  });

  it("a concurrent burst of batched writes from 12 accounts is charged once per write", async () => {
    const accounts = [];
    for (let i = 0; i < 12; i++) accounts.push(await newAccount(b));
    const writes = accounts.flatMap((a) => [
      b.s.api("POST", "/core/v1/pkps/create", { key: a.key, body: {} }),
      b.s.api("POST", "/core/v1/groups", { key: a.key, body: { name: "g" } }),
      b.s.api("POST", "/core/v1/pkps/create", { key: a.key, body: {} }),
    ]);
    const answers = await Promise.all(writes);
    expect(answers.map((r) => r.status)).to.deep.equal(Array(36).fill(201));
    // They were batched: fewer transactions than writes.
    expect(new Set(answers.map((r) => r.body.tx_hash)).size).to.be.lessThan(36);
    const balances = await Promise.all(accounts.map((a) => balanceOf(b, a.key)));
    expect(balances).to.deep.equal(Array(12).fill(97));
  });

  it("the audit (as a function) finds every write charged exactly once and nothing else", async () => {
    await b.billing.flushCharges();
    const report = await audit();
    expect(report.differences).to.deep.equal([]);
    // 8 + 36 writes above; the 20 new_account requests are path-A writes too, and free.
    expect(report.billableWrites).to.equal(44);
    expect(report.writeCharges).to.equal(44);
    expect(report.forwardRequests).to.equal(44 + 20);
  });

  it("npm run audit:billing exits 0 and says clean", async () => {
    await b.billing.flushCharges();
    const r = cli(b.ledgerPath);
    expect(r.stderr).to.equal("");
    expect(r.status, r.stdout).to.equal(0);
    expect(r.stdout).to.match(/44 billable writes, 44 write charges/);
    expect(r.stdout).to.match(/^clean: every write was charged exactly once/m);
  });

  it("a deleted write charge is named as an uncharged write, and the CLI exits 1", async () => {
    const db = await ledgerCopy("deleted.sqlite");
    const victim = db
      .prepare(
        "SELECT id, account_id, reference FROM ledger_entries WHERE reference LIKE 'write:%' LIMIT 1 OFFSET 9",
      )
      .get() as { id: number; account_id: string; reference: string };
    db.prepare("DELETE FROM ledger_entries WHERE id = ?").run(victim.id);
    db.close();
    const [, , , signer, nonce] = victim.reference.split(":");
    const report = await audit(path.join(b.dir, "deleted.sqlite"));
    expect(report.differences).to.have.length(1);
    const d = report.differences[0];
    expect(d.kind).to.equal("uncharged");
    expect(d.write).to.include({ signer, nonce: BigInt(nonce), accountId: victim.account_id, success: true });

    const r = cli(path.join(b.dir, "deleted.sqlite"));
    expect(r.status, r.stdout).to.equal(1);
    expect(r.stdout).to.include("1 difference(s):");
    const row = r.stdout.split("\n").find((l) => l.startsWith("uncharged write"));
    expect(row).to.include(signer).and.to.include(` ${nonce} `).and.to.include(d.write!.txHash);
  });

  it("a stray write charge (no such request on chain) is named, and the CLI exits 1", async () => {
    const db = await ledgerCopy("stray.sqlite");
    const some = db
      .prepare("SELECT account_id, reference FROM ledger_entries WHERE reference LIKE 'write:%' LIMIT 1")
      .get() as { account_id: string; reference: string };
    const parts = some.reference.split(":");
    const stray = [...parts.slice(0, 4), "999999"].join(":");
    db.prepare(
      `INSERT INTO ledger_entries (account_id, kind, amount_cents, balance_after_cents, reference, key_address, operation, created_at)
       VALUES (?, 'debit', 1, 0, ?, NULL, 'create_pkp', 0)`,
    ).run(some.account_id, stray);
    db.close();
    const report = await audit(path.join(b.dir, "stray.sqlite"));
    expect(report.differences).to.have.length(1);
    expect(report.differences[0]).to.deep.include({
      kind: "stray_charge",
      reason: "the forwarder executed no such request in the audited blocks",
    });

    const r = cli(path.join(b.dir, "stray.sqlite"));
    expect(r.status, r.stdout).to.equal(1);
    expect(r.stdout).to.include(
      "stray charge (the forwarder executed no such request in the audited blocks)",
    );
    expect(r.stdout).to.include(stray);
  });
});
