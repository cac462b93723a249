/**
 * The write catch-up (relayer/billing/catchUp.ts) against the real stack: anvil, the contracts, the
 * relayer with a real SQLite ledger. A write whose charge never committed (the process was SIGKILLed
 * with the charge in the write-behind buffer, or the row is taken back out as if it had never been
 * committed) is charged exactly once, with the reference the normal path would have used, and the
 * audit is clean afterwards; nothing else is ever charged.
 */
import { type ChildProcess, spawn } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { expect } from "chai";
import { Contract, Wallet, parseEther } from "ethers";
import { Enclave } from "../../enclave";
import {
  CAUGHT_UP_OPERATION,
  SimulatedProcessor,
  createBilling,
  writeChargeReference,
  type Billing,
  type WriteCatchUp,
} from "../../relayer/billing";
import { auditWriteCharges, type AuditReport } from "../../relayer/billing/audit";
import { readCursor, type WriteCatchUpOptions } from "../../relayer/billing/catchUp";
import { encodeExecuteBatch, type SignedForwardRequest } from "../../relayer/chain/batch";
import { forwarderInterface, registryInterface } from "../../relayer/chain/abi";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { balanceOf, newAccount, startBilledStack, type BilledStack } from "./support";

const DOMAIN_NAME = "SigilForwarder";

/** A catch-up over the stack's whole chain, run by hand: no confirmations, no settling, no timer. */
function wholeChainCatchUp(b: BilledStack, gasWallets: string[]): WriteCatchUpOptions {
  return {
    rpc: b.s.provider,
    chainId: 31337,
    registry: b.s.deployment.registry,
    forwarder: b.s.deployment.forwarder,
    deployBlock: b.s.deployment.deployBlock,
    confirmations: 0,
    gasWallets,
    settleMs: 0,
    everyMs: 0,
  };
}

