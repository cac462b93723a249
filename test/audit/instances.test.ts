/**
 * Two relayer instances on one PostgreSQL database, 50 clients at once spread over both and over two
 * accounts (docs/audit-log.md, "Several instances"): each account gets one chain, gap-free from 1, with
 * exactly one entry per answered request, whichever instance answered it; each account's export
 * verifies against the attestation identity.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { openDataLayer } from "../../relayer/db";
import { verifyAuditExport } from "../../sdk/index";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describeOnPostgres("audit log: two instances on PostgreSQL under 50 concurrent clients", function () {
  this.timeout(300_000);
  let s: Stack;
  let second: RunningRelayer;
  let databaseUrl: string;
  let secondDir: string;

  before(async () => {
    databaseUrl = await freshDatabaseUrl();
    const limits = {
      perKeyPerMinute: 1e6,
      perAccountPerMinute: 1e6,
      concurrentExecutionsPerAccount: 1000,
    };
    s = await startStack({ databaseUrl, rateLimits: limits, executor: { poolSize: 2 } });
    secondDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-audit-2-"));
    second = await startRelayer({ ...s.relayerOptions, dataDir: secondDir, port: 0, instanceId: "" });
  });
  after(async () => {
    await second?.close();
    await s?.close();
    if (secondDir) fs.rmSync(secondDir, { recursive: true, force: true });
  });

  it("one gap-free chain per account, one entry per answered request", async () => {
    const accounts = [await setupAccount(s), await setupAccount(s)];
    const urls = [s.url, second.url];
    const total = 200;
    const answered = new Map<string, string[]>(accounts.map((a) => [String(a.accountId), []]));
    let next = 0;
    const client = async () => {
      for (;;) {
        const i = next++;
        if (i >= total) return;
        const a = accounts[i % 2];
        // Inline (each instance has its own content store). Every fifth request is refused (code that no
        // group of the account lists): refusals are entries too.
        const body = { code: i % 5 === 4 ? "async function main() { return 1; }" : a.code };
        const r = await fetch(`${urls[Math.floor(i / 2) % 2]}/core/v1/svc_action`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": a.accountKey },
          body: JSON.stringify(body),
        });
        const text = await r.text();
        if (r.status !== 200 && r.status !== 403) throw new Error(`unexpected ${r.status} ${text}`);
        answered.get(String(a.accountId))!.push(r.headers.get("x-request-id")!);
      }
    };
    await Promise.all(Array.from({ length: 50 }, client));

    const db = await openDataLayer({ databaseUrl, sqlitePath: "" });
    try {
      // Both instances chain behind their answers: wait until nothing is pending.
      for (let tries = 0; ; tries++) {
        const [p] = (await db.exec("SELECT COUNT(*) AS n FROM audit_pending")) as Array<{ n: number }>;
        if (Number(p.n) === 0) break;
        if (tries > 100) throw new Error(`${p.n} entries never chained`);
        await new Promise((r) => setTimeout(r, 100));
      }
      for (const a of accounts) {
        const account = String(a.accountId);
        const rows = (await db.exec(
          "SELECT seq, kind, data FROM audit_entries WHERE account_id = $1 ORDER BY seq",
          [account],
        )) as Array<{ seq: number; kind: string; data: string }>;
        expect(rows.map((r) => Number(r.seq))).to.deep.equal(rows.map((_, i) => i + 1));
        const ids = rows
          .filter((r) => r.kind === "execution" || r.kind === "refusal")
          .map((r) => JSON.parse(r.data).request_id as string)
          .sort();
        expect(ids).to.deep.equal([...answered.get(account)!].sort());
        expect(new Set(ids).size).to.equal(ids.length);
        const text = await fetch(`${s.url}/core/v1/audit/export`, {
          headers: { "x-api-key": a.accountKey },
        }).then((r) => r.text());
        const v = verifyAuditExport(text, { identity: s.enclave.attestationIdentity().address });
        expect(v, JSON.stringify(v.break)).to.include({ ok: true, firstSeq: 1, lastSeq: rows.length });
      }
    } finally {
      await db.close();
    }
  });
});
