/**
 * ES module imports (docs/actions.md, "ES module imports"): real SES workers, a local HTTP server as
 * the module origin (loopback allowed in this configuration only), a real module store on disk.
 */
import { expect } from "chai";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import { ActionExecutor, type ModuleOptions } from "../../enclave/executor";
import { makeKeys, makeRunner, type Runner, expectOk as ok } from "./helpers";

const HELPER = `export const double = (x) => x * 2;
export let counter = 0;
export function bump() { counter += 1; }
`;
const TINY = `import { double, bump } from "/npm/helper@2.0.0/+esm";
export const name = "tiny";
export function triple(x) { return x * 3; }
export default function quad(x) { return x * 4; }
export { double as twice };
export * from "/npm/helper@2.0.0/+esm";
bump();
`;
const LEAKY = `export const env = typeof process !== "undefined" ? process.env : "no process";
export function host() { return process; }
export function seesLit() { return typeof Lit.Actions.signEcdsa; }
`;

function sri(text: string): string {
  return "sha384-" + createHash("sha384").update(text).digest("base64");
}

/** The module origin: serves `modules` under /npm/, counts requests per path. */
class ModuleServer {
  readonly modules = new Map<string, string>([
    ["/npm/helper@2.0.0/+esm", HELPER],
    ["/npm/tiny@1.0.0/+esm", TINY],
    ["/npm/tiny@1.0.0/extra.js", `export const extra = "file";`],
    ["/npm/leaky@1.0.0/+esm", LEAKY],
    ["/npm/tofu@1.0.0/+esm", `export const v = 1;`],
    ["/npm/big@1.0.0/+esm", `export const s = "${"x".repeat(8000)}";`],
    ["/npm/spin@1.0.0/+esm", `export const x = 1;\nfor (;;) {}`],
    ["/npm/dyn@1.0.0/+esm", `export const load = () => import("/npm/tiny@1.0.0/+esm");`],
    ["/npm/many@1.0.0/+esm", [1, 2, 3, 4, 5, 6].map((i) => `import "/npm/m${i}@1.0.0/+esm";`).join("\n")],
    ...[1, 2, 3, 4, 5, 6].map((i) => [`/npm/m${i}@1.0.0/+esm`, `export const i = ${i};`] as [string, string]),
  ]);
  readonly requests: string[] = [];
  private server!: http.Server;
  origin = "";

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const url = req.url ?? "";
      this.requests.push(url);
      if (url === "/npm/moved@1.0.0/+esm") {
        res.writeHead(302, { location: "/npm/tiny@1.0.0/+esm" }).end();
        return;
      }
      if (url === "/npm/slow@1.0.0/+esm") return; // never answers
      const body = this.modules.get(url);
      if (body === undefined) res.writeHead(404).end("not found");
      else res.writeHead(200, { "content-type": "application/javascript" }).end(body);
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/npm/`;
  }

  requestsFor(p: string): number {
    return this.requests.filter((r) => r === p).length;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

describe("executor: ES module imports", function () {
  this.timeout(30_000);
  const keys = makeKeys();
  const server = new ModuleServer();
  let storeDir: string;
  const executors: ActionExecutor[] = [];

  async function executorWith(modules: Partial<ModuleOptions> = {}): Promise<Runner> {
    const executor = new ActionExecutor({
      keys,
      poolSize: 1,
      modules: { origin: server.origin, allowAddresses: ["127.0.0.1"], storeDir, ...modules },
    });
    executors.push(executor);
    await executor.ready();
    return makeRunner(executor, keys);
  }

  let run: Runner;

  before(async function () {
    await server.start();
    storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-modules-"));
    run = await executorWith({ maxModuleBytes: 4096, maxModules: 5, timeoutMs: 1500 });
  });

  after(async function () {
    await Promise.all(executors.map((e) => e.close()));
    await server.stop();
    fs.rmSync(storeDir, { recursive: true, force: true });
  });

  describe("resolution and evaluation", function () {
    it("runs a pinned import: named, default, namespace and re-exported bindings", async function () {
      const r = ok(
        await run(`import quad, { triple, twice, name } from "tiny@1.0.0";
import * as helper from "helper@2.0.0";
return [name, triple(2), quad(2), twice(2), helper.double(5), typeof helper.bump];`),
      );
      expect(r).to.deep.equal(["tiny", 6, 8, 4, 10, "function"]);
    });

    it("keeps exported bindings live (the module's own updates are seen)", async function () {
      const r = ok(
        await run(
          `import * as t from "tiny@1.0.0"; const before = t.counter; t.bump(); return [before, t.counter];`,
        ),
      );
      expect(r).to.deep.equal([1, 2]);
    });

    it("imports by full URL under the origin and by file path in a package", async function () {
      const r = ok(
        await run(`import { name } from "${server.origin}tiny@1.0.0/+esm";
import { extra } from "tiny@1.0.0/extra.js";
return [name, extra];`),
      );
      expect(r).to.deep.equal(["tiny", "file"]);
    });

    it("works with main(params) and the action's other globals", async function () {
      const r = await run(
        `import { triple } from "tiny@1.0.0";\nasync function main({ n }) { return { n: triple(n), v5: typeof ethers.utils.keccak256 }; }`,
        { jsParams: { n: 7 } },
      );
      expect(ok(r)).to.deep.equal({ n: 21, v5: "function" });
    });

    it("gives modules the run's globals and nothing of the host's", async function () {
      const r = ok(
        await run(`import { env, host, seesLit } from "leaky@1.0.0";
return [env, host() === undefined, seesLit()];`),
      );
      expect(r).to.deep.equal(["no process", true, "function"]);
    });

    it("freezes namespaces: an action cannot replace or add a module's exports", async function () {
      const r = ok(
        await run(`import * as t from "tiny@1.0.0";
const tries = [() => { t.triple = () => 0; }, () => { t.extra = 1; }, () => { delete t.name; }];
return tries.map((f) => { try { f(); return "changed"; } catch (e) { return e.name; } }).concat([t.triple(1), Object.isFrozen(t)]);`),
      );
      expect(r).to.deep.equal(["TypeError", "TypeError", "TypeError", 3, true]);
    });

    it("refuses a module containing import( with syntax_error, as SES does", async function () {
      const r = await run(`import { load } from "dyn@1.0.0"; return 1;`);
      expect(r.error).to.deep.equal({
        code: "syntax_error",
        message: "`import(` is not allowed anywhere in action source, even in a string or comment",
      });
    });

    it("answers showImportDetails() with each module's URL, SHA-384 and size", async function () {
      const r = ok(await run(`import { triple } from "tiny@1.0.0"; return Lit.Actions.showImportDetails();`));
      expect(r).to.deep.equal([
        { url: `${server.origin}helper@2.0.0/+esm`, hash: sri(HELPER), size: Buffer.byteLength(HELPER) },
        { url: `${server.origin}tiny@1.0.0/+esm`, hash: sri(TINY), size: Buffer.byteLength(TINY) },
      ]);
    });
  });

  describe("specifiers", function () {
    const cases: Array<[string, string, string]> = [
      [
        "a range",
        "tiny@^1.0.0",
        `import "tiny@^1.0.0": "^1.0.0" is not an exact version; pin one such as 1.2.3 (ranges and tags are refused)`,
      ],
      [
        "a tag",
        "tiny@latest",
        `import "tiny@latest": "latest" is not an exact version; pin one such as 1.2.3 (ranges and tags are refused)`,
      ],
      ["a bare name", "tiny", `import "tiny": a version is required; write tiny@x.y.z (an exact version)`],
    ];
    for (const [what, spec, message] of cases) {
      it(`refuses ${what} with import_not_pinned`, async function () {
        const r = await run(`import { name } from "${spec}"; return name;`);
        expect(r.error).to.deep.equal({ code: "import_not_pinned", message });
      });
    }

    it("refuses a relative path in an action with import_invalid", async function () {
      const r = await run(`import { x } from "./x.js"; return x;`);
      expect(r.error).to.deep.equal({
        code: "import_invalid",
        message: `import "./x.js": an action imports packages as pkg@x.y.z or by full URL, not by path`,
      });
    });

    it("refuses a URL outside the module origin with import_invalid", async function () {
      const r = await run(`import { x } from "https://example.com/npm/x@1.0.0/+esm"; return x;`);
      expect(r.error).to.deep.equal({
        code: "import_invalid",
        message: `import "https://example.com/npm/x@1.0.0/+esm": only modules under the module origin ${server.origin} may be imported`,
      });
    });

    it("refuses a path that climbs out of the origin with import_invalid", async function () {
      const r = await run(`import { x } from "tiny@1.0.0/../../../etc/x.js"; return x;`);
      expect(r.error?.code).to.equal("import_invalid");
    });
  });

  describe("integrity", function () {
    it("runs when the inline #sha384 matches", async function () {
      const r = ok(await run(`import { name } from "tiny@1.0.0#${sri(TINY)}"; return name;`));
      expect(r).to.equal("tiny");
    });

    it("refuses an inline #sha384 that does not match with import_integrity_mismatch", async function () {
      const wrong = sri("something else");
      const r = await run(`import { name } from "tiny@1.0.0#${wrong}"; return name;`);
      expect(r.error).to.deep.equal({
        code: "import_integrity_mismatch",
        message: `${server.origin}tiny@1.0.0/+esm: the import asks for ${wrong}, but the module has ${sri(TINY)}`,
      });
    });

    it("refuses a module whose hash differs from the operator's lock", async function () {
      const url = `${server.origin}m1@1.0.0/+esm`;
      const locked = await executorWith({ storeDir: null, lock: { [url]: sri("other") } });
      const r = await locked(`import { i } from "m1@1.0.0"; return i;`);
      expect(r.error).to.deep.equal({
        code: "import_integrity_mismatch",
        message: `${url}: the bytes fetched have ${sri("export const i = 1;")}, but the integrity lock says ${sri("other")}`,
      });
    });

    it("records the first fetch (trust on first use) and refuses changed bytes later", async function () {
      const url = `${server.origin}tofu@1.0.0/+esm`;
      const original = server.modules.get("/npm/tofu@1.0.0/+esm")!;
      expect(ok(await run(`import { v } from "tofu@1.0.0"; return v;`))).to.equal(1);
      // The bytes are dropped from the store (disk freed), the origin now serves other bytes.
      for (const f of fs.readdirSync(storeDir)) if (f.endsWith(".module")) fs.rmSync(path.join(storeDir, f));
      server.modules.set("/npm/tofu@1.0.0/+esm", `export const v = 2;`);
      const restarted = await executorWith();
      const r = await restarted(`import { v } from "tofu@1.0.0"; return v;`);
      server.modules.set("/npm/tofu@1.0.0/+esm", original);
      expect(r.error).to.deep.equal({
        code: "import_integrity_mismatch",
        message: `${url}: the bytes fetched have ${sri("export const v = 2;")}, but the hash recorded when it was first fetched is ${sri(original)}`,
      });
    });
  });

  describe("the content store", function () {
    it("makes no request on a second run of the same imports", async function () {
      ok(await run(`import { i } from "m2@1.0.0"; return i;`));
      const before = server.requests.length;
      expect(ok(await run(`import { i } from "m2@1.0.0"; return i + 1;`))).to.equal(3);
      expect(server.requests.length).to.equal(before);
    });

    it("makes no request after a restart: the modules are read from the store", async function () {
      ok(await run(`import { i } from "m3@1.0.0"; return i;`));
      const before = server.requests.length;
      const restarted = await executorWith();
      expect(ok(await restarted(`import { i } from "m3@1.0.0"; return i;`))).to.equal(3);
      expect(server.requests.length).to.equal(before);
    });
  });

  describe("limits and refusals", function () {
    it("refuses a redirect with import_redirect_refused", async function () {
      const r = await run(`import { name } from "moved@1.0.0"; return name;`);
      expect(r.error).to.deep.equal({
        code: "import_redirect_refused",
        message: `${server.origin}moved@1.0.0/+esm answered a redirect (HTTP 302); module imports never follow redirects`,
      });
    });

    it("refuses a module over maxModuleBytes with import_too_large", async function () {
      const r = await run(`import { s } from "big@1.0.0"; return s.length;`);
      expect(r.error).to.deep.equal({
        code: "import_too_large",
        message: `${server.origin}big@1.0.0/+esm is over the module size limit of 4096 bytes`,
      });
    });

    it("refuses more than maxModules modules with import_limit", async function () {
      const r = await run(`import "many@1.0.0"; return 1;`);
      expect(r.error).to.deep.equal({
        code: "import_limit",
        message: "the action imports more than 5 modules",
      });
    });

    it("refuses a module that does not arrive in time with import_timeout", async function () {
      const r = await run(`import { x } from "slow@1.0.0"; return x;`);
      expect(r.error).to.deep.equal({
        code: "import_timeout",
        message: `loading ${server.origin}slow@1.0.0/+esm took longer than the 1500 ms import limit`,
      });
    });

    it("ends a run whose module never finishes its top-level code with timeout; the pool recovers", async function () {
      const r = await run(`import { x } from "spin@1.0.0"; return x;`, { limits: { wallTimeMs: 500 } });
      expect(r.error).to.deep.equal({ code: "timeout", message: "the run exceeded 500 ms of wall time" });
      expect(ok(await run(`import { triple } from "tiny@1.0.0"; return triple(3);`))).to.equal(9);
    });

    it("refuses an HTTP error of the origin with import_fetch_failed", async function () {
      const r = await run(`import { x } from "absent@1.0.0"; return x;`);
      expect(r.error).to.deep.equal({
        code: "import_fetch_failed",
        message: `${server.origin}absent@1.0.0/+esm answered HTTP 404`,
      });
    });

    it("refuses a loopback origin the operator did not allow with import_address_refused", async function () {
      const guarded = await executorWith({ allowAddresses: [], storeDir: null });
      const r = await guarded(`import { i } from "m4@1.0.0"; return i;`);
      expect(r.error?.code).to.equal("import_address_refused");
    });

    it("refuses imports when the operator disabled them with imports_disabled", async function () {
      const executor = new ActionExecutor({ keys, poolSize: 1, modules: false });
      executors.push(executor);
      await executor.ready();
      const r = await makeRunner(executor, keys)(`import { i } from "m4@1.0.0"; return i;`);
      expect(r.error).to.deep.equal({
        code: "imports_disabled",
        message: "ES module imports are disabled on this service",
      });
    });
  });
});
