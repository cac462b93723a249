/**
 * ES module imports through the HTTP API on a real stack (anvil, contracts, relayer, SES workers): an
 * execute-only key runs a pinned action that imports a real npm package (uuid 8.3.2's browser ESM
 * files from node_modules, served by a local HTTP server standing in for the CDN; loopback is allowed
 * for modules in this test's configuration only).
 */
import { expect } from "chai";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import { startStack, type Stack } from "../helpers/stack";

const UUID_DIR = path.join(__dirname, "..", "..", "node_modules", "uuid", "dist", "esm-browser");
const UUID_VERSION: string = JSON.parse(
  fs.readFileSync(path.join(__dirname, "..", "..", "node_modules", "uuid", "package.json"), "utf8"),
).version;
const ENTRY = `uuid@${UUID_VERSION}/dist/esm-browser/index.js`;

const ACTION = `import { v4, validate, version } from "${ENTRY}";
async function main() {
  const id = v4();
  return { id, valid: validate(id), version: version(id), imports: Lit.Actions.showImportDetails().length };
}`;

const UNPINNED = `import { v4 } from "uuid"; return v4();`;

describe("executor: ES module imports over HTTP (svc_action)", function () {
  this.timeout(120_000);
  let s: Stack;
  let server: http.Server;
  const requests: string[] = [];
  let usageKey: string;
  let accountKey: string;
  let cid: string;
  let unpinnedCid: string;

  before(async function () {
    server = http.createServer((req, res) => {
      requests.push(req.url ?? "");
      const prefix = `/npm/uuid@${UUID_VERSION}/dist/esm-browser/`;
      const file = (req.url ?? "").startsWith(prefix) ? (req.url ?? "").slice(prefix.length) : "";
      if (!/^[a-z0-9]+\.js$/.test(file) || !fs.existsSync(path.join(UUID_DIR, file))) {
        res.writeHead(404).end();
        return;
      }
      res
        .writeHead(200, { "content-type": "application/javascript" })
        .end(fs.readFileSync(path.join(UUID_DIR, file)));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}/npm/`;
    s = await startStack({
      executor: { poolSize: 1, modules: { origin, allowAddresses: ["127.0.0.1"] } },
    });
    const acct = await s.api("POST", "/core/v1/new_account", { body: { account_name: "imports" } });
    accountKey = acct.body.api_key;
    const pinned = await s.api("POST", "/core/v1/actions", { key: accountKey, body: { code: ACTION } });
    expect(pinned.status, JSON.stringify(pinned.body)).to.equal(201);
    cid = pinned.body.cid;
    const second = await s.api("POST", "/core/v1/actions", { key: accountKey, body: { code: UNPINNED } });
    unpinnedCid = second.body.cid;
    const group = await s.api("POST", "/core/v1/groups", {
      key: accountKey,
      body: { name: "imports", pkps: [], actions: [cid, unpinnedCid] },
    });
    expect(group.status, JSON.stringify(group.body)).to.equal(201);
    const key = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "execute only", execute_in_groups: [group.body.group_id] },
    });
    expect(key.status, JSON.stringify(key.body)).to.equal(201);
    usageKey = key.body.usage_api_key;
  });

  after(async function () {
    await s?.close();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });

  it("runs a pinned action that imports a real package, with an execute-only key", async function () {
    const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, js_params: {} } });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
    expect(r.body.response.valid).to.equal(true);
    expect(r.body.response.version).to.equal(4);
    expect(r.body.response.imports).to.be.greaterThan(1); // index.js and the files it imports
  });

  it("serves the second run from the module store: no request reaches the origin", async function () {
    const before = requests.length;
    const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid, js_params: {} } });
    expect(r.body.has_error, JSON.stringify(r.body)).to.equal(false);
    expect(requests.length).to.equal(before);
  });

  it("records each module's SHA-384 in the relayer's module store", async function () {
    const bytes = fs.readFileSync(path.join(UUID_DIR, "index.js"));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/npm/${ENTRY}`;
    const file = path.join(
      s.dataDir,
      "modules",
      createHash("sha256").update(url).digest("hex") + ".integrity",
    );
    expect(fs.readFileSync(file, "utf8")).to.equal(
      "sha384-" + createHash("sha384").update(bytes).digest("base64"),
    );
  });

  it("answers an unpinned import with has_error and import_not_pinned", async function () {
    const r = await s.api("POST", "/core/v1/svc_action", {
      key: usageKey,
      body: { cid: unpinnedCid, js_params: {} },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.has_error).to.equal(true);
    expect(r.body.error).to.deep.equal({
      code: "import_not_pinned",
      message: `import "uuid": a version is required; write uuid@x.y.z (an exact version)`,
    });
  });
});
