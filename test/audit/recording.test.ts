/**
 * The audit log in a running service (chain, contracts, relayer, executor all real): each event is
 * recorded exactly once before its answer (path-A writes, executions with the PKPs they used, refusals of
 * a recognised key, rate-limited), GET /core/v1/audit filters and pages it, the export verifies offline
 * against the identity of a verified attestation, `sigil audit export` / `sigil audit verify` do the same
 * from the command line and name the sequence of a row edited in the database, and nothing secret (keys,
 * parameters, response bodies) is in the database.
 */
import { execFile } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { keyHash } from "../../enclave";
import { verifyAttestation, verifyAuditExport } from "../../sdk/index";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

// Answers are whatever JSON the API returned; the tests assert on their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const ROOT = path.resolve(__dirname, "..", "..");
const BIN = path.join(ROOT, "bin", "sigil.js");

function sigil(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: ROOT, env: { ...process.env, SIGIL_URL: "", SIGIL_API_KEY: "", ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== "number") reject(err);
        else resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}

const SIGN = `async function main(p) {
  const sig = await Actions.signMessage({ pkpId: p.pkp, message: "audit me" });
  return { sig, echo: p.marker + "-RESPONSE" };
}`;

describe("audit log: recording in a running service", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let usage: { id: string; value: string };
  let identity: string;
  const marker = "PARAM-" + crypto.randomBytes(8).toString("hex");

  before(async () => {
    s = await startStack({ executor: { poolSize: 1 }, audit: { refusalsPerMinute: 3, checkpointEvery: 5 } });
    a = await setupAccount(s, SIGN);
    const u = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "runner", execute_in_groups: [a.groupId] },
    });
    expect(u.status, JSON.stringify(u.body)).to.equal(201);
    usage = { id: u.body.id, value: u.body.usage_api_key };
    const doc = await s.api("GET", "/core/v1/attestation");
    identity = verifyAttestation(doc.body).identity;
  });
  after(async () => {
    await s?.close();
  });

  const audit = (query = "", key = a.accountKey) =>
    fetch(`${s.url}/core/v1/audit${query}`, { headers: { "x-api-key": key } }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as Json,
    }));
  const all = async (query = "") => (await audit(query)).body.items as Json[];

  it("an execution: one entry before the answer, with its PKPs, digests, response hash and no parameter", async () => {
    const run = await s.api("POST", "/core/v1/svc_action", {
      key: usage.value,
      body: { cid: a.cid, pkp_id: a.pkpId, js_params: { pkp: a.pkpId, marker } },
    });
    expect(run.status, JSON.stringify(run.body)).to.equal(200);
    expect(run.body.has_error).to.equal(false);
    const requestId = run.headers.get("x-request-id");
    const executions = await all("?type=execution");
    expect(executions).to.have.length(1);
    const e = executions[0];
    expect(e.data).to.deep.include({
      request_id: requestId,
      cid: a.cid,
      pkp_named: a.pkpId.toLowerCase(),
      pkps_used: [a.pkpId.toLowerCase()],
      has_error: false,
      error_code: null,
      principal: { kind: "usage_key", address: usage.id.toLowerCase() },
    });
    expect(e.data.key_operation_count).to.be.greaterThan(0);
    const { canonicalJson } = await import("../../enclave");
    expect(e.data.response_sha256).to.equal(
      "0x" + crypto.createHash("sha256").update(canonicalJson(run.body.response)).digest("hex"),
    );
    expect(await all(`?cid=${a.cid}`)).to.have.length(1);
    expect((await all(`?pkp=${a.pkpId}`)).map((x) => x.kind)).to.include("execution");
    expect(await all(`?usage_key=${usage.id}&type=execution`)).to.have.length(1);
  });

  it("path-A writes: one entry each, with the transaction, its events and the principal", async () => {
    const writes = await all("?type=write");
    // pkps/create, groups (setupAccount), add_usage_api_key.
    expect(writes.map((w) => w.data.operation).sort()).to.deep.equal(
      ["create_group", "add_usage_api_key", "create_pkp"].sort(),
    );
    for (const w of writes) {
      expect(w.data.tx_hash).to.match(/^0x[0-9a-f]{64}$/);
      expect(w.data.principal).to.deep.equal({ kind: "account_key", address: w.data.principal.address });
      expect(w.data.events.length).to.be.greaterThan(0);
      expect(w.data.events[0].log_index).to.be.a("number");
    }
  });

  it("refusals of a recognised key: recorded with the key hash prefix, and rate-limited per account", async () => {
    const refused = await s.api("POST", "/core/v1/groups", { key: usage.value, body: { name: "nope" } });
    expect(refused.status).to.equal(403);
    let refusals = await all("?type=refusal");
    expect(refusals).to.have.length(1);
    expect(refusals[0].data).to.deep.include({
      code: refused.body.error.code,
      key_hash_prefix: keyHash(usage.value).slice(0, 10),
      method: "POST",
      route: "/core/v1/groups",
      request_id: refused.headers.get("x-request-id"),
    });
    expect(refusals[0].data.principal).to.deep.equal({ kind: "usage_key", address: usage.id.toLowerCase() });
    // A flood: 3 per minute are written (this test's limit), the rest only counted.
    for (let i = 0; i < 10; i++)
      expect(
        (await s.api("POST", "/core/v1/groups", { key: usage.value, body: { name: "x" } })).status,
      ).to.equal(403);
    refusals = await all("?type=refusal");
    expect(refusals).to.have.length(3);
    expect(await all("?outcome=refused")).to.have.length(3);
  });

  it("pages newest first through a cursor; bad filters are 400 invalid_request", async () => {
    const every = await all("?limit=500");
    const seqs: number[] = [];
    let cursor = "";
    for (;;) {
      const page = await audit(`?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(page.status).to.equal(200);
      seqs.push(...page.body.items.map((e: { seq: number }) => e.seq));
      if (!page.body.next_cursor) break;
      cursor = page.body.next_cursor;
    }
    expect(seqs).to.deep.equal(every.map((e) => e.seq));
    expect(seqs).to.deep.equal([...seqs].sort((x, y) => y - x));
    expect(seqs[seqs.length - 1]).to.equal(1);
    for (const q of [
      "?type=nope",
      "?from=yesterday",
      "?pkp=0x12",
      "?limit=0",
      "?cursor=abc",
      "?outcome=maybe",
    ]) {
      const r = await audit(q);
      expect(r.status, q).to.equal(400);
      expect(r.body.error.code).to.equal("invalid_request");
    }
    // A usage key never reads the account's log.
    expect((await audit("", usage.value)).status).to.equal(403);
  });

  it("the export verifies offline against the attestation's identity; the CLI exports and verifies it", async () => {
    const r = await fetch(`${s.url}/core/v1/audit/export`, { headers: { "x-api-key": a.accountKey } });
    expect(r.status).to.equal(200);
    expect(r.headers.get("content-type")).to.match(/^application\/x-ndjson/);
    const v = verifyAuditExport(await r.text(), { identity });
    expect(v, JSON.stringify(v.break)).to.include({ ok: true, firstSeq: 1 });
    expect(v.signedThrough).to.equal(v.lastSeq);

    const file = path.join(s.dataDir, "export.jsonl");
    const env = { SIGIL_URL: s.url, SIGIL_API_KEY: a.accountKey };
    const exported = await sigil(["audit", "export", "--out", file], env);
    expect(exported.code, exported.stderr).to.equal(0);
    const ok = await sigil(["audit", "verify", file, "--identity", identity], {});
    expect(ok.code, ok.stderr).to.equal(0);
    expect(ok.stdout).to.match(/verified\s+yes/);

    // One row edited in the database: the next export fails at its sequence.
    const BetterSqlite3 = (await import("better-sqlite3")).default;
    const raw = new BetterSqlite3(path.join(s.dataDir, "relayer.sqlite"));
    try {
      const row = raw
        .prepare("SELECT data FROM audit_entries WHERE seq = 2 AND account_id = ?")
        .get(String(a.accountId)) as {
        data: string;
      };
      const data = JSON.parse(row.data);
      data.operation = "something_else";
      raw
        .prepare("UPDATE audit_entries SET data = ? WHERE seq = 2 AND account_id = ?")
        .run(JSON.stringify(data), String(a.accountId));
    } finally {
      raw.close();
    }
    const tampered = path.join(s.dataDir, "tampered.jsonl");
    expect((await sigil(["audit", "export", "--out", tampered], env)).code).to.equal(0);
    const bad = await sigil(["audit", "verify", tampered, "--identity", identity], {});
    expect(bad.code).to.equal(4);
    expect(bad.stderr).to.include("broken at sequence 2: hash_mismatch");
  });

  it("no key, parameter or response body is in the database", async () => {
    const files = fs.readdirSync(s.dataDir).filter((f) => f.startsWith("relayer.sqlite"));
    expect(files).to.include("relayer.sqlite");
    const bytes = Buffer.concat(files.map((f) => fs.readFileSync(path.join(s.dataDir, f))));
    const secrets = [
      a.accountKey,
      a.accountKey.slice(3),
      usage.value,
      usage.value.slice(3),
      marker,
      marker + "-RESPONSE",
    ];
    for (const secret of secrets)
      expect(bytes.includes(Buffer.from(secret)), secret.slice(0, 6)).to.equal(false);
    // The check can fail: the log itself is in these files.
    expect(bytes.includes(Buffer.from(a.cid))).to.equal(true);
  });
});
