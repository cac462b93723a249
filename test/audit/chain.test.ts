/**
 * The audit log's core on a real SQLite data layer and a real enclave: entries chained in order with a
 * gap-free sequence, checkpoints signed by the attestation identity under their own domain, an export
 * that the SDK's offline verifier accepts, and every kind of tampering (edit, delete, reorder, insert,
 * cut the end, forge a checkpoint) reported with the sequence where it starts. Retention keeps what
 * remains verifiable.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Wallet, hashMessage, verifyMessage } from "ethers";
import pino from "pino";
import { Enclave, auditCheckpointMessage, canonicalJson } from "../../enclave";
import { openDataLayer, type DataLayer } from "../../relayer/db";
import { AuditLog } from "../../relayer/audit/log";
import { exportLines } from "../../relayer/audit/export";
import { entryHash, GENESIS_HASH } from "../../relayer/audit/format";
import type { PendingEntry } from "../../relayer/audit/entries";
import { refusalEntry } from "../helpers/auditEntries";
import { auditEntryHash, verifyAuditExport, verifyAttestation } from "../../sdk/index";

const ACCOUNT = "7";

const refusal = (i: number, account = ACCOUNT): PendingEntry => refusalEntry(i, account);

async function collect(gen: AsyncGenerator<string>): Promise<string> {
  let out = "";
  for await (const l of gen) out += l;
  return out;
}

describe("audit log: chain, checkpoints, offline verification", function () {
  this.timeout(60_000);
  let dir: string;
  let db: DataLayer;
  let enclave: Enclave;
  let log: AuditLog;
  let clock: number;
  const identity = () => enclave.attestationIdentity().address;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-audit-"));
    db = await openDataLayer({ sqlitePath: path.join(dir, "audit.sqlite") });
    enclave = Enclave.fromRootKey(crypto.randomBytes(32));
    clock = 1_700_000_000_000;
    log = new AuditLog(
      db,
      { address: identity(), sign: (d) => enclave.signAuditCheckpoint(d) },
      "test",
      { checkpointEvery: 4, checkpointMs: 60_000 },
      pino({ level: "silent" }),
      { now: () => clock },
    );
  });
  afterEach(async () => {
    await log.stop(); // its writer thread's connection closes before the file goes
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function record(n: number, account = ACCOUNT) {
    for (let i = 0; i < n; i++) await log.record({ ...refusal(i, account), timeMs: clock + i });
    await log.flush();
  }
  const exportText = () => collect(exportLines(log.store, ACCOUNT, identity(), {}, clock));
  const rows = (sqlText: string, params: unknown[] = []) => db.exec(sqlText, params);

  it("chains each account's entries gap-free from the genesis hash; the service's hash is the SDK's", async () => {
    await record(10);
    await record(3, "8");
    const chain = (await rows(
      "SELECT seq, prev_hash, hash, kind, time_ms, data FROM audit_entries WHERE account_id = ? ORDER BY seq",
      [ACCOUNT],
    )) as Array<{
      seq: number;
      prev_hash: string;
      hash: string;
      kind: string;
      time_ms: number;
      data: string;
    }>;
    expect(chain.map((r) => r.seq)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(chain[0].prev_hash).to.equal(GENESIS_HASH);
    for (let i = 1; i < chain.length; i++) expect(chain[i].prev_hash).to.equal(chain[i - 1].hash);
    for (const r of chain) {
      const fields = {
        account: ACCOUNT,
        seq: r.seq,
        prev_hash: r.prev_hash,
        kind: r.kind as "refusal",
        time_ms: r.time_ms,
        data: JSON.parse(r.data),
      };
      expect(entryHash(fields)).to.equal(r.hash);
      expect(auditEntryHash(fields)).to.equal(r.hash);
    }
    expect(await rows("SELECT COUNT(*) AS n FROM audit_pending")).to.deep.equal([{ n: 0 }]);
    // Every 4 entries a checkpoint: 4 and 8 (the rest is signed when exported or when it is due by time).
    const cps = (await rows("SELECT seq FROM audit_checkpoints WHERE account_id = ? ORDER BY seq", [
      ACCOUNT,
    ])) as Array<{
      seq: number;
    }>;
    expect(cps.map((c) => c.seq)).to.deep.equal([4, 8]);
  });

  it("a checkpoint is signed by the attestation identity under its own domain, never as an attestation", async () => {
    await record(4);
    const [cp] = (await rows("SELECT * FROM audit_checkpoints")) as Array<Record<string, string | number>>;
    const text = await exportText();
    const line = text
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((l) => l.type === "checkpoint" && l.seq === 4);
    expect(line.signature).to.equal(cp.signature);
    const { auditCheckpointDigest } = await import("../../sdk/audit");
    const digest = auditCheckpointDigest(line);
    expect(auditCheckpointMessage(digest)).to.equal("sigil-audit-checkpoint/v1:" + digest);
    expect(verifyMessage(auditCheckpointMessage(digest), line.signature)).to.equal(identity());
    // The same signature does not verify as an attestation document over anything but that message,
    // and the message is not canonical JSON (which every attestation document's message is).
    expect(() => JSON.parse(auditCheckpointMessage(digest))).to.throw();
    const forgedDoc = { format: "sigil-attestation/v1", identity: { address: identity() }, digest };
    expect(() => verifyAttestation({ ...forgedDoc, signature: line.signature } as never)).to.throw();
    expect(hashMessage(canonicalJson(forgedDoc))).to.not.equal(hashMessage(auditCheckpointMessage(digest)));
    // Only a digest can be signed this way.
    expect(() => enclave.signAuditCheckpoint("not a digest")).to.throw(TypeError);
    expect(() => enclave.signAuditCheckpoint("0x" + "AB".repeat(32))).to.throw(TypeError);
  });

  it("an untouched export verifies against the pinned identity; another identity is refused", async () => {
    await record(10);
    const text = await exportText();
    const ok = verifyAuditExport(text, { identity: identity() });
    expect(ok, JSON.stringify(ok.break)).to.include({ ok: true, entries: 10, firstSeq: 1, lastSeq: 10 });
    // The export signed its head: every entry is covered.
    expect(ok.signedThrough).to.equal(10);
    const other = verifyAuditExport(text, { identity: Wallet.createRandom().address });
    expect(other.ok).to.equal(false);
    expect(other.break).to.include({ reason: "bad_signature", seq: 4 });
  });

  describe("tampering with one row is found, at its sequence", () => {
    const verifyDb = async () => verifyAuditExport(await exportText(), { identity: identity() });
    beforeEach(async () => {
      await record(10);
      await exportText(); // signs the head (10)
    });

    it("edit: a changed field", async () => {
      const [row] = (await rows("SELECT data FROM audit_entries WHERE account_id = ? AND seq = 6", [
        ACCOUNT,
      ])) as Array<{
        data: string;
      }>;
      const data = JSON.parse(row.data);
      data.code = "harmless";
      await rows("UPDATE audit_entries SET data = ? WHERE account_id = ? AND seq = 6", [
        JSON.stringify(data),
        ACCOUNT,
      ]);
      expect((await verifyDb()).break).to.include({ seq: 6, reason: "hash_mismatch" });
    });

    it("edit with every later hash recomputed: the signed checkpoint no longer matches", async () => {
      const chain = (await rows("SELECT * FROM audit_entries WHERE account_id = ? ORDER BY seq", [
        ACCOUNT,
      ])) as Array<Record<string, string | number>>;
      let prev = GENESIS_HASH;
      for (const r of chain) {
        const data = JSON.parse(String(r.data));
        if (r.seq === 3) data.code = "rewritten";
        const hash = entryHash({
          account: ACCOUNT,
          seq: Number(r.seq),
          prev_hash: prev,
          kind: "refusal",
          time_ms: Number(r.time_ms),
          data,
        });
        await rows(
          "UPDATE audit_entries SET data = ?, prev_hash = ?, hash = ? WHERE account_id = ? AND seq = ?",
          [JSON.stringify(data), prev, hash, ACCOUNT, r.seq],
        );
        prev = hash;
      }
      expect((await verifyDb()).break).to.include({ seq: 4, reason: "checkpoint_mismatch" });
    });

    it("delete: a missing entry", async () => {
      await rows("DELETE FROM audit_entries WHERE account_id = ? AND seq = 5", [ACCOUNT]);
      expect((await verifyDb()).break).to.include({ seq: 5, reason: "missing_entry" });
    });

    it("delete the newest: the signed head names more entries than the export holds", async () => {
      await rows("DELETE FROM audit_entries WHERE account_id = ? AND seq = 10", [ACCOUNT]);
      // The export signs nothing new (the head row says 10 is signed already): the cut shows.
      expect((await verifyDb()).break).to.include({ seq: 10, reason: "truncated" });
    });

    it("reorder: two entries swap places", async () => {
      await rows("UPDATE audit_entries SET seq = -1 WHERE account_id = ? AND seq = 7", [ACCOUNT]);
      await rows("UPDATE audit_entries SET seq = 7 WHERE account_id = ? AND seq = 8", [ACCOUNT]);
      await rows("UPDATE audit_entries SET seq = 8 WHERE account_id = ? AND seq = -1", [ACCOUNT]);
      expect((await verifyDb()).break).to.include({ seq: 7, reason: "broken_link" });
    });

    it("insert: an extra entry between two", async () => {
      await rows("UPDATE audit_entries SET seq = seq + 100 WHERE account_id = ? AND seq >= 4", [ACCOUNT]);
      await rows("UPDATE audit_entries SET seq = seq - 99 WHERE account_id = ? AND seq >= 104", [ACCOUNT]);
      const [third] = (await rows("SELECT hash FROM audit_entries WHERE account_id = ? AND seq = 3", [
        ACCOUNT,
      ])) as Array<{
        hash: string;
      }>;
      const data = refusal(99).data;
      const fields = {
        account: ACCOUNT,
        seq: 4,
        prev_hash: third.hash,
        kind: "refusal" as const,
        time_ms: 1,
        data,
      };
      await rows(
        "INSERT INTO audit_entries (account_id, seq, prev_hash, hash, kind, time_ms, data, principal, cid, pkps, outcome) VALUES (?, 4, ?, ?, 'refusal', 1, ?, NULL, NULL, '', 'refused')",
        [ACCOUNT, third.hash, entryHash(fields), JSON.stringify(data)],
      );
      // The inserted row is well formed and linked; the checkpoint at 4 does not hold its hash.
      expect((await verifyDb()).break).to.include({ seq: 4, reason: "checkpoint_mismatch" });
    });

    it("a forged checkpoint (signed by another key) is named", async () => {
      const stranger = Wallet.createRandom();
      await rows("UPDATE audit_checkpoints SET signature = ? WHERE account_id = ? AND seq = 8", [
        stranger.signMessageSync("sigil-audit-checkpoint/v1:0x" + "00".repeat(32)),
        ACCOUNT,
      ]);
      expect((await verifyDb()).break).to.include({ seq: 8, reason: "bad_signature" });
    });
  });

  it("retention prunes a prefix behind a checkpoint; what remains verifies; a range export verifies", async () => {
    await record(6); // checkpoint at 4
    clock += 120_000;
    // Each entry is chained as it is recorded (the SQLite writer thread): the first one after the pause
    // finds the last checkpoint two minutes old, so a checkpoint at 7 (time), then at 11 (count).
    await record(6);
    const removed = await log.store.prune(clock - 60_000);
    expect(removed).to.equal(4);
    const text = await exportText();
    const v = verifyAuditExport(text, { identity: identity() });
    expect(v, JSON.stringify(v.break)).to.include({ ok: true, firstSeq: 5, lastSeq: 12 });
    // Cut off the checkpoint that covers the start: the start is no longer provable.
    const noCover = text
      .split("\n")
      .filter((l) => !(l.includes('"type":"checkpoint"') && l.includes('"seq":4,')))
      .join("\n");
    expect(verifyAuditExport(noCover, { identity: identity() }).break).to.include({
      seq: 5,
      reason: "uncovered_start",
    });
    // A time range is widened to the checkpoints around it, and verifies on its own.
    const ranged = await collect(
      exportLines(
        log.store,
        ACCOUNT,
        identity(),
        { fromMs: 1_700_000_000_000 + 120_002, toMs: 1_700_000_000_000 + 120_003 },
        clock,
      ),
    );
    const r = verifyAuditExport(ranged, { identity: identity() });
    expect(r, JSON.stringify(r.break)).to.include({ ok: true, firstSeq: 8, lastSeq: 11 });
  });

  it("pending entries left by a dead writer are chained by the next sweep, once each", async () => {
    for (let i = 0; i < 5; i++) await log.store.enqueue(refusal(i));
    await log.sweep(clock);
    await log.sweep(clock);
    const n = (await rows("SELECT COUNT(*) AS n, MAX(seq) AS m FROM audit_entries WHERE account_id = ?", [
      ACCOUNT,
    ])) as Array<{
      n: number;
      m: number;
    }>;
    expect(n).to.deep.equal([{ n: 5, m: 5 }]);
  });
});
