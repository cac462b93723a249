/**
 * Path-B writes through a Safe in the audit log: a real 2-of-3 Safe owns a ChainSecured account and
 * changes its group on chain (the relayer takes no part in the writes). Each of the Safe's transactions
 * becomes one `chain_write` entry of the account, in sequence, with the Safe's address as principal and
 * the transaction's hash and log indexes; the account's export verifies against the attestation identity.
 */
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { expect } from "chai";
import { ethers } from "ethers";
import { computeCid } from "../../enclave";
import { exportLines } from "../../relayer/audit/export";
import { AuditStore } from "../../relayer/audit/store";
import { openDataLayer } from "../../relayer/db";
import { verifyAuditExport } from "../../sdk/index";
import { AccountRegistry__factory } from "../../typechain-types";
import { createSafeOwner, type SafeOwner } from "../helpers/safeOwner";
import { sigilWorld, type SigilWorld } from "../safe/support";

const GROUP_ID = 1; // the account's first group

interface Row {
  seq: number;
  kind: string;
  prev_hash: string;
  hash: string;
  data: string;
}

describe("audit log: path-B writes through a 2-of-3 Safe", function () {
  this.timeout(180_000);
  let w: SigilWorld;
  let safe: SafeOwner;

  const entriesOf = (accountId: string): Row[] => {
    const raw = new BetterSqlite3(path.join(w.dataDir, "relayer.sqlite"), { readonly: true });
    try {
      return raw
        .prepare(
          "SELECT seq, kind, prev_hash, hash, data FROM audit_entries WHERE account_id = ? ORDER BY seq",
        )
        .all(accountId) as Row[];
    } finally {
      raw.close();
    }
  };

  before(async () => {
    w = await sigilWorld();
    safe = await createSafeOwner(w.ctx, w.registry);
  });
  after(async () => {
    await w?.stopAll();
  });

  it("each Safe transaction is one entry of the account, in sequence, principal the Safe; the export verifies", async () => {
    const txs = [
      await safe.tx({ op: "call", method: "createAccount", args: ["safe-audit", ethers.ZeroAddress] }),
    ];
    const registry = AccountRegistry__factory.connect(w.registry, w.chain.provider);
    const accountId = String(await registry.accountOfOwner(safe.address));
    txs.push(await safe.tx({ op: "create-pkp", name: "p" }));
    const pkpId = (await registry.listPkps(accountId, 0, 1))[0][0].id as string;
    txs.push(await safe.tx({ op: "create-group", name: "g", pkpIds: [pkpId], cids: [] }));
    // The group changes on chain: an action is added to it.
    const cid = await computeCid(new TextEncoder().encode("async function main() { return 1; }"));
    txs.push(await safe.tx({ op: "add-action", groupId: GROUP_ID, cid }));

    const deadline = Date.now() + 30_000;
    let rows = entriesOf(accountId);
    while (rows.length < txs.length && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      rows = entriesOf(accountId);
    }
    expect(rows.map((r) => [r.seq, r.kind])).to.deep.equal(txs.map((_, i) => [i + 1, "chain_write"]));
    for (let i = 0; i < rows.length; i++) {
      const data = JSON.parse(rows[i].data);
      expect(data.principal).to.deep.equal({ kind: "chain_sender", address: safe.address.toLowerCase() });
      expect(data.tx_hash).to.equal(txs[i].txHash.toLowerCase());
      expect(data.block_number).to.equal(txs[i].blockNumber);
      // Each event is where the transaction's receipt has it.
      const receipt = await w.chain.provider.getTransactionReceipt(txs[i].txHash);
      const registryLogs = receipt!.logs.filter((l) => l.address.toLowerCase() === w.registry.toLowerCase());
      expect(data.events.map((e: { log_index: number }) => e.log_index)).to.deep.equal(
        registryLogs.map((l) => l.index),
      );
      if (i > 0) expect(rows[i].prev_hash).to.equal(rows[i - 1].hash);
    }
    const changed = JSON.parse(rows[3].data);
    expect(changed.events.map((e: { name: string }) => e.name)).to.deep.equal(["ActionAdded"]);
    expect(changed.events[0].args.groupId).to.equal(String(GROUP_ID));

    // The account's export (as GET /core/v1/audit/export makes it) verifies against the identity.
    const identity = w.enclave.attestationIdentity().address;
    const db = await openDataLayer({ sqlitePath: path.join(w.dataDir, "relayer.sqlite") });
    try {
      const store = new AuditStore(db, {
        address: identity,
        sign: (digest) => w.enclave.signAuditCheckpoint(digest),
      });
      let text = "";
      for await (const line of exportLines(store, accountId, identity)) text += line;
      const v = verifyAuditExport(text, { identity });
      expect(v.ok, JSON.stringify(v.break)).to.equal(true);
      expect(v.lastSeq).to.equal(txs.length);
    } finally {
      await db.close();
    }
  });
});
