/**
 * `sigil triggers` end to end (the CLI process, the SDK, a real stack): the two examples of
 * docs/triggers.md (a heartbeat every 5 minutes, a sweep on Transfer to my address) as commands; a
 * manual firing runs; revoking the key makes the next runs of both fail with the refusal recorded.
 */
import { execFile } from "node:child_process";
import * as path from "node:path";
import { expect } from "chai";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, waitForRun } from "./helpers";

const ROOT = path.resolve(__dirname, "..", "..");
const BIN = path.join(ROOT, "bin", "sigil.js");

describe("triggers: sigil triggers", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof accountWithKey>>;

  const sigil = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [BIN, "--json", ...args],
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
    s = await startStack({ triggers: { pollMs: 50 } });
    a = await accountWithKey(s);
  });
  after(async () => {
    await s?.close();
  });

  it("disables, enables and deletes", async () => {
    const created = JSON.parse(
      (
        await sigil([
          "triggers",
          "create",
          "--name",
          "hook",
          "--webhook",
          "--cid",
          a.cid,
          "--key-address",
          a.keyAddress,
        ])
      ).stdout,
    );
    expect(JSON.parse((await sigil(["triggers", "disable", created.id])).stdout).enabled).to.equal(false);
    expect(JSON.parse((await sigil(["triggers", "enable", created.id])).stdout).enabled).to.equal(true);
    const upd = JSON.parse((await sigil(["triggers", "update", created.id, "--name", "renamed"])).stdout);
    expect(upd.name).to.equal("renamed");
    expect((await sigil(["triggers", "delete", created.id])).code).to.equal(0);
    const gone = await sigil(["triggers", "get", created.id]);
    expect(gone.code).to.not.equal(0);
    expect(gone.stderr + gone.stdout).to.contain("trigger_not_found");
  });

  it("creates the heartbeat and the sweep, fires, lists runs; after the key is revoked both fail", async () => {
    const common = ["--cid", a.cid, "--pkp", a.pkpId, "--key-address", a.keyAddress];
    const heartbeat = await sigil([
      "triggers",
      "create",
      "--name",
      "heartbeat",
      "--cron",
      "*/5 * * * *",
      ...common,
    ]);
    expect(heartbeat.code, heartbeat.stderr).to.equal(0);
    const hb = JSON.parse(heartbeat.stdout);
    expect(hb.schedule.cron).to.equal("*/5 * * * *");

    const me = "0x" + "ab".repeat(20);
    const sweep = await sigil([
      "triggers",
      "create",
      "--name",
      "sweep",
      "--chain-id",
      "31337",
      "--address",
      s.deployment.registry,
      "--event",
      "Transfer(address indexed from, address indexed to, uint256 value)",
      "--topics",
      `any,${me}`,
      ...common,
    ]);
    expect(sweep.code, sweep.stderr).to.equal(0);
    const sw = JSON.parse(sweep.stdout);
    expect(sw.chain_event.topics).to.deep.equal([null, "0x" + "0".repeat(24) + "ab".repeat(20)]);
    expect(sw.chain_event.topic0).to.equal(
      "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
    );

    const list = JSON.parse((await sigil(["triggers", "list"])).stdout);
    expect(list.items.map((t: { name: string }) => t.name)).to.deep.equal(["heartbeat", "sweep"]);

    const fired = JSON.parse((await sigil(["triggers", "fire", hb.id])).stdout);
    expect((await waitForRun(s, a.accountKey, hb.id, fired.run_id)).status).to.equal("succeeded");

    const removed = await sigil(["keys", "remove", a.usageKey]);
    expect(removed.code, removed.stderr).to.equal(0);
    for (const t of [hb, sw]) {
      const f = JSON.parse((await sigil(["triggers", "fire", t.id])).stdout);
      const run = await waitForRun(s, a.accountKey, t.id, f.run_id);
      expect([run.status, run.error.code]).to.deep.equal(["failed", "unknown_api_key"]);
    }
    const runs = JSON.parse((await sigil(["triggers", "runs", hb.id, "--status", "failed"])).stdout);
    expect(runs.items.length).to.equal(1);
  });
});
