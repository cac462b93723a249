/**
 * `sigil policies` against the real service: upload a document, read it back, a dry run from files,
 * set and clear a group's policy. The CLI runs as a child process (asynchronously: the service runs in
 * this process).
 */
import { expect } from "chai";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

const ROOT = path.resolve(__dirname, "..", "..");
const BIN = path.join(ROOT, "bin", "sigil.js");

describe("signing policies: sigil policies", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let dir: string;

  const sigil = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [BIN, ...args],
        {
          cwd: ROOT,
          env: { ...process.env, SIGIL_URL: s.url, SIGIL_API_KEY: a.accountKey },
          timeout: 60_000,
        },
        (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  before(async () => {
    s = await startStack();
    a = await setupAccount(s);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-policies-"));
  });
  after(async () => {
    await s?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("uploads, reads, evaluates, sets and clears", async () => {
    const policy = {
      version: 1,
      rules: [{ name: "sign-in", effect: "allow", operation: "message", prefix: "login:" }],
    };
    const policyFile = path.join(dir, "policy.json");
    fs.writeFileSync(policyFile, JSON.stringify(policy));
    const up = await sigil(["policies", "upload", policyFile]);
    expect(up.code, up.stderr).to.equal(0);
    const cid = up.stdout.trim();
    expect(cid).to.match(/^Qm/);

    const got = await sigil(["policies", "get", cid]);
    expect(JSON.parse(got.stdout)).to.deep.equal(policy);

    const opFile = path.join(dir, "op.json");
    fs.writeFileSync(opFile, JSON.stringify({ kind: "message", message: "pay me" }));
    const denied = await sigil(["policies", "evaluate", cid, opFile]);
    expect(denied.code, denied.stderr).to.equal(0);
    expect(denied.stdout).to.match(/^denied: rule sign-in: .*\(prefix = pay me\)/);
    fs.writeFileSync(opFile, JSON.stringify({ kind: "message", message: "login: 1" }));
    expect((await sigil(["policies", "evaluate", policyFile, opFile])).stdout.trim()).to.equal(
      "allowed: rule sign-in",
    );

    const set = await sigil(["policies", "set", String(a.groupId), cid]);
    expect(set.code, set.stderr).to.equal(0);
    expect(
      (await s.api("GET", `/core/v1/groups/${a.groupId}`, { key: a.accountKey })).body.policy_cid,
    ).to.equal(cid);
    const clear = await sigil(["policies", "clear", String(a.groupId)]);
    expect(clear.code, clear.stderr).to.equal(0);
    expect(
      (await s.api("GET", `/core/v1/groups/${a.groupId}`, { key: a.accountKey })).body.policy_cid,
    ).to.equal(null);
  });

  it("an invalid document is an API error (exit 2) naming the problem; an unreadable file a usage error (exit 1)", async () => {
    const bad = path.join(dir, "bad.json");
    fs.writeFileSync(
      bad,
      JSON.stringify({ version: 1, rules: [{ name: "x", effect: "allow", operation: "sign" }] }),
    );
    const r = await sigil(["policies", "upload", bad]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.contain("invalid_policy");
    expect((await sigil(["policies", "upload", path.join(dir, "missing.json")])).code).to.equal(1);
  });
});
