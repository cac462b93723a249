/**
 * Anchoring audit checkpoints on chain (docs/audit-log.md, "Anchoring"; off by default): with an
 * AuditAnchor contract configured (every 2), the relayer anchors an account's newest checkpoint once two
 * were signed since its last anchor, through its gas wallets, the export carries each anchor's transaction, and verifyAuditAnchors checks them against
 * the chain; an anchor that names another transaction, or that was moved to another checkpoint, fails
 * and names the checkpoint's sequence.
 */
import { expect } from "chai";
import { Wallet } from "ethers";
import {
  parseAuditExport,
  verifyAuditAnchors,
  verifyAuditExport,
  type AuditCheckpoint,
} from "../../sdk/index";
import { deployAuditAnchor } from "../../scripts/deployAuditAnchor";
import { DEV_KEYS } from "../helpers/anvil";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("audit log: checkpoints anchored on chain", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let contract: string;

  before(async () => {
    s = await startStack({ executor: { poolSize: 1 }, audit: { checkpointEvery: 2, sweepMs: 100 } });
    contract = await deployAuditAnchor(new Wallet(DEV_KEYS[3], s.provider));
    s.relayerOptions.audit = { ...s.relayerOptions.audit, anchor: { contract, every: 2 } };
    await s.restartRelayer();
    a = await setupAccount(s);
  });
  after(async () => {
    await s?.close();
  });

  const exportText = async () => {
    const r = await fetch(`${s.url}/core/v1/audit/export`, { headers: { "x-api-key": a.accountKey } });
    expect(r.status).to.equal(200);
    return r.text();
  };
  const anchoredOf = (text: string) =>
    parseAuditExport(text).filter(
      (l): l is AuditCheckpoint => l.type === "checkpoint" && (l as AuditCheckpoint).anchor !== undefined,
    );

  it("the newest checkpoint is anchored once 2 were signed since the last anchor, by a gas wallet; the anchors verify", async () => {
    // Entries in rounds, each read back (an export signs the head: a checkpoint per round at least).
    let text = await exportText();
    const deadline = Date.now() + 30_000;
    while (anchoredOf(text).length < 2 && Date.now() < deadline) {
      for (let i = 0; i < 2; i++) {
        const r = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body: { cid: a.cid } });
        expect(r.status, JSON.stringify(r.body)).to.equal(200);
      }
      await new Promise((r) => setTimeout(r, 300)); // a few sweeps
      text = await exportText();
    }
    const identity = s.enclave.attestationIdentity().address;
    expect(verifyAuditExport(text, { identity }).ok).to.equal(true);
    const checkpoints = parseAuditExport(text).filter((l): l is AuditCheckpoint => l.type === "checkpoint");
    const anchored = anchoredOf(text);
    expect(anchored.length).to.be.at.least(2);
    // Every 2nd: at least one signed checkpoint lies between two anchored ones, and before the first.
    const positions = anchored.map((c) => checkpoints.findIndex((x) => x.seq === c.seq));
    expect(positions[0]).to.be.at.least(1);
    for (let i = 1; i < positions.length; i++) expect(positions[i] - positions[i - 1]).to.be.at.least(2);
    for (const c of anchored) {
      expect(c.anchor!.contract).to.equal(contract.toLowerCase());
      expect(c.anchor!.chain_id).to.equal(31337);
      const tx = await s.provider.getTransaction(c.anchor!.tx_hash);
      expect(tx!.to!.toLowerCase()).to.equal(contract.toLowerCase());
      const gasWallets = [0, 1, 2, 3].map((w) => s.enclave.gasAddress(w).toLowerCase());
      expect(gasWallets).to.include(tx!.from.toLowerCase());
    }
    const v = await verifyAuditAnchors(text, { rpcUrl: s.chain.rpcUrl });
    expect(v, JSON.stringify(v)).to.deep.equal({
      ok: true,
      anchored: anchored.length,
      anchoredThrough: anchored[anchored.length - 1].seq,
    });
  });

  it("an anchor naming another transaction, or moved to another checkpoint, fails at that checkpoint", async () => {
    const text = await exportText();
    const [first, second] = anchoredOf(text);
    // The first checkpoint's anchor swapped for the second's transaction: its values are not in it.
    const swapped = text.replace(first.anchor!.tx_hash, second.anchor!.tx_hash);
    const v1 = await verifyAuditAnchors(swapped, { rpcUrl: s.chain.rpcUrl });
    expect(v1.ok).to.equal(false);
    expect(v1.break!.seq).to.equal(first.seq);
    expect(v1.break!.reason).to.be.oneOf(["anchor_mismatch", "anchor_missing"]);
    // A transaction that does not exist.
    const missing = text.replace(first.anchor!.tx_hash, "0x" + "12".repeat(32));
    const v2 = await verifyAuditAnchors(missing, { rpcUrl: s.chain.rpcUrl });
    expect(v2.break).to.deep.include({ seq: first.seq, reason: "anchor_missing" });
  });
});
