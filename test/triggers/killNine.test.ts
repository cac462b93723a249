/**
 * `kill -9` of an instance during a triggered run (PostgreSQL, two instances): the run's lease runs
 * out, the other instance claims it as its next attempt and runs it to the end, and the run history
 * holds that one run, succeeded once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Enclave } from "../../enclave";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger, waitForRun } from "./helpers";

const LEASE_MS = 1_500;
// Busy for 3 s (long enough to be killed in the middle), then answers.
const SLOW =
  "async function main(p) { const end = Date.now() + 3000; while (Date.now() < end) {} return { firing: p.trigger.firing_id }; }";

describeOnPostgres("triggers: kill -9 during a run", function () {
  this.timeout(180_000);
  let s: Stack;
  let child: ChildProcess | null = null;
  let childDir: string;

  before(async () => {
    const rootKey = randomBytes(32).toString("hex");
    const enclave = Enclave.fromRootKey(rootKey);
    const databaseUrl = await freshDatabaseUrl();
    // This instance starts with its runner off: the child instance claims the run first.
    s = await startStack({ enclave, databaseUrl, triggers: { run: false, leaseMs: LEASE_MS, pollMs: 50 } });
    for (let w = 0; w < 4; w++)
      await s.provider.send("anvil_setBalance", [enclave.gasAddress(w, undefined), "0x56BC75E2D63100000"]);
    childDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-trigger-child-"));
    child = spawn(
      process.execPath,
      ["-r", "ts-node/register/transpile-only", path.join(__dirname, "fixtures", "triggerInstance.ts")],
      {
        env: {
          ...process.env,
          RPC_URL: s.relayerOptions.rpcUrl,
          REGISTRY: s.deployment.registry,
          FORWARDER: s.deployment.forwarder,
          DEPLOY_BLOCK: String(s.deployment.deployBlock),
          ROOT_KEY: rootKey,
          DATABASE_URL: databaseUrl,
          DATA_DIR: childDir,
          LEASE_MS: String(LEASE_MS),
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let err = "";
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    await new Promise<void>((resolve, reject) => {
      let out = "";
      child!.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        if (out.includes("READY")) resolve();
      });
      child!.once("exit", (code) => reject(new Error(`the child instance exited (${code}): ${err}`)));
    });
  });
  after(async () => {
    child?.kill("SIGKILL");
    await s?.close();
    if (childDir) fs.rmSync(childDir, { recursive: true, force: true });
  });

  it("the run is retried on the other instance after its lease and finishes once", async () => {
    const a = await accountWithKey(s, SLOW);
    const t = await createTrigger(s, a, { kind: "webhook", retry: { max_attempts: 3, backoff_ms: 100 } });
    const f = await s.api("POST", `/core/v1/triggers/${t.id}/fire`, { key: a.accountKey, body: {} });
    expect(f.status).to.equal(202);
    const running = await waitForRun(s, a.accountKey, t.id, f.body.run_id, ["running"]);
    expect(running.instance).to.match(/^child:/);
    child!.kill("SIGKILL");
    await new Promise((r) => child!.once("exit", r));
    child = null;
    s.relayer.triggers.runner.start();
    const done = await waitForRun(
      s,
      a.accountKey,
      t.id,
      f.body.run_id,
      ["succeeded", "failed", "skipped"],
      30_000,
    );
    expect(done.status, JSON.stringify(done)).to.equal("succeeded");
    expect(done.attempt).to.equal(2);
    expect(done.instance).to.not.match(/^child:/);
    expect(done.response).to.deep.equal({ firing: f.body.firing_id });
    const runs = await s.api("GET", `/core/v1/triggers/${t.id}/runs`, { key: a.accountKey });
    expect(runs.body.total).to.equal(1);
  });
});
