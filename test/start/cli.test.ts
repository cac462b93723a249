/**
 * The CLI's own contract, without a server: usage errors exit 1, an unreachable service exits 3, and
 * an API key is never printed back. (Exit 2, an API error, is exercised against the real service in
 * newcomer.test.ts.)
 */
import { expect } from "chai";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
const BIN = path.join(ROOT, "bin", "sigil.js");

function sigil(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, SIGIL_URL: "", SIGIL_API_KEY: "", ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A port with nothing listening: bound, then released. */
async function deadPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

describe("start: CLI without a server", function () {
  this.timeout(60_000);
  const usageKey = "uk_" + "ab".repeat(32);

  it("prints help listing every command group and exits 0", () => {
    const r = sigil(["--help"]);
    expect(r.code).to.equal(0);
    for (const c of ["account", "keys", "pkps", "groups", "actions", "run", "billing", "config"])
      expect(r.stdout).to.match(new RegExp(`^  ${c}\\b`, "m"));
  });

  it("--version prints package.json's version and exits 0", () => {
    const r = sigil(["--version"]);
    expect(r.code).to.equal(0);
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string };
    expect(r.stdout).to.equal(`${pkg.version}\n`);
  });

  it("exits 1 on an unknown command", () => {
    const r = sigil(["frobnicate"]);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.contain("unknown command 'frobnicate'");
  });

  it("exits 1 when a required option is missing", () => {
    const r = sigil(["keys", "add"]);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.contain("required option '--name <name>' not specified");
  });

  it("exits 1 when a command needs a key and none is given, saying how to give one", () => {
    const r = sigil(["pkps", "list"]);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.equal(
      "error: This command needs an API key: pass --api-key or set SIGIL_API_KEY (see `sigil account create`).\n",
    );
  });

  it("exits 1 on the README's ak_... placeholder used as the key, before contacting anything", () => {
    const r = sigil(["pkps", "list"], { SIGIL_API_KEY: "ak_...", SIGIL_URL: "http://127.0.0.1:9" });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.equal(
      "error: The API key (--api-key or SIGIL_API_KEY) is incomplete: an account key is ak_ followed by 64 hex digits, " +
        "this one has other characters after ak_ (a placeholder such as ak_... or a stray quote?). " +
        "Copy the whole key from where it was printed.\n",
    );
  });

  it("exits 1 on a usage key cut short, counting its digits and never echoing them", () => {
    const cut = usageKey.slice(0, -1);
    const r = sigil(["pkps", "list", "--api-key", cut], { SIGIL_URL: "http://127.0.0.1:9" });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.contain(
      "a usage key is uk_ followed by 64 hex digits, this one has 63 hex digits after uk_.",
    );
    expect(r.stderr).not.to.contain(cut.slice(3));
  });

  it("exits 1 on invalid --params JSON before contacting anything", () => {
    const r = sigil(["run", "--cid", "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o", "--params", "{nope"], {
      SIGIL_API_KEY: usageKey,
    });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^error: --params must be JSON/);
  });

  it("exits 1 on a bad group id", () => {
    const r = sigil(["keys", "add", "--name", "x", "--execute", "one"], { SIGIL_API_KEY: usageKey });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.equal(
      'error: --execute: "one" is not a group id (a number, or all for every group).\n',
    );
  });

  it("exits 1 on --execute 0: every group must be asked for by name, never by a stray 0", () => {
    const r = sigil(["keys", "add", "--name", "x", "--execute", "0"], { SIGIL_API_KEY: usageKey });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.equal(
      "error: --execute: 0 would mean every group; ask for that by name (--execute all, or --execute '*'), or give a group id.\n",
    );
  });

  it("exits 1 when a key reference is an account key, not a usage key", () => {
    const r = sigil(["keys", "remove", "ak_" + "12".repeat(32)], { SIGIL_API_KEY: usageKey });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.contain("That is an account key");
    expect(r.stderr).not.to.contain("12".repeat(32));
  });

  it("exits 1 when the action file cannot be read", () => {
    const missing = path.join(os.tmpdir(), "sigil-no-such-action.js");
    const r = sigil(["actions", "pin", missing], { SIGIL_API_KEY: usageKey });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.equal(`error: Cannot read ${missing}: ENOENT.\n`);
  });

  it("exits 3 when the service is unreachable, naming the URL and never the key", async () => {
    const url = `http://127.0.0.1:${await deadPort()}`;
    const r = sigil(["billing", "balance"], { SIGIL_URL: url, SIGIL_API_KEY: usageKey });
    expect(r.code).to.equal(3);
    expect(r.stderr).to.match(
      new RegExp(`^error: Cannot reach Sigil at ${url.replace(/\./g, "\\.")} \\(ECONNREFUSED\\)`),
    );
    expect(r.stdout + r.stderr).not.to.contain(usageKey);
  });

  it("takes --url over SIGIL_URL", async () => {
    const url = `http://127.0.0.1:${await deadPort()}`;
    const r = sigil(["--url", url, "config"], { SIGIL_URL: "http://127.0.0.1:1" });
    expect(r.code).to.equal(3);
    expect(r.stderr).to.contain(`Cannot reach Sigil at ${url}`);
  });

  it("never runs stale code from its transpile cache: an edited source is what runs next", () => {
    const copy = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-cli-copy-"));
    try {
      fs.cpSync(path.join(ROOT, "bin"), path.join(copy, "bin"), { recursive: true });
      fs.cpSync(path.join(ROOT, "cli"), path.join(copy, "cli"), { recursive: true });
      fs.cpSync(path.join(ROOT, "sdk"), path.join(copy, "sdk"), { recursive: true }); // the CLI's client
      fs.cpSync(path.join(ROOT, "vocabulary"), path.join(copy, "vocabulary"), { recursive: true }); // scope names
      fs.copyFileSync(path.join(ROOT, "package.json"), path.join(copy, "package.json")); // --version
      fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(copy, "node_modules"), "dir");
      const help = () =>
        spawnSync(process.execPath, [path.join(copy, "bin", "sigil.js"), "--help"], { encoding: "utf8" })
          .stdout;
      expect(help()).to.contain("Command-line client of Sigil");
      expect(help()).to.contain("Command-line client of Sigil"); // now from the cache
      const index = path.join(copy, "cli", "index.ts");
      fs.writeFileSync(
        index,
        fs.readFileSync(index, "utf8").replace("Command-line client of Sigil", "Edited client of Sigil"),
      );
      expect(help()).to.contain("Edited client of Sigil");
    } finally {
      fs.rmSync(copy, { recursive: true, force: true });
    }
  });

  it("is what package.json's bin points to", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
      bin: Record<string, string>;
    };
    expect(pkg.bin.sigil).to.equal("bin/sigil.js");
  });
});
