/**
 * Three relayer instances on one chain and one PostgreSQL database, each with its own instance id and
 * so its own gas wallets: 50 concurrent path-A writes spread over them all land, none fails on a
 * transaction nonce, each is charged exactly once, and each transaction was sent from a wallet of the
 * instance that received the write. Then a restart: an instance started again with the same id
 * continues after its wallet's transactions still pending in the node's pool, instead of replacing them.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { parseEther, toQuantity } from "ethers";
import { AccountRegistry__factory } from "../../../typechain-types";
import { startRelayer, type RunningRelayer } from "../../../relayer";
import { type Billing, SimulatedProcessor, createBilling } from "../../../relayer/billing";
import { describeOnPostgres, freshDatabaseUrl } from "../../helpers/postgres";
import { OPERATOR_HEADERS, startStack, type Stack } from "../../helpers/stack";

type Answer = { status: number; body: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(
  url: string,
  method: string,
  route: string,
  key?: string,
  body?: unknown,
): Promise<Answer> {
  const headers: Record<string, string> = { ...OPERATOR_HEADERS };
  if (key) headers["x-api-key"] = key;
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(url + route, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  try {
    return { status: r.status, body: JSON.parse(text) };
  } catch {
    return { status: r.status, body: text };
  }
}

const IDS = ["a", "b", "c"];
const WALLETS_PER_INSTANCE = 2;
const ACCOUNTS = 10;
const WRITES_PER_ACCOUNT = 5;
const WRITE_CENTS = 1;

describeOnPostgres("gas wallets: three instances on one chain and one database", function () {
  this.timeout(300_000);
  let s: Stack;
  const others: RunningRelayer[] = [];
  const billings: Billing[] = [];
  let urls: string[];

  before(async function () {
    const databaseUrl = await freshDatabaseUrl();
    for (let i = 0; i < IDS.length; i++)
      billings.push(
        await createBilling({
          dbPath: "",
          databaseUrl,
          processor: new SimulatedProcessor(),
          signupCreditCents: 100,
          prices: { write_cents: WRITE_CENTS },
        }),
      );
    s = await startStack({
      databaseUrl,
      billing: billings[0],
      instanceId: IDS[0],
      gasWallets: WALLETS_PER_INSTANCE,
    });
    for (let i = 1; i < IDS.length; i++) {
      for (let w = 0; w < WALLETS_PER_INSTANCE; w++)
        await s.provider.send("anvil_setBalance", [
          s.enclave.gasAddress(w, IDS[i]),
          toQuantity(parseEther("100")),
        ]);
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `sigil-relayer-${IDS[i]}-`));
      others.push(
        await startRelayer({
          ...s.relayerOptions,
          dataDir,
          port: 0,
          billing: billings[i],
          instanceId: IDS[i],
        }),
      );
    }
    urls = [s.url, ...others.map((o) => o.url)];
  });

  after(async function () {
    for (const o of others) await o.close();
    await s?.close();
    for (const b of billings) await b.close();
  });

  it("each instance sends from its own wallets: no address is shared, and none is the unnamed instance's", async () => {
    const listed = await Promise.all(
      urls.map(async (u) => (await call(u, "GET", "/health")).body.gas_wallets),
    );
    for (let i = 0; i < IDS.length; i++)
      expect(listed[i]).to.deep.equal([0, 1].map((w) => s.enclave.gasAddress(w, IDS[i])));
    const all = [...listed.flat(), s.enclave.gasAddress(0), s.enclave.gasAddress(1)];
    expect(new Set(all).size).to.equal(all.length);
  });

  it("50 concurrent writes spread over the three instances: all land, no nonce error, each charged once", async () => {
    const accounts: { key: string; id: string }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const a = await call(urls[0], "POST", "/core/v1/new_account", undefined, { account_name: `gas-${i}` });
      expect(a.status).to.equal(201);
      accounts.push({ key: a.body.api_key, id: String(a.body.account_id) });
    }
    // The other instances learn of the accounts from the chain within a poll interval.
    for (const u of urls.slice(1))
      for (const a of accounts) {
        const deadline = Date.now() + 15_000;
        while ((await call(u, "GET", "/core/v1/account", a.key)).status === 401) {
          if (Date.now() > deadline) throw new Error(`${u} never saw account ${a.id}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    const balanceBefore = await Promise.all(accounts.map((a) => billings[0].balance(a.id)));

    // One account's writes go to one instance: forwarder nonces are per principal, and what is tested
    // here is the gas wallets' transaction nonces, which every instance's writes share the chain for.
    const writes = accounts.flatMap((a, i) =>
      Array.from({ length: WRITES_PER_ACCOUNT }, (_, k) => ({ account: a, instance: i % IDS.length, k })),
    );
    const answers = await Promise.all(
      writes.map((w) =>
        call(urls[w.instance], "POST", "/core/v1/pkps/create", w.account.key, { name: `p${w.k}` }),
      ),
    );
    expect(
      answers.filter((r) => r.status !== 201).map((r) => [r.status, JSON.stringify(r.body.error)]),
    ).to.deep.equal([]);

    // Landed: every PKP is in the registry.
    const registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
    for (const a of accounts)
      expect(Number((await registry.listPkps(Number(a.id), 0, 100))[1])).to.equal(WRITES_PER_ACCOUNT);

    // Sent by the receiving instance's own wallets.
    for (let i = 0; i < writes.length; i++) {
      const tx = await s.provider.getTransaction(answers[i].body.tx_hash);
      const own = [0, 1].map((w) => s.enclave.gasAddress(w, IDS[writes[i].instance]));
      expect(own).to.include(tx!.from);
    }

    // Charged once each: one debit of the write price per write, whichever instance charged it.
    for (const b of billings) await b.flushCharges();
    for (let i = 0; i < accounts.length; i++) {
      const { items } = await billings[0].history(accounts[i].id, 0, 100);
      const debits = items.filter((d) => d.type === "debit" && d.operation === "create_pkp");
      expect(debits.map((d) => d.amount_cents)).to.deep.equal(Array(WRITES_PER_ACCOUNT).fill(WRITE_CENTS));
      expect(new Set(debits.map((d) => d.reference)).size).to.equal(WRITES_PER_ACCOUNT);
      expect((await billings[0].balance(accounts[i].id)).balance_cents).to.equal(
        balanceBefore[i].balance_cents - WRITES_PER_ACCOUNT * WRITE_CENTS,
      );
      const audit = await billings[0].audit(accounts[i].id);
      expect(audit.balance_cents).to.equal(audit.ledger_sum_cents);
    }
  });

  it("an instance restarted with the same id continues after its wallet's pending transactions", async () => {
    const id = IDS[2];
    const a = await call(urls[0], "POST", "/core/v1/new_account", undefined, { account_name: "restart" });
    await others[1].close();
    const wallet = s.enclave.gasSigner(0, s.provider, id);
    const address = await wallet.getAddress();
    // While the instance is down its wallet has a transaction waiting in the pool (sent before a crash,
    // or by the operator): the restarted instance must not reuse that nonce (it would replace it).
    await s.provider.send("evm_setAutomine", [false]);
    try {
      const mined = await s.provider.getTransactionCount(address, "latest");
      const pending = await wallet.sendTransaction({ to: address, value: 1n, nonce: mined });
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `sigil-relayer-${id}-again-`));
      others[1] = await startRelayer({
        ...s.relayerOptions,
        dataDir,
        port: 0,
        billing: billings[2],
        instanceId: id,
        gasWallets: 1,
        syncSend: "off",
      });
      urls[2] = others[1].url;
      const deadline = Date.now() + 15_000;
      while ((await call(urls[2], "GET", "/core/v1/account", a.body.api_key)).status === 401) {
        if (Date.now() > deadline) throw new Error("the restarted instance never saw the account");
        await new Promise((r) => setTimeout(r, 50));
      }
      const write = call(urls[2], "POST", "/core/v1/pkps/create", a.body.api_key, { name: "after restart" });
      // Mine once the write's transaction has joined the pending one in the pool.
      const joined = Date.now() + 15_000;
      while ((await s.provider.getTransactionCount(address, "pending")) < mined + 2) {
        // A write sent with the pending transaction's nonce replaced it instead of joining it.
        if (Date.now() > joined) throw new Error("the write's transaction never joined the pending one");
        await new Promise((r) => setTimeout(r, 20));
      }
      await s.provider.send("evm_mine", []);
      const answer = await write;
      expect(answer.status).to.equal(201);
      const sent = await s.provider.getTransaction(answer.body.tx_hash);
      expect([sent!.from, sent!.nonce]).to.deep.equal([address, mined + 1]);
      expect((await s.provider.getTransactionReceipt(pending.hash))!.status).to.equal(1);
    } finally {
      await s.provider.send("evm_setAutomine", [true]);
    }
  });
});
