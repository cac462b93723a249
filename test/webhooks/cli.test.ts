/** `npx sigil webhooks …` against a real relayer (the CLI is a separate process on the SDK). */
import { spawn } from "node:child_process";
import * as path from "node:path";
import { expect } from "chai";
import type { Stack } from "../helpers/stack";
import { newAccount, startWebhookStack } from "./support";

const ROOT = path.resolve(__dirname, "..", "..");

describe("webhooks: the CLI", function () {
  this.timeout(180_000);
  let s: Stack;
  let key: string;

  function sigil(args: string[]) {
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(ROOT, "bin", "sigil.js"), ...args], {
        cwd: ROOT,
        env: { ...process.env, SIGIL_URL: s.url, SIGIL_API_KEY: key },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
  }

  before(async () => {
    s = await startWebhookStack({ maxEndpointsPerAccount: 4 });
    ({ key } = await newAccount(s));
  });
  after(async () => {
    await s?.close();
  });

  it("create prints the endpoint and its secret once; show, update, rotate-secret and delete work on it", async () => {
    const created = await sigil([
      "webhooks",
      "create",
      "--endpoint-url",
      "https://1.1.1.1/hooks",
      "--events",
      "payment.credited",
      "--description",
      "cli",
    ]);
    expect(created.code, created.stderr).to.equal(0);
    const id = /id\s+(we_[0-9a-f]{24})/.exec(created.stdout)![1];
    expect(created.stdout).to.match(/shown this once[\s\S]*whsec_[A-Za-z0-9_-]{43}/);

    const updated = await sigil([
      "--json",
      "webhooks",
      "update",
      id,
      "--enabled",
      "false",
      "--events",
      "key.added,key.removed",
    ]);
    expect(updated.code, updated.stderr).to.equal(0);
    expect(JSON.parse(updated.stdout)).to.deep.include({
      enabled: false,
      event_types: ["key.added", "key.removed"],
    });

    const shown = await sigil(["webhooks", "show", id]);
    expect(shown.stdout).to.not.contain("whsec_");

    const rotated = await sigil(["--json", "webhooks", "rotate-secret", id, "--expire-previous-in", "0"]);
    expect(JSON.parse(rotated.stdout)).to.include({ id, previous_secret_expires_at: null });

    const deleted = await sigil(["--json", "webhooks", "delete", id]);
    expect(JSON.parse(deleted.stdout)).to.deep.equal({ id, deleted: true });
  });

  it("a refused URL exits 2 with the API's error code", async () => {
    const r = await sigil(["webhooks", "create", "--endpoint-url", "https://127.0.0.1/x", "--events", "*"]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.contain("error 400 webhook_url_refused");
  });

  it("update with nothing to change is a usage error (exit 1)", async () => {
    const r = await sigil(["webhooks", "update", "we_" + "0".repeat(24)]);
    expect([r.code, r.stderr.trim()]).to.deep.equal([
      1,
      "error: nothing to change: give --endpoint-url, --events, --description or --enabled",
    ]);
  });
});