describe("billing: the write catch-up charges writes whose charge was lost", function () {
  this.timeout(180_000);
  let b: BilledStack;
  let gasWallets: string[];
  let scope: string;

  before(async () => {
    b = await startBilledStack();
    gasWallets = Array.from({ length: b.s.relayerOptions.gasWallets ?? 4 }, (_, i) =>
      b.s.enclave.gasAddress(i),
    );
    scope = `31337:${b.s.deployment.forwarder.toLowerCase()}`;
  });
  after(async () => {
    await b?.close();
  });

  const catchUp = (): WriteCatchUp => b.billing.writeCatchUp(wholeChainCatchUp(b, gasWallets));

  const audit = (otherWallets: string[] = [], fromBlock = b.s.deployment.deployBlock): Promise<AuditReport> =>
    auditWriteCharges({
      rpc: b.s.provider,
      ledgerPath: b.ledgerPath,
      registry: b.s.deployment.registry,
      forwarder: b.s.deployment.forwarder,
      chainId: 31337,
      fromBlock,
      gasWallets: [...gasWallets, ...otherWallets],
      settleMs: 0,
    });

  /** A PKP created through the API: one billed write; returns its charge's reference. */
  async function createPkp(key: string): Promise<{ reference: string; txHash: string }> {
    const r = await b.s.api("POST", "/core/v1/pkps/create", { key, body: {} });
    expect(r.status).to.equal(201);
    const rows = (await b.billing.db.exec(
      "SELECT reference FROM ledger_entries WHERE reference LIKE 'write:%' ORDER BY id DESC LIMIT 1",
    )) as Array<{ reference: string }>;
    return { reference: rows[0].reference, txHash: r.body.tx_hash as string };
  }

  /** Takes a committed charge back out, balance and key spend included: as if it had never committed. */
  async function loseCharge(reference: string): Promise<void> {
    await b.billing.db.transaction(async (tx) => {
      const [row] = (await tx.exec(
        "SELECT account_id, amount_cents, key_address FROM ledger_entries WHERE reference = ?",
        [reference],
      )) as Array<{ account_id: string; amount_cents: number; key_address: string }>;
      await tx.exec("DELETE FROM ledger_entries WHERE reference = ?", [reference]);
      await tx.exec("UPDATE accounts SET balance_cents = balance_cents + ? WHERE account_id = ?", [
        row.amount_cents,
        row.account_id,
      ]);
      await tx.exec("UPDATE key_spend SET spent_cents = spent_cents - ? WHERE key_address = ?", [
        row.amount_cents,
        row.key_address,
      ]);
    });
  }

  async function chargesOf(reference: string) {
    return (await b.billing.db.exec(
      "SELECT account_id, amount_cents, operation, key_address FROM ledger_entries WHERE reference = ?",
      [reference],
    )) as Array<{ account_id: string; amount_cents: number; operation: string; key_address: string }>;
  }

  it("a write whose charge never committed is charged once, under its own reference, and the audit is clean", async () => {
    const a = await newAccount(b);
    const { reference } = await createPkp(a.key);
    await loseCharge(reference);
    expect(await balanceOf(b, a.key)).to.equal(100);
    expect((await audit()).differences.map((d) => d.kind)).to.deep.equal(["uncharged"]);

    const report = await catchUp().runOnce();
    // Every new_account of this file is in the scanned range too: account creations are free.
    expect(report.charged).to.equal(1);
    expect(await chargesOf(reference)).to.deep.equal([
      {
        account_id: a.accountId,
        amount_cents: 1,
        operation: CAUGHT_UP_OPERATION,
        key_address: reference.split(":")[3],
      },
    ]);
    expect(await balanceOf(b, a.key)).to.equal(99);
    expect((await audit()).differences).to.deep.equal([]);
    const invariant = await b.billing.audit(a.accountId);
    expect(invariant.ledger_sum_cents).to.equal(invariant.balance_cents);
  });

  it("two catch-ups at once, then a third pass, charge a lost write once", async () => {
    const a = await newAccount(b);
    const { reference } = await createPkp(a.key);
    await loseCharge(reference);
    const [one, two] = await Promise.all([catchUp().runOnce(), catchUp().runOnce()]);
    expect(one.charged + two.charged).to.equal(1);
    expect((await catchUp().runOnce()).charged).to.equal(0);
    expect(await chargesOf(reference)).to.have.length(1);
    expect(await balanceOf(b, a.key)).to.equal(99);
    expect((await audit()).differences).to.deep.equal([]);
  });

  it("a write already charged, also under an old transaction-hash reference, is not charged again", async () => {
    const a = await newAccount(b);
    const { reference, txHash } = await createPkp(a.key);
    // As a ledger written before per-request references holds it.
    await b.billing.db.exec("UPDATE ledger_entries SET reference = ? WHERE reference = ?", [
      `write:${txHash}`,
      reference,
    ]);
    const report = await catchUp().runOnce();
    expect(report.charged).to.equal(0);
    expect(await chargesOf(reference)).to.deep.equal([]);
    expect(await balanceOf(b, a.key)).to.equal(99);
  });

  it("a lost charge is recorded in full even when the balance has gone to zero meanwhile (a debt)", async () => {
    const a = await newAccount(b);
    const { reference } = await createPkp(a.key);
    await loseCharge(reference);
    // The account spends its whole balance before the catch-up runs.
    await b.billing.db.exec("UPDATE accounts SET balance_cents = 0 WHERE account_id = ?", [a.accountId]);
    await b.billing.db.exec(
      `INSERT INTO ledger_entries (account_id, kind, amount_cents, balance_after_cents, reference, key_address, operation, created_at)
       VALUES (?, 'debit', 100, 0, ?, NULL, 'execution', 0)`,
      [a.accountId, `exec:test-${a.accountId}`],
    );
    expect((await catchUp().runOnce()).charged).to.equal(1);
    expect(await balanceOf(b, a.key)).to.equal(-1);
    const invariant = await b.billing.audit(a.accountId);
    expect(invariant).to.deep.equal({ balance_cents: -1, ledger_sum_cents: -1 });
  });

  describe("forward requests sent outside this relayer", () => {
    let outside: ReturnType<typeof Wallet.createRandom>;
    const forwarderDomain = () => ({
      name: DOMAIN_NAME,
      version: "1",
      chainId: 31337,
      verifyingContract: b.s.deployment.forwarder,
    });

    before(async () => {
      outside = Wallet.createRandom().connect(b.s.provider);
      await b.s.provider.send("anvil_setBalance", [outside.address, "0x" + parseEther("10").toString(16)]);
    });

    /** One executeBatch from the outside wallet carrying these requests; their signers and nonces. */
    async function sendBatch(
      requests: Array<{ key: string; data: string }>,
    ): Promise<Array<{ signer: string; nonce: bigint }>> {
      const fwd = new Contract(b.s.deployment.forwarder, forwarderInterface, b.s.provider);
      const next = new Map<string, bigint>();
      const signed: SignedForwardRequest[] = [];
      const ids: Array<{ signer: string; nonce: bigint }> = [];
      for (const r of requests) {
        const from = b.s.enclave.principalAddress(r.key);
        const nonce = next.get(from) ?? ((await fwd.nonces(from)) as bigint);
        next.set(from, nonce + 1n);
        ids.push({ signer: from.toLowerCase(), nonce });
        signed.push(
          await b.s.enclave.signForwardRequest(
            r.key,
            {
              to: b.s.deployment.registry,
              data: r.data,
              value: 0n,
              gas: 1_000_000n,
              nonce,
              deadline: Math.floor(Date.now() / 1000) + 600,
            },
            forwarderDomain(),
          ),
        );
      }
      const rc = await (
        await outside.sendTransaction({
          to: b.s.deployment.forwarder,
          data: encodeExecuteBatch(signed, outside.address),
          gasLimit: 5_000_000,
        })
      ).wait();
      expect(rc?.status).to.equal(1);
      return ids;
    }

    const createPkpCall = () => registryInterface.encodeFunctionData("createPkp", ["outside", ""]);
    const revertingCall = () =>
      registryInterface.encodeFunctionData("removeKey", [Wallet.createRandom().address]);

    it("a write sent by a wallet no instance registered is not charged (its sender paid the gas)", async () => {
      const a = await newAccount(b);
      await sendBatch([{ key: a.key, data: createPkpCall() }]);
      expect((await catchUp().runOnce()).charged).to.equal(0);
      expect(await balanceOf(b, a.key)).to.equal(100);
    });

    it("from another instance's registered wallet: the successful write is charged, the reverted request is not", async () => {
      await b.billing.db.exec(
        "INSERT INTO billing_gas_wallets (address, instance_id, registered_at) VALUES (?, 'other', 0)",
        [outside.address.toLowerCase()],
      );
      const a = await newAccount(b);
      const c = await newAccount(b);
      const batchBlock = (await b.s.provider.getBlockNumber()) + 1;
      const [{ n: chargesBefore }] = (await b.billing.db.exec(
        "SELECT MAX(id) AS n FROM ledger_entries",
      )) as Array<{
        n: number;
      }>;
      const [, written] = await sendBatch([
        { key: a.key, data: revertingCall() },
        { key: c.key, data: createPkpCall() },
      ]);
      const report = await catchUp().runOnce();
      // skipped 0: the reverted request is not a billable write at all (not merely one naming no account).
      expect(report).to.include({ charged: 1, skipped: 0 });
      expect(await balanceOf(b, a.key)).to.equal(100);
      expect(await balanceOf(b, c.key)).to.equal(99);
      const rows = await chargesOf(
        writeChargeReference({ chainId: 31337, forwarder: b.s.deployment.forwarder, ...written }),
      );
      expect(rows.map((r) => [r.account_id, r.operation])).to.deep.equal([
        [c.accountId, CAUGHT_UP_OPERATION],
      ]);
      // Audited with every instance's wallets, as docs/billing.md says to for several instances, from
      // the wallet's registration on (the previous test's write from it was before: not billable);
      // the charges of earlier blocks are then outside the audited range.
      const differences = (await audit([outside.address], batchBlock)).differences;
      expect(
        differences.filter((d) => d.kind !== "stray_charge" || d.charge.entryId > chargesBefore),
      ).to.deep.equal([]);
    });
  });

  it("the cursor is kept in the ledger: a reopened ledger starts where the last pass ended", async () => {
    const report = await catchUp().runOnce();
    const head = await b.s.provider.getBlockNumber();
    expect(await readCursor(b.billing.db, scope)).to.equal(head + 1);
    expect(report.toBlock).to.be.at.most(head);
    const reopened = await createBilling({ dbPath: b.ledgerPath, processor: new SimulatedProcessor() });
    try {
      expect(await readCursor(reopened.db, scope)).to.equal(head + 1);
      const again = await reopened.writeCatchUp(wholeChainCatchUp(b, gasWallets)).runOnce();
      expect(again).to.deep.equal({ fromBlock: head + 1, toBlock: head, charged: 0, skipped: 0 });
    } finally {
      await reopened.close();
    }
  });
});

