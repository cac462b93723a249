/**
 * The CLI commands the README walk-through does not use, against the real service (started in-process
 * with startSigil on an embedded chain): keys update (scopes and metadata-only) and remove by id, groups
 * add/remove/delete, pkps show, actions get, run from a file, billing history, and the JSON error object.
 */
import { expect } from "chai";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { loadConfig } from "../../scripts/start/config";
import { startSigil, type RunningSigil } from "../../scripts/start/service";
import { eventually } from "../../testkit/eventually";

const ROOT = path.resolve(__dirname, "..", "..");
const ACTION = `async function main({ pkpId }) { return { address: await Actions.getAddress({ pkpId }) }; }\n`;

describe("start: CLI commands against the real service", function () {
  this.timeout(180_000);
  let dir: string;
  let sigilService: RunningSigil;
  let accountKey: string;
  let pkp: string;
  let pkpAddress: string;
  let cid: string;
  let group: string;
  let usageKey: string;
  let usageKeyId: string;

  /** Asynchronous: the service runs in this process, a spawnSync would block it. */
  function sigil(args: string[], apiKey: string | undefined = accountKey) {
    return new Promise<{
      code: number | null;
      stdout: string;
      stderr: string;
      json: () => Record<string, unknown>;
    }>((resolve) => {
      const child = spawn(process.execPath, [path.join(ROOT, "bin", "sigil.js"), ...args], {
        cwd: ROOT,
        env: { ...process.env, SIGIL_URL: sigilService.url, SIGIL_API_KEY: apiKey ?? "" },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("close", (code) =>
        resolve({ code, stdout, stderr, json: () => JSON.parse(stdout) as Record<string, unknown> }),
      );
    });
  }
  async function ok(args: string[], apiKey?: string) {
    const r = await sigil(["--json", ...args], apiKey);
    if (r.code !== 0) throw new Error(`sigil ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
    return r.json();
  }

  before(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-cli-api-"));
    sigilService = await startSigil(
      loadConfig(
        {
          SIGIL_DATA_DIR: path.join(dir, "data"),
          PORT: "0",
          SIGIL_ANVIL_PORT: "0",
          SIGIL_LOG_FILE: path.join(dir, "sigil.log"),
        },
        dir,
      ),
      { warn: () => {} },
    );
    fs.writeFileSync(path.join(dir, "address.js"), ACTION);
    accountKey = String((await ok(["account", "create"], "")).api_key);
    const p = await ok(["pkps", "create", "--name", "p"]);
    pkp = String(p.pkp_id);
    pkpAddress = String(p.address);
    cid = String((await ok(["actions", "pin", path.join(dir, "address.js")])).cid);
    group = String((await ok(["groups", "create", "--name", "g"])).group_id);
    const k = await ok(["keys", "add", "--name", "k", "--execute", group]);
    usageKey = String(k.usage_api_key);
    usageKeyId = String(k.id);
  });

  after(async () => {
    await sigilService?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("groups add puts an action and a PKP in a group, and groups show lists them", async () => {
    await ok(["groups", "add", group, "--action", cid, "--pkp", pkp]);
    const g = await ok(["groups", "show", group]);
    expect(g.actions).to.deep.equal([cid]);
    expect(g.pkps).to.deep.equal([pkp]);
  });

  it("run executes an action from a file (inline code) with the usage key", async () => {
    const r = await ok(
      ["run", path.join(dir, "address.js"), "--pkp", pkp, "--params", JSON.stringify({ pkpId: pkp })],
      usageKey,
    );
    expect((r.response as { address: string }).address).to.equal(pkpAddress);
    expect(r.has_error).to.equal(false);
  });

  it("an action that throws exits 2, prints its error and marks the run ✗", async () => {
    const r = await sigil(["run", "--cid", cid, "--params", "{}"]); // no pkpId: Actions.getAddress refuses
    expect(r.code).to.equal(2);
    expect(r.stdout, r.stderr).to.match(/^error: invalid_argument: /m);
    expect(r.stderr).to.match(/^✗ running the action/m);
    expect(r.stderr).to.not.match(/^✓ running the action/m);
  });

  it("an action that runs past --timeout exits 2, marked ✗, says it timed out and is charged for its limit", async () => {
    const loop = path.join(dir, "loop.js");
    fs.writeFileSync(loop, "async function main() { for (;;) {} }\n");
    const r = await sigil(["run", loop, "--timeout", "1500ms"]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^✗ running the action/m);
    expect(r.stdout).to.match(/^error: timeout: /m);
    expect(r.stdout).to.match(/--timeout/);
    expect(r.stderr).to.match(/^time limit 1\.5 s: this run costs at most 2 cents$/m);
    expect(r.stderr).to.match(/^charged 2 cents /m);
  });

  it("a run with an unknown key exits 2 with unknown_api_key and its fix", async () => {
    const r = await sigil(["run", "--cid", cid], "uk_" + "7c".repeat(32));
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^error 401 unknown_api_key: /m);
    expect(r.stderr).to.match(/^fix: Use a live key/m);
    expect(r.stderr).to.match(/^docs: docs\/errors\.md#unknown_api_key$/m);
  });

  it("--pkp is passed to the action as pkpId when the params name none", async () => {
    const r = await ok(["run", path.join(dir, "address.js"), "--pkp", pkp]);
    expect((r.response as { address: string }).address).to.equal(pkpAddress);
  });

  it("run sends a 5 s time limit unless --timeout says otherwise", async () => {
    const r = await sigil(["run", path.join(dir, "address.js"), "--pkp", pkp]);
    expect(r.stderr).to.match(/^time limit 5 s: this run costs at most 5 cents$/m);
  });

  it("groups add warns about a CID that is not pinned here, and still adds it", async () => {
    const stranger = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
    const r = await sigil(["groups", "add", group, "--action", stranger]);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.match(new RegExp(`^warning: action ${stranger} is not pinned on this service`, "m"));
    await ok(["groups", "remove", group, "--action", stranger]);
  });

  it("groups add says nothing about a pinned CID", async () => {
    const file = path.join(dir, "pinned.js");
    fs.writeFileSync(file, "async function main() { return 'pinned'; }\n");
    const pinned = String((await ok(["actions", "pin", file])).cid);
    const r = await sigil(["groups", "add", group, "--action", pinned]);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.not.match(/^warning:/m);
    await ok(["groups", "remove", group, "--action", pinned]);
  });

  it("keys add --spend-cap sets the key's cap and shows it", async () => {
    const r = await sigil(["keys", "add", "--name", "capped", "--execute", group, "--spend-cap", "7"]);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/^spend cap {5}7 cents$/m);
    await ok(["keys", "remove", /^usage key id +(0x[0-9a-fA-F]{40})$/m.exec(r.stdout)![1]]);
  });

  it("keys update --spend-cap changes the cap", async () => {
    const k = await ok(["keys", "add", "--name", "capped2", "--execute", group, "--spend-cap", "7"]);
    const u = await ok(["keys", "update", String(k.id), "--name", "capped2", "--spend-cap", "9"]);
    expect(u.spend_cap_cents).to.equal(9);
    await ok(["keys", "remove", String(k.id)]);
  });

  it("the account key runs code from a file that no group lists (owner-direct, exit 0)", async () => {
    const other = path.join(dir, "owner-direct.js");
    fs.writeFileSync(other, "async function main() { return 41 + 1; }\n");
    const r = await sigil(["run", other, "--pkp", pkp]);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim()).to.equal("42");
  });

  it("a usage key running code whose CID is in no group is refused with the reason and the fix (exit 2, 403)", async () => {
    const other = path.join(dir, "other.js");
    fs.writeFileSync(other, "return 1;\n");
    const r = await sigil(["run", other], usageKey);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^error 403 not_authorized_to_execute: /m);
    expect(r.stderr).to.match(new RegExp(`npx sigil groups add ${group} --action Qm`));
  });

  it("keys update --metadata-only renames the key and keeps its scopes", async () => {
    await ok(["keys", "update", usageKeyId, "--name", "renamed", "--metadata-only"]);
    const list = (await ok(["keys", "list"])) as {
      items: { name: string; can_execute_in_groups: number[] }[];
    };
    expect(list.items.map((k) => [k.name, k.can_execute_in_groups])).to.deep.equal([
      ["renamed", [Number(group)]],
    ]);
  });

  it("keys update replaces every scope: with none, the key can no longer run (exit 2, 403)", async () => {
    await ok(["keys", "update", usageKey, "--name", "renamed"]);
    const r = await sigil(
      ["run", "--cid", cid, "--pkp", pkp, "--params", JSON.stringify({ pkpId: pkp })],
      usageKey,
    );
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^error 403 not_authorized_to_execute: /m);
  });

  it("keys add --execute all grants every group and says so: all groups", async () => {
    const r = await sigil(["keys", "add", "--name", "everywhere", "--execute", "all"]);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.match(/^execute {7}all groups$/m);
    const listed = await sigil(["keys", "list"]);
    expect(listed.stdout).to.match(/everywhere +all groups/);
  });

  it("--json prints the API error object on stdout", async () => {
    const r = await sigil(["--json", "groups", "show", "999"]);
    expect(r.code).to.equal(2);
    const body = r.json() as { error: { status: number; code: string } };
    expect(body.error.status).to.equal(404);
    expect(body.error.code).to.equal("group_not_found");
  });

  it("groups remove takes the PKP out of the group", async () => {
    await ok(["groups", "remove", group, "--pkp", pkp]);
    expect((await ok(["groups", "show", group])).pkps).to.deep.equal([]);
  });

  it("pkps show needs no key; actions get returns the pinned code", async () => {
    const shown = await ok(["pkps", "show", pkp], "");
    expect(shown.address).to.equal(pkpAddress);
    expect((await ok(["actions", "get", cid])).code).to.equal(ACTION);
  });

  it("pkps list and pkps show give each PKP's Solana and Taproot addresses and keys", async () => {
    const shown = await ok(["pkps", "show", pkp], "");
    expect(shown.solana_address).to.match(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    expect(shown.taproot_address).to.match(/^bc1p[02-9ac-hj-np-z]{58}$/);
    expect(shown.ed25519_public_key).to.match(/^0x[0-9a-f]{64}$/);
    expect(shown.schnorr_public_key).to.match(/^0x[0-9a-f]{64}$/);
    const listed = await sigil(["pkps", "list"]);
    expect(listed.code).to.equal(0);
    expect(listed.stdout.split("\n")[0]).to.match(/pkp id +address +solana address +taproot address +name/);
    const row = listed.stdout.split("\n").find((l) => l.startsWith(pkp));
    expect(row).to.contain(String(shown.solana_address)).and.contain(String(shown.taproot_address));
  });

  it("keys remove by id revokes the key: it gets 401 next", async () => {
    await ok(["keys", "remove", usageKeyId]);
    const r = await sigil(["billing", "balance"], usageKey);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^error 401 \w+: /m);
  });

  it("keys list leaves the revoked key out; keys list --all shows it as revoked", async () => {
    const plain = await sigil(["keys", "list"]);
    expect(plain.stdout).to.not.contain(usageKeyId);
    const all = await sigil(["keys", "list", "--all"]);
    expect(all.code, all.stderr).to.equal(0);
    const row = all.stdout.split("\n").find((l) => l.startsWith(usageKeyId));
    expect(row, all.stdout).to.match(/ revoked$/);
    expect(all.stdout.split("\n")[0]).to.match(/ state$/);
  });

  it("keys list --all shows an expired key as expired", async () => {
    const expiration = Math.floor(Date.now() / 1000) + 2;
    const k = await ok(["keys", "add", "--name", "short-lived", "--expiration", String(expiration)]);
    // The service calls a key expired from the second of its expiration on (its clock is this machine's).
    await eventually(() => Date.now() >= expiration * 1000, { what: "the key's expiration to pass" });
    const all = (await ok(["keys", "list", "--all"])) as { items: { id: string; state: string }[] };
    expect(all.items.find((i) => i.id === k.id)?.state).to.equal("expired");
  });

  it("groups delete removes the group", async () => {
    await ok(["groups", "delete", group]);
    expect((await ok(["groups", "list"])).items).to.deep.equal([]);
  });

  it("billing history lists the sign-up credit and the charges, newest first", async () => {
    const h = (await ok(["billing", "history", "--page-size", "100"])) as {
      items: { type: string; operation: string }[];
    };
    expect(h.items[h.items.length - 1]).to.include({ type: "credit", operation: "signup_credit" });
    expect(h.items.filter((i) => i.type === "debit").length).to.be.greaterThan(5);
  });

  it("config shows one aligned row per service setting, nested ones included, and never the key", async () => {
    const r = await sigil(["config"]);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.match(/^api key +set \(from SIGIL_API_KEY\)$/m);
    expect(r.stdout).to.match(/^prices write cents +1$/m);
    expect(r.stdout).to.match(/^limits max page size +100$/m);
    expect(r.stdout).to.match(/^chains 1 +chain id 31337, name \S+, confirmations \d+$/m);
    expect(r.stdout).not.to.contain("{");
    expect(r.stdout).not.to.contain(accountKey);
  });

  it("billing history shows each entry's time as a UTC date and time, not unix seconds", async () => {
    const r = await sigil(["billing", "history", "--page-size", "100"]);
    expect(r.code).to.equal(0);
    const rows = r.stdout.trim().split("\n").slice(1);
    expect(rows.length).to.be.greaterThan(5);
    for (const row of rows) expect(row).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ  (credit|debit) /);
    const year = new Date().getUTCFullYear();
    expect(rows[rows.length - 1]).to.match(new RegExp(`^${year}-.*\\bsignup_credit\\b`));
  });
});
