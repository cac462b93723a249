/**
 * kill -9 after answering loses no audit entry (docs/audit-log.md, "Several instances"): every request
 * writes its entry before it answers (on SQLite in a file, chained in the same transaction; elsewhere
 * unchained); a relayer process is SIGKILLed right after answering 20 executions, every entry is in the
 * file once, the next start chains whatever is left pending, and the export verifies, gap-free.
 */
import { type ChildProcess, spawn } from "node:child_process";
import * as crypto from "node:crypto";
import * as path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { expect } from "chai";
import { parseEther, toQuantity } from "ethers";
import { Enclave } from "../../enclave";
import { verifyAuditExport } from "../../sdk/index";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("audit log: kill -9 after answering loses no entry", function () {
  this.timeout(180_000);
  let s: Stack;
  let child: ChildProcess | null = null;
  const rootKey = crypto.randomBytes(32).toString("hex");
  const enclave = Enclave.fromRootKey(rootKey);

  before(async () => {
    s = await startStack({ enclave, rateLimits: { concurrentExecutionsPerAccount: 1000 } });
    // The stack funded its own enclave's gas wallets; this test's relayer signs with another root key.
    for (let i = 0; i < 4; i++)
      await s.provider.send("anvil_setBalance", [enclave.gasAddress(i), toQuantity(parseEther("100"))]);
  });
  after(async () => {
    child?.kill("SIGKILL");
    await s?.close();
  });

  function startChild(): Promise<{ proc: ChildProcess; url: string }> {
    const proc = spawn(
      process.execPath,
      ["-r", "ts-node/register/transpile-only", path.join(__dirname, "fixtures", "auditRelayer.ts")],
      {
        cwd: path.resolve(__dirname, "..", ".."),
        env: {
          ...process.env,
          RPC_URL: s.chain.rpcUrl,
          REGISTRY: s.deployment.registry,
          FORWARDER: s.deployment.forwarder,
          DEPLOY_BLOCK: String(s.deployment.deployBlock),
          ROOT_KEY_HEX: rootKey,
          DATA_DIR: s.dataDir,
          AUDIT_CHAIN_AFTER_MS: "600000",
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    return new Promise((resolve, reject) => {
      let out = "";
      let err = "";
      proc.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /^READY (\d+)$/m.exec(out);
        if (m) resolve({ proc, url: `http://127.0.0.1:${m[1]}` });
      });
      proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
      proc.on("exit", (code) => reject(new Error(`relayer exited (${code}) before serving: ${err}`)));
    });
  }

  it("20 answered executions, SIGKILL, restart: all 20 entries chained once, gap-free", async () => {
    const a = await setupAccount(s);
    await s.relayer.close();
    const started = await startChild();
    child = started.proc;
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${started.url}/core/v1/svc_action`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": a.accountKey },
          body: JSON.stringify({ cid: a.cid, js_params: { who: `n${i}` } }),
        }),
      ),
    );
    expect(answers.map((r) => r.status)).to.deep.equal(Array(20).fill(200));
    const requestIds = answers.map((r) => r.headers.get("x-request-id")).sort();
    child.kill("SIGKILL");
    await new Promise((r) => child!.once("exit", r));
    child = null;

    // Killed right after answering: every answered run's entry is in the file, once (on SQLite the
    // writer thread chains an entry in the transaction that writes it; a pending one is chained at start).
    const raw = new BetterSqlite3(path.join(s.dataDir, "relayer.sqlite"));
    try {
      const found = raw
        .prepare(
          "SELECT data FROM audit_pending WHERE account_id = ? AND kind = 'execution' UNION ALL SELECT data FROM audit_entries WHERE account_id = ? AND kind = 'execution'",
        )
        .all(String(a.accountId), String(a.accountId)) as Array<{ data: string }>;
      expect(found.map((p) => JSON.parse(p.data).request_id).sort()).to.deep.equal(requestIds);
    } finally {
      raw.close();
    }

    await s.restartRelayer(); // the relayer's start chains what it finds pending
    const listed = await fetch(`${s.url}/core/v1/audit?type=execution&limit=500`, {
      headers: { "x-api-key": a.accountKey },
    }).then((r) => r.json() as Promise<{ items: Array<{ data: { request_id: string } }> }>);
    expect(listed.items.map((e) => e.data.request_id).sort()).to.deep.equal(requestIds);
    const text = await fetch(`${s.url}/core/v1/audit/export`, {
      headers: { "x-api-key": a.accountKey },
    }).then((r) => r.text());
    const v = verifyAuditExport(text, { identity: enclave.attestationIdentity().address });
    expect(v, JSON.stringify(v.break)).to.include({ ok: true, firstSeq: 1 });
    // The two writes of setupAccount (PKP, group) and the 20 runs.
    expect(v.entries).to.equal(22);
  });
});