describe("billing: a write mined just before a SIGKILL is charged at the next start", function () {
  this.timeout(180_000);
  let b: BilledStack;
  const children = new Set<ChildProcess>();
  const rootKeyHex = crypto.randomBytes(32).toString("hex");
  const enclave = Enclave.fromRootKey(rootKeyHex);
  const childGasWallets = [0, 1].map((i) => enclave.gasAddress(i));
  let dir: string;

  before(async () => {
    b = await startBilledStack();
    for (const w of childGasWallets)
      await b.s.provider.send("anvil_setBalance", [w, "0x" + parseEther("100").toString(16)]);
    dir = fs.mkdtempSync(path.join(b.dir, "child-"));
  });
  after(async () => {
    for (const c of children)
      if (c.exitCode === null && c.signalCode === null) {
        c.kill("SIGKILL");
        await new Promise((r) => c.once("exit", r));
      }
    await b?.close();
  });

  interface Child {
    proc: ChildProcess;
    url: string;
    stdout: () => string;
  }

  async function startChild(chargeFlushMs: number): Promise<Child> {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("SIGIL_")) env[k] = v;
    Object.assign(env, {
      LEDGER: path.join(dir, "ledger.sqlite"),
      CHARGE_FLUSH_MS: String(chargeFlushMs),
      RPC_URL: b.s.chain.rpcUrl,
      REGISTRY: b.s.deployment.registry,
      FORWARDER: b.s.deployment.forwarder,
      DEPLOY_BLOCK: String(b.s.deployment.deployBlock),
      ROOT_KEY_HEX: rootKeyHex,
      DATA_DIR: path.join(dir, "data"),
    });
    const proc = spawn(
      process.execPath,
      ["-r", "ts-node/register/transpile-only", path.join(__dirname, "fixtures", "catchUpRelayer.ts")],
      { env, stdio: ["ignore", "pipe", "pipe"] },
    );
    children.add(proc);
    let out = "";
    let err = "";
    proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const port = await new Promise<number>((resolve, reject) => {
      proc.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /^READY (\d+)$/m.exec(out);
        if (m) resolve(Number(m[1]));
      });
      proc.once("exit", (code) => reject(new Error(`child exited ${code}: ${err}`)));
    });
    return { proc, url: `http://127.0.0.1:${port}`, stdout: () => out };
  }

  async function call(child: Child, method: string, route: string, key?: string, body?: unknown) {
    const r = await fetch(child.url + route, {
      method,
      headers: { ...(key ? { "x-api-key": key } : {}), "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return { status: r.status, body: (await r.json()) as any };
  }

  function writeCharges(): Array<{ account_id: string; reference: string; operation: string }> {
    const db = new BetterSqlite3(path.join(dir, "ledger.sqlite"), { readonly: true });
    try {
      return db
        .prepare("SELECT account_id, reference, operation FROM ledger_entries WHERE reference LIKE 'write:%'")
        .all() as Array<{ account_id: string; reference: string; operation: string }>;
    } finally {
      db.close();
    }
  }

  it("after the restart the write is charged exactly once, the audit is clean, and one line says so", async () => {
    // The charge waits in the write-behind buffer for ten minutes: the kill always comes first.
    const first = await startChild(600_000);
    const acct = await call(first, "POST", "/core/v1/new_account", undefined, {});
    expect(acct.status).to.equal(201);
    const key = acct.body.api_key as string;
    const accountId = String(acct.body.account_id);
    const pkp = await call(first, "POST", "/core/v1/pkps/create", key, {});
    expect(pkp.status).to.equal(201);
    const mined = await b.s.provider.getTransactionReceipt(pkp.body.tx_hash as string);
    expect(mined?.status).to.equal(1);
    first.proc.kill("SIGKILL");
    await new Promise((r) => first.proc.once("exit", r));
    expect(writeCharges()).to.deep.equal([]);

    const second = await startChild(50);
    const deadline = Date.now() + 60_000;
    while (writeCharges().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const signer = enclave.principalAddress(key).toLowerCase();
    const fwd = new Contract(b.s.deployment.forwarder, forwarderInterface, b.s.provider);
    // The PKP's request used the signer's last forwarder nonce.
    const nonce = ((await fwd.nonces(signer)) as bigint) - 1n;
    const reference = writeChargeReference({
      chainId: 31337,
      forwarder: b.s.deployment.forwarder,
      signer,
      nonce,
    });
    expect(writeCharges()).to.deep.equal([
      { account_id: accountId, reference, operation: CAUGHT_UP_OPERATION },
    ]);
    const balance = await call(second, "GET", "/core/v1/billing/balance", key);
    expect(balance.body.balance_cents).to.equal(99);

    const report = await auditWriteCharges({
      rpc: b.s.provider,
      ledgerPath: path.join(dir, "ledger.sqlite"),
      registry: b.s.deployment.registry,
      forwarder: b.s.deployment.forwarder,
      chainId: 31337,
      fromBlock: b.s.deployment.deployBlock,
      gasWallets: childGasWallets,
      settleMs: 0,
    });
    expect(report.differences).to.deep.equal([]);
    expect(report.billableWrites).to.equal(1);
    const lines = second
      .stdout()
      .split("\n")
      .filter((l) => l.includes("billing catch-up: charged"));
    expect(lines).to.have.length(1);
    expect(JSON.parse(lines[0])).to.deep.include({ account_id: accountId, reference, cents: 1 });
    expect(second.stdout()).to.not.include(key);
    const metrics = await (await fetch(second.url + "/metrics")).text();
    expect(metrics).to.match(/^sigil_billing_writes_caught_up_total 1$/m);
  });
});

describeOnPostgres("billing: two instances' catch-ups at once on one PostgreSQL ledger", function () {
  this.timeout(180_000);
  let b: BilledStack;
  const ledgers: Billing[] = [];

  before(async () => {
    b = await startBilledStack();
    const url = await freshDatabaseUrl();
    for (let i = 0; i < 2; i++)
      ledgers.push(
        await createBilling({ databaseUrl: url, dbPath: "", processor: new SimulatedProcessor() }),
      );
  });
  after(async () => {
    for (const l of ledgers) await l.close();
    await b?.close();
  });

  it("twelve writes the shared ledger never charged are charged once each, by whichever instance gets there first", async () => {
    // Written through the stack's relayer, whose charges went to its own SQLite file: for the shared
    // ledger these are mined writes whose charges were lost.
    const accounts = [];
    for (let i = 0; i < 4; i++) accounts.push(await newAccount(b));
    for (const a of accounts)
      for (let j = 0; j < 3; j++)
        expect((await b.s.api("POST", "/core/v1/pkps/create", { key: a.key, body: {} })).status).to.equal(
          201,
        );
    const gasWallets = Array.from({ length: b.s.relayerOptions.gasWallets ?? 4 }, (_, i) =>
      b.s.enclave.gasAddress(i),
    );
    const catchUp = (l: Billing, instanceId: string) =>
      l.writeCatchUp({
        ...wholeChainCatchUp(b, gasWallets),
        // The first instance registers the wallets; the second knows none of its own.
        gasWallets: instanceId === "a" ? gasWallets : [],
        instanceId,
      });
    await catchUp(ledgers[0], "a").runOnce(); // registers and charges
    // Taken back out (balances restored), so that the two passes below race for the same twelve.
    await ledgers[0].db.exec("DELETE FROM ledger_entries WHERE reference LIKE 'write:%'");
    await ledgers[0].db.exec("UPDATE accounts SET balance_cents = 0");
    await ledgers[0].db.exec("UPDATE key_spend SET spent_cents = 0");
    await ledgers[0].db.exec("DELETE FROM write_catch_up_cursors");
    const reports = await Promise.all([
      catchUp(ledgers[0], "a").runOnce(),
      catchUp(ledgers[1], "b").runOnce(),
      catchUp(ledgers[1], "b").runOnce(),
    ]);
    expect(reports.reduce((n, r) => n + r.charged, 0)).to.equal(12);
    expect((await catchUp(ledgers[1], "b").runOnce()).charged).to.equal(0);
    const rows = (await ledgers[1].db.exec(
      "SELECT account_id, COUNT(*) AS n FROM ledger_entries WHERE reference LIKE 'write:%' GROUP BY account_id ORDER BY account_id",
    )) as Array<{ account_id: string; n: string }>;
    expect(rows.map((r) => [r.account_id, Number(r.n)])).to.deep.equal(
      accounts.map((a) => [a.accountId, 3]).sort(),
    );
    for (const a of accounts)
      expect(await ledgers[1].audit(a.accountId)).to.deep.equal({ balance_cents: -3, ledger_sum_cents: -3 });
  });
});
