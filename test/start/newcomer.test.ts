/**
 * Plays the newcomer: a fresh copy of the repository (its tracked files; node_modules is symlinked
 * rather than reinstalled; the contracts are compiled by the first npm start, as on a fresh clone), `npm start` as a child process with its own data
 * folder and free ports, the README walk-through through the CLI and through HTTP (as curl would), the
 * signature verified with ethers, Ctrl-C, `npm start` again, and everything still there.
 *
 * The action's code is read from README.md itself, so the README cannot drift from what works.
 */
import { expect } from "chai";
import { ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { request as httpRequest } from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { ethers } from "ethers";
import { readmeSignatureCheck } from "../sdk/support";

const REPO = path.resolve(__dirname, "..", "..");
const MESSAGE = "hello from Sigil";

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The action of the README's step 3, exactly as written there. */
function readmeAction(): string {
  const readme = fs.readFileSync(path.join(REPO, "README.md"), "utf8");
  const m = /cat > sign-message\.js <<'EOF'\n([\s\S]*?)\nEOF\n/.exec(readme);
  if (!m) throw new Error("README.md no longer contains the sign-message.js heredoc of the walk-through");
  return m[1] + "\n";
}

interface Started {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

describe("start: the newcomer's path (npm start, README walk-through, restart)", function () {
  this.timeout(300_000);

  let copy: string;
  let dataDir: string;
  let work: string;
  let port: number;
  let anvilPort: number;
  let sigil: Started | undefined;

  // What the walk-through creates, checked again after the restart.
  const cliRun: Record<string, string> = {};
  const httpRun: Record<string, string> = {};
  let balanceBeforeRestart: number;

  before(function () {
    this.timeout(120_000);
    copy = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-newcomer-repo-"));
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-newcomer-data-"));
    work = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-newcomer-work-"));
    // A fresh clone: exactly the tracked files.
    const files = execFileSync("git", ["ls-files", "-z"], { cwd: REPO, encoding: "utf8" })
      .split("\0")
      .filter(Boolean);
    for (const f of files) {
      const src = path.join(REPO, f);
      if (!fs.existsSync(src)) continue; // deleted in the working tree but not yet committed
      fs.mkdirSync(path.dirname(path.join(copy, f)), { recursive: true });
      fs.copyFileSync(src, path.join(copy, f));
    }
    // `npm install`, without doing it again. The contracts are NOT linked: the first `npm start` compiles
    // them as it would on a fresh clone (and the shared artifacts may be mid-rewrite by a coverage run).
    fs.symlinkSync(path.join(REPO, "node_modules"), path.join(copy, "node_modules"), "dir");
    fs.writeFileSync(path.join(work, "sign-message.js"), readmeAction());
  });

  after(async function () {
    this.timeout(60_000);
    // Whatever happened, leave no process behind: npm start's group, then the chain (its own group).
    if (sigil && sigil.child.exitCode === null && sigil.child.signalCode === null) {
      try {
        process.kill(-sigil.child.pid!, "SIGKILL");
      } catch {
        // gone
      }
    }
    const pidFile = path.join(dataDir, "anvil.pid");
    if (fs.existsSync(pidFile)) {
      const pid = Number(fs.readFileSync(pidFile, "utf8").split(" ")[0]);
      if (pid > 1 && alive(pid)) process.kill(pid, "SIGKILL");
    }
    for (const d of [copy, dataDir, work]) fs.rmSync(d, { recursive: true, force: true });
  });

  async function npmStart(): Promise<Started> {
    let out = "";
    let err = "";
    const child = spawn("npm", ["start", "--silent"], {
      cwd: copy,
      env: {
        ...process.env,
        SIGIL_DATA_DIR: dataDir,
        PORT: String(port),
        SIGIL_ANVIL_PORT: String(anvilPort),
        SIGIL_LOG_LEVEL: "warn",
      },
      detached: true, // its own process group, so SIGINT to the group is exactly a terminal Ctrl-C
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.once("exit", (code, signal) => r({ code, signal })),
    );
    const deadline = Date.now() + 240_000; // the first start compiles the contracts
    let exited = false;
    void exit.then(() => (exited = true));
    for (;;) {
      if (exited) throw new Error(`npm start exited early.\nstdout:\n${out}\nstderr:\n${err}`);
      if (Date.now() > deadline)
        throw new Error(`npm start did not become healthy.\nstdout:\n${out}\nstderr:\n${err}`);
      if (/Sigil is running at/.test(out) && (await healthy())) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    return { child, url: `http://127.0.0.1:${port}`, stdout: () => out, stderr: () => err, exit };
  }

  async function ctrlC(s: Started) {
    process.kill(-s.child.pid!, "SIGINT");
    return s.exit;
  }

  function cli(args: string[], apiKey?: string, opts: { npx?: boolean } = {}) {
    const cmd = opts.npx ? "npx" : process.execPath;
    const argv = opts.npx
      ? ["--no-install", "sigil", ...args]
      : [path.join(copy, "bin", "sigil.js"), ...args];
    const r = spawnSync(cmd, argv, {
      cwd: copy,
      env: { ...process.env, SIGIL_URL: `http://127.0.0.1:${port}`, SIGIL_API_KEY: apiKey ?? "" },
      encoding: "utf8",
      timeout: 120_000,
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }
  let lastStderr = "";
  function cliJson(args: string[], apiKey?: string, opts: { npx?: boolean } = {}): Record<string, unknown> {
    const r = cli(["--json", ...args], apiKey, opts);
    lastStderr = r.stderr;
    if (r.code !== 0)
      throw new Error(`sigil ${args.join(" ")} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  }

  /**
   * One HTTP request on its own connection (what curl does). Node's fetch would reuse a pooled
   * keep-alive socket across the restart and race the server's idle timeout.
   */
  function http(method: string, apiPath: string, key?: string, body?: unknown, bearer = false) {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = {};
    if (key) headers[bearer ? "authorization" : "x-api-key"] = bearer ? `Bearer ${key}` : key;
    if (payload !== undefined) headers["content-type"] = "application/json";
    return new Promise<{ status: number; json: Record<string, unknown> }>((resolve, reject) => {
      const req = httpRequest(
        { host: "127.0.0.1", port, path: `/core/v1/${apiPath}`, method, headers, agent: false },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () =>
            resolve({ status: res.statusCode!, json: JSON.parse(text) as Record<string, unknown> }),
          );
        },
      );
      req.on("error", reject);
      req.end(payload);
    });
  }

  async function healthy(): Promise<boolean> {
    try {
      await http("GET", "../health");
      return true;
    } catch {
      return false;
    }
  }

  it("npm start on a fresh copy becomes healthy and prints the URL, chain, contracts and a next step", async () => {
    port = await freePort();
    anvilPort = await freePort();
    sigil = await npmStart();
    const out = sigil.stdout();
    expect(out).to.contain(`Sigil is running at http://127.0.0.1:${port}`);
    expect(out).to.match(/chain {8}31337 \(embedded anvil at http:\/\/127\.0\.0\.1:\d+\)/);
    expect(out).to.match(/registry {5}0x[0-9a-fA-F]{40} {2}\(deployed now\)/);
    expect(out).to.match(/forwarder {4}0x[0-9a-fA-F]{40}/);
    expect(out).to.contain("npx sigil account create");
    expect(sigil.stderr()).to.contain("compiling the contracts (first start of this checkout");
    expect(fs.existsSync(path.join(copy, "typechain-types", "index.ts"))).to.equal(true);
    expect(sigil.stderr()).to.contain("DEV MODE: a new root key was generated");
    expect((fs.statSync(path.join(dataDir, "root.key")).mode & 0o777).toString(8)).to.equal("600");
    // The root key itself is never printed.
    const rootKey = fs.readFileSync(path.join(dataDir, "root.key"), "utf8").trim();
    expect(out + sigil.stderr()).not.to.contain(rootKey);
  });

  it("npm start on a fresh copy builds the dashboard, prints its URL and serves it at /", async () => {
    expect(sigil!.stderr()).to.contain("building the dashboard");
    expect(sigil!.stdout()).to.contain(`dashboard    http://127.0.0.1:${port}/`);
    const page = await fetch(`http://127.0.0.1:${port}/`);
    expect(page.status).to.equal(200);
    expect(await page.text()).to.contain('<div id="root"></div>');
    expect(page.headers.get("content-security-policy")).to.contain("default-src 'none'");
  });

  it("README walk-through with the CLI: account, PKP, action, group, usage key, run; the signature verifies", async () => {
    const account = cliJson(["account", "create", "--name", "my first account"], undefined, { npx: true });
    expect(account.api_key).to.match(/^ak_[0-9a-f]{64}$/);
    const ak = String(account.api_key);
    cliRun.accountKey = ak;
    cliRun.accountId = String(account.account_id);

    const pkp = cliJson(["pkps", "create", "--name", "signer"], ak);
    expect(pkp.pkp_id).to.match(/^0x[0-9a-f]{64}$/);
    cliRun.pkp = String(pkp.pkp_id);
    expect(lastStderr).to.match(/^✓ creating the PKP on chain \(\d+\.\ds\)$/m); // progress goes to stderr, JSON stays clean
    cliRun.pkpAddress = ethers.getAddress(String(pkp.address));

    const pinned = cliJson(["actions", "pin", path.join(work, "sign-message.js")], ak);
    const cid = cliJson(["actions", "cid", path.join(work, "sign-message.js")], ak);
    expect(pinned.cid).to.match(/^Qm[1-9A-HJ-NP-Za-km-z]{44}$/);
    expect(cid.cid).to.equal(pinned.cid);
    cliRun.cid = String(pinned.cid);

    const group = cliJson(
      ["groups", "create", "--name", "demo", "--pkp", cliRun.pkp, "--action", cliRun.cid],
      ak,
    );
    cliRun.group = String(group.group_id);

    const key = cliJson(["keys", "add", "--name", "server", "--execute", cliRun.group], ak);
    expect(key.usage_api_key).to.match(/^uk_[0-9a-f]{64}$/);
    cliRun.usageKey = String(key.usage_api_key);

    const run = cliJson(
      [
        "run",
        "--cid",
        cliRun.cid,
        "--pkp",
        cliRun.pkp,
        "--params",
        JSON.stringify({ pkpId: cliRun.pkp, message: MESSAGE }),
      ],
      cliRun.usageKey,
    );
    const response = run.response as { message: string; signature: string; address: string };
    expect(response.message).to.equal(MESSAGE);
    expect(ethers.verifyMessage(MESSAGE, response.signature)).to.equal(cliRun.pkpAddress);
    expect(ethers.getAddress(response.address)).to.equal(cliRun.pkpAddress);
    cliRun.signature = response.signature;
  });

  it("the README's verification one-liner prints OK for the PKP's address", () => {
    const sig = cliRun.signature;
    const printed = execFileSync(
      process.execPath,
      [
        "-e",
        readmeSignatureCheck(fs.readFileSync(path.join(REPO, "README.md"), "utf8")),
        MESSAGE,
        sig,
        cliRun.pkpAddress,
      ],
      {
        cwd: copy,
        encoding: "utf8",
      },
    );
    expect(printed).to.equal("OK\n");
  });

  it("the walk-through costs what README.md says it does", () => {
    const stated = /this walk-through spends (\d+) \(/.exec(
      fs.readFileSync(path.join(REPO, "README.md"), "utf8"),
    );
    expect(stated, "README.md no longer states the walk-through's cost").to.not.equal(null);
    const balance = cliJson(["billing", "balance"], cliRun.accountKey);
    expect(100 - Number(balance.balance_cents)).to.equal(Number(stated![1]));
  });

  it("the owner edits the action and runs it again in one step, as README.md shows (no group)", () => {
    const file = path.join(work, "sign-message.js");
    fs.writeFileSync(file, readmeAction().replace("return { message,", "return { edited: true, message,"));
    const m = /^npx sigil run sign-message\.js --pkp \$PKP --params '(.+)'$/m.exec(
      fs.readFileSync(path.join(REPO, "README.md"), "utf8"),
    );
    expect(m, "README.md no longer shows the owner's one-step run").to.not.equal(null);
    const run = cliJson(["run", file, "--pkp", cliRun.pkp, "--params", m![1]], cliRun.accountKey);
    const response = run.response as { edited: boolean; message: string; signature: string };
    expect(response.edited).to.equal(true);
    expect(ethers.verifyMessage(response.message, response.signature)).to.equal(cliRun.pkpAddress);
    fs.writeFileSync(file, readmeAction());
  });

  it("the CLI prints human output by default and never echoes a key it did not just create", () => {
    const list = cli(["keys", "list"], cliRun.accountKey);
    expect(list.code).to.equal(0);
    expect(list.stdout).to.match(/^id +name +execute/);
    expect(list.stdout).to.contain("server");
    const config = cli(["config"], cliRun.accountKey);
    expect(config.stdout).to.contain("set (from SIGIL_API_KEY)");
    for (const r of [list, config]) {
      expect(r.stdout + r.stderr).not.to.contain(cliRun.accountKey);
      expect(r.stdout + r.stderr).not.to.contain(cliRun.usageKey.slice(3));
    }
  });

  it("an API refusal exits 2 with the error code: the usage key may not create PKPs", () => {
    const r = cli(["pkps", "create"], cliRun.usageKey);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^error 403 \w+: /m);
  });

  it("README walk-through over HTTP (the curl steps), with Authorization: Bearer for the usage key", async () => {
    const account = await http("POST", "new_account", undefined, { account_name: "curl account" });
    expect(account.status).to.be.oneOf([200, 201]);
    const ak = String(account.json.api_key);
    httpRun.accountKey = ak;
    const pkp = await http("POST", "pkps/create", ak, { name: "signer" });
    httpRun.pkp = String(pkp.json.pkp_id);
    httpRun.pkpAddress = ethers.getAddress(String(pkp.json.address));
    const action = await http("POST", "actions", ak, { code: readmeAction() });
    httpRun.cid = String(action.json.cid);
    expect(httpRun.cid).to.equal(cliRun.cid); // same code, same CID, in any account
    const group = await http("POST", "groups", ak, {
      name: "demo",
      pkps: [httpRun.pkp],
      actions: [httpRun.cid],
    });
    httpRun.group = String(group.json.group_id);
    const key = await http("POST", "add_usage_api_key", ak, {
      name: "server",
      can_create_groups: false,
      can_delete_groups: false,
      can_create_pkps: false,
      manage_ipfs_ids_in_groups: [],
      add_pkp_to_groups: [],
      remove_pkp_from_groups: [],
      execute_in_groups: [Number(httpRun.group)],
    });
    httpRun.usageKey = String(key.json.usage_api_key);
    const res = await http(
      "POST",
      "svc_action",
      httpRun.usageKey,
      { cid: httpRun.cid, pkp_id: httpRun.pkp, js_params: { pkpId: httpRun.pkp, message: MESSAGE } },
      true,
    );
    expect(res.status).to.equal(200);
    const run = res.json as { response: { signature: string } };
    expect(ethers.verifyMessage(MESSAGE, run.response.signature)).to.equal(httpRun.pkpAddress);
    // Isolation: the CLI account's usage key cannot run with this account's PKP.
    const cross = await http("POST", "svc_action", cliRun.usageKey, {
      cid: httpRun.cid,
      pkp_id: httpRun.pkp,
      js_params: { pkpId: httpRun.pkp, message: MESSAGE },
    });
    expect(cross.status).to.equal(403);
  });

  it("spends credit for writes and executions, and a simulated top-up adds exactly what was paid", async () => {
    const before = cliJson(["billing", "balance"], cliRun.accountKey);
    expect(Number(before.balance_cents)).to.be.lessThan(100); // the dev sign-up credit, minus the walk-through
    expect(Number(before.balance_cents)).to.be.greaterThan(0);
    const topUp = cliJson(["billing", "top-up", "--amount", "500"], cliRun.accountKey);
    expect(topUp.status).to.equal("succeeded");
    const after = (await http("GET", "billing/balance", cliRun.accountKey)).json;
    expect(Number(after.balance_cents)).to.equal(Number(before.balance_cents) + 500);
    balanceBeforeRestart = Number(after.balance_cents);
  });

  it("Ctrl-C stops the API and the chain cleanly and keeps the state", async () => {
    const s = sigil!;
    const pid = Number(fs.readFileSync(path.join(dataDir, "anvil.pid"), "utf8").split(" ")[0]);
    const exit = await ctrlC(s);
    expect(exit.signal === "SIGINT" || exit.code === 0, `exit ${JSON.stringify(exit)}`).to.equal(true);
    expect(s.stderr()).to.contain("stopped. Run npm start again to resume");
    expect(alive(pid)).to.equal(false);
    expect(fs.existsSync(path.join(dataDir, "anvil.pid"))).to.equal(false);
    expect(fs.existsSync(path.join(dataDir, "chain-state.json"))).to.equal(true);
    expect(await healthy()).to.equal(false);
  });

  it("npm start again resumes with every account, key, group, PKP and balance", async () => {
    sigil = await npmStart();
    expect(sigil.stdout()).not.to.contain("(deployed now)");
    expect(sigil.stderr()).not.to.contain("compiling the contracts");
    expect(sigil.stderr()).not.to.contain("DEV MODE: a new root key was generated");

    const info = (await http("GET", "account", cliRun.accountKey)).json;
    expect(String(info.account_id)).to.equal(cliRun.accountId);
    const keys = cliJson(["keys", "list"], cliRun.accountKey) as { items: { name: string }[] };
    expect(keys.items.map((k) => k.name)).to.deep.equal(["server"]);
    const pkps = (await http("GET", "pkps", cliRun.accountKey)).json as { items: { pkp_id: string }[] };
    expect(pkps.items.map((p) => p.pkp_id)).to.deep.equal([cliRun.pkp]);
    const group = (await http("GET", `groups/${cliRun.group}`, cliRun.accountKey)).json;
    expect(group.pkps).to.deep.equal([cliRun.pkp]);
    expect(group.actions).to.deep.equal([cliRun.cid]);
    const balance = cliJson(["billing", "balance"], cliRun.accountKey);
    expect(Number(balance.balance_cents)).to.equal(balanceBeforeRestart);

    // The same root key: the same PKP signs with the same address, with the key created before the restart.
    const run = cliJson(
      [
        "run",
        "--cid",
        cliRun.cid,
        "--pkp",
        cliRun.pkp,
        "--params",
        JSON.stringify({ pkpId: cliRun.pkp, message: MESSAGE }),
      ],
      cliRun.usageKey,
    );
    expect(ethers.verifyMessage(MESSAGE, (run.response as { signature: string }).signature)).to.equal(
      cliRun.pkpAddress,
    );
    const httpAccount = await http("GET", "account", httpRun.accountKey);
    expect(httpAccount.status).to.equal(200);
  });

  it("a key removed with the CLI is refused on the next request (exit 2, 401)", () => {
    const removed = cli(["keys", "remove", cliRun.usageKey], cliRun.accountKey);
    expect(removed.code).to.equal(0);
    const r = cli(["run", "--cid", cliRun.cid, "--pkp", cliRun.pkp, "--params", "{}"], cliRun.usageKey);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^error 401 \w+: /m);
  });

  it("stops cleanly a second time", async () => {
    const exit = await ctrlC(sigil!);
    expect(exit.signal === "SIGINT" || exit.code === 0).to.equal(true);
    expect(fs.existsSync(path.join(dataDir, "anvil.pid"))).to.equal(false);
  });
});
