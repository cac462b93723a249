/** `sigil keys rotate` against a real stack (the CLI goes through the SDK's rotateUsageApiKey). */
import { spawn } from "node:child_process";
import * as path from "node:path";
import { expect } from "chai";
import { parseOverlap } from "../../cli/commands/keys";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

const ROOT = path.resolve(__dirname, "..", "..");

describe("rotation: sigil keys rotate", function () {
  this.timeout(120_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;

  function sigil(args: string[], apiKey = a.accountKey) {
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(ROOT, "bin", "sigil.js"), ...args], {
        cwd: ROOT,
        env: { ...process.env, SIGIL_URL: s.url, SIGIL_API_KEY: apiKey },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
  }

  before(async () => {
    s = await startStack();
    a = await setupAccount(s);
  });
  after(async () => {
    await s?.close();
  });

  it("prints the new key once and when the old one stops; the new key has the old one's scopes", async () => {
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "server", execute_in_groups: [a.groupId] },
    });
    const r = await sigil(["keys", "rotate", k.body.id, "--overlap", "15m"]);
    expect(r.code, r.stderr).to.equal(0);
    const value = /^ {2}(uk_[0-9a-f]{64})$/m.exec(r.stdout)?.[1];
    expect(value, r.stdout).to.be.a("string");
    expect(r.stdout).to.match(new RegExp(`^replaces {6}${k.body.id}, refused from \\d{4}-`, "m"));
    expect(r.stdout).to.match(/^execute {7}\d+$/m);
    const run = await s.api("POST", "/core/v1/svc_action", {
      key: value,
      body: { cid: a.cid, pkp_id: a.pkpId },
    });
    expect(run.status).to.equal(200);
  });

  it("--json prints the API answer, including previous_key", async () => {
    const k = await s.api("POST", "/core/v1/add_usage_api_key", { key: a.accountKey, body: { name: "j" } });
    const r = await sigil(["--json", "keys", "rotate", k.body.usage_api_key, "--overlap", "0"]);
    expect(r.code, r.stderr).to.equal(0);
    const body = JSON.parse(r.stdout);
    expect(body.previous_key.id).to.equal(k.body.id);
    expect(body.usage_api_key).to.match(/^uk_/);
  });

  it("an unknown key exits 2 with the API's error", async () => {
    const r = await sigil(["keys", "rotate", "0x" + "12".repeat(20), "--overlap", "60"]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^error 404 usage_key_not_found: /m);
  });

  it("parses --overlap as seconds or with a unit, and refuses anything else", () => {
    expect(parseOverlap("90")).to.equal(90);
    expect(parseOverlap("15m")).to.equal(900);
    expect(parseOverlap("12h")).to.equal(43_200);
    expect(parseOverlap("7d")).to.equal(604_800);
    expect(() => parseOverlap("1w")).to.throw('--overlap: "1w" is not a duration');
    expect(() => parseOverlap("-5")).to.throw("is not a duration");
  });
});
