/**
 * Path-B writes in the audit log: transactions an owner's wallet sends straight to the registry become
 * `chain_write` entries (principal: the sender), once each, read from the registry's logs; path-A writes
 * (through the forwarder) are not recorded a second time that way.
 */
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { expect } from "chai";
import { Wallet, ZeroAddress } from "ethers";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEYS } from "../helpers/anvil";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("audit log: path-B writes from the registry's logs", function () {
  this.timeout(120_000);
  let s: Stack;

  before(async () => {
    s = await startStack({ audit: { sweepMs: 100 } });
  });
  after(async () => {
    await s?.close();
  });

  const entries = () => {
    const raw = new BetterSqlite3(path.join(s.dataDir, "relayer.sqlite"), { readonly: true });
    try {
      return raw
        .prepare("SELECT account_id, seq, kind, data FROM audit_entries ORDER BY account_id, seq")
        .all() as Array<{ account_id: string; seq: number; kind: string; data: string }>;
    } finally {
      raw.close();
    }
  };
  async function until<T>(probe: () => T | undefined, ms = 10_000): Promise<T> {
    const t0 = Date.now();
    for (;;) {
      const v = probe();
      if (v !== undefined) return v;
      if (Date.now() - t0 > ms) throw new Error("not observed in time");
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it("an owner's own transactions are entries of the account, once each; path-A writes are not doubled", async () => {
    const apiAccount = await setupAccount(s); // path A: two writes, recorded by the relayer
    const owner = new Wallet(DEV_KEYS[1], s.provider);
    const registry = AccountRegistry__factory.connect(s.deployment.registry, owner);
    await (await registry.createAccount("wallet-owned", ZeroAddress)).wait();
    const accountId = String(await registry.accountOfOwner(owner.address));
    const rc = await (await registry.createPkp("p", "")).wait();
    const pkpId = String(registry.interface.parseLog(rc!.logs[0])!.args.pkpId).toLowerCase();

    const chainWrites = await until(() => {
      const mine = entries().filter((e) => e.account_id === accountId);
      return mine.length >= 2 ? mine : undefined;
    });
    expect(chainWrites.map((e) => [e.seq, e.kind])).to.deep.equal([
      [1, "chain_write"],
      [2, "chain_write"],
    ]);
    const created = JSON.parse(chainWrites[1].data);
    expect(created.principal).to.deep.equal({ kind: "chain_sender", address: owner.address.toLowerCase() });
    expect(created.tx_hash).to.equal(rc!.hash.toLowerCase());
    expect(created.events.map((e: { name: string }) => e.name)).to.include("PkpCreated");
    expect(JSON.stringify(created.events)).to.include(pkpId);

    // More sweeps, and a restart (the cursor is in the database): still once each.
    await new Promise((r) => setTimeout(r, 500));
    await s.restartRelayer();
    await new Promise((r) => setTimeout(r, 500));
    expect(entries().filter((e) => e.account_id === accountId)).to.have.length(2);
    // The API account's writes went through the forwarder: `write` entries only.
    const api = entries().filter((e) => e.account_id === String(apiAccount.accountId));
    expect(api.map((e) => e.kind)).to.deep.equal(["write", "write"]);
  });
});
