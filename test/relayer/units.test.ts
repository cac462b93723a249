/** Pure parts of the relayer: validation, rate limits, idempotency store, revert decoding, docs consistency. */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { Enclave } from "../../enclave";
import { ROUTES } from "../../relayer/app";
import { registryInterface } from "../../relayer/chain/abi";
import { mapRevert } from "../../relayer/chain/registryErrors";
import { ERROR_CATALOGUE } from "../../relayer/errorCatalogue";
import { BILLING_ERROR_CATALOGUE } from "../../relayer/billing/errorCatalogue";
import { ApiError } from "../../relayer/errors";
import { parseAddress, parseGroupId, parsePage, parsePkpId } from "../../relayer/http/validate";
import { compileBody } from "../../relayer/routes/bodySchema";
import * as s from "../../relayer/routes/schemas";
import { openDataLayer } from "../../relayer/db";
import { fingerprint, IdempotencyStore } from "../../relayer/idempotency";
import { buildOpenApi } from "../../relayer/openapi";
import { ConcurrencyCap, TokenBuckets } from "../../relayer/rateLimit";

const ME = "0x1111111111111111111111111111111111111111";

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return `${e.status} ${e.code}`;
    throw e;
  }
  return "no error";
}

describe("relayer units", () => {
  describe("validation", () => {
    it("names the field and the received value in the message", () => {
      try {
        compileBody(s.keyCreate)({ execute_in_groups: [1, "x"] }, null);
        expect.fail("accepted");
      } catch (e) {
        expect((e as ApiError).message).to.equal(
          '`execute_in_groups[1]` must be a group id: an integer >= 0 (0 = every group) (got "x").',
        );
      }
    });
    it("never echoes a key in a message", () => {
      const key = "uk_" + "a".repeat(64);
      const msg = (() => {
        try {
          compileBody(s.obj({ name: s.flag() }))({ name: key }, null);
        } catch (e) {
          return (e as ApiError).message;
        }
      })();
      expect(msg).to.not.contain(key);
    });
    it("refuses unknown fields", () => {
      const read = compileBody(s.obj({ name: s.text(10) }));
      expect(code(() => read({ name: "x", nmae: "y" }, null))).to.equal("400 unknown_field");
    });
    it("group ids: 0 only where the wildcard is allowed", () => {
      expect(parseGroupId(0, "g", true)).to.equal(0);
      expect(code(() => parseGroupId(0, "g"))).to.equal("400 invalid_group_id");
      expect(code(() => parseGroupId(2 ** 60, "g"))).to.equal("400 invalid_group_id");
    });
    it("PKP ids are canonical lower case; zero is refused", () => {
      expect(parsePkpId("0x" + "AB".repeat(32), "p")).to.equal("0x" + "ab".repeat(32));
      expect(code(() => parsePkpId("0x" + "0".repeat(64), "p"))).to.equal("400 invalid_pkp_id");
    });
    it("addresses: checksummed output, wrong checksum refused", () => {
      expect(parseAddress("0x000000000000000000000000000000000000dead", "a")).to.equal(
        "0x000000000000000000000000000000000000dEaD",
      );
      expect(code(() => parseAddress("0x000000000000000000000000000000000000DEad", "a"))).to.equal(
        "400 invalid_address",
      );
    });
    it("pages: bounds", () => {
      expect(parsePage({}, 100)).to.deep.equal({ pageNumber: 0, pageSize: 20 });
      expect(code(() => parsePage({ page_size: "101" }, 100))).to.equal("400 invalid_pagination");
    });
  });

  describe("rate limits", () => {
    it("a bucket refuses the request over capacity with Retry-After, and refills", () => {
      let now = 0;
      const b = new TokenBuckets(2, 60_000, () => now);
      b.take("k", "key k");
      b.take("k", "key k");
      try {
        b.take("k", "key k");
        expect.fail("accepted");
      } catch (e) {
        expect((e as ApiError).code).to.equal("rate_limited");
        expect((e as ApiError).retryAfter).to.equal(30);
      }
      now = 30_000;
      b.take("k", "key k");
    });
    it("buckets are independent per key", () => {
      const b = new TokenBuckets(1, 60_000, () => 0);
      b.take("a", "a");
      b.take("b", "b");
    });
    it("the concurrency cap releases once per entry", () => {
      const c = new ConcurrencyCap(1);
      const release = c.enter("1");
      expect(code(() => c.enter("1"))).to.equal("429 too_many_concurrent_executions");
      release();
      release();
      c.enter("1");
      expect(code(() => c.enter("1"))).to.equal("429 too_many_concurrent_executions");
    });
  });

  describe("idempotency store", () => {
    let dir: string;
    beforeEach(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-idem-"));
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    it("expires records after 24 h", async () => {
      let now = 0;
      const db = await openDataLayer({ sqlitePath: path.join(dir, "relayer.sqlite") });
      const store = new IdempotencyStore(db, Enclave.fromRootKey("11".repeat(32)), () => now);
      let runs = 0;
      const fn = async () => ({ status: 200, body: { n: ++runs } });
      const opts = { sealContext: "c" };
      await store.run("s", "k", "f", fn, opts);
      expect((await store.run("s", "k", "f", fn, opts)).replayed).to.equal(true);
      now = 24 * 3600 * 1000 + 1;
      expect(await store.prune()).to.equal(1);
      expect((await store.run("s", "k", "f", fn, opts)).body).to.deep.equal({ n: 2 });
      await db.close();
    });
    it("a claim left in the embedded file by a request that never answered is released on restart", async () => {
      const db = await openDataLayer({ sqlitePath: path.join(dir, "relayer.sqlite") });
      // What a crash in the middle of a request leaves: the claim, no answer.
      db.sqlite!.prepare(
        "INSERT INTO idempotency (scope, key, fingerprint, status, body, created_ms) VALUES ('s', 'k', 'f', 0, '', ?)",
      ).run(Date.now());
      const store = new IdempotencyStore(db, Enclave.fromRootKey("11".repeat(32)));
      await store.recoverAfterRestart();
      const r = await store.run("s", "k", "f", async () => ({ status: 201, body: { ran: true } }), {
        sealContext: "c",
      });
      expect(r).to.deep.equal({ status: 201, body: { ran: true }, replayed: false });
      await db.close();
    });
    it("fingerprints ignore key order but not values", () => {
      expect(fingerprint("POST", "/p", { a: 1, b: [1, { c: 2, d: 3 }] })).to.equal(
        fingerprint("POST", "/p", { b: [1, { d: 3, c: 2 }], a: 1 }),
      );
      expect(fingerprint("POST", "/p", { a: 1 })).to.not.equal(fingerprint("POST", "/p", { a: 2 }));
      expect(fingerprint("POST", "/p", { a: 1 })).to.not.equal(fingerprint("POST", "/q", { a: 1 }));
    });
  });

  describe("registry revert decoding", () => {
    const enc = (name: string, args: unknown[]) => registryInterface.encodeErrorResult(name, args);
    it("MissingScope → 403 missing_scope naming scope and group", () => {
      const e = mapRevert(enc("MissingScope", [ME, 1, 5, 7]), { principal: ME, kind: "usage" });
      expect([e.status, e.code, e.details]).to.deep.equal([
        403,
        "missing_scope",
        { scope: "group:addPkp", group_id: 7 },
      ]);
    });
    it("NotOwner → 403 owner_only for a usage key, 409 account_chain_secured for the account key", () => {
      expect(mapRevert(enc("NotOwner", [ME, 1]), { principal: ME, kind: "usage" }).code).to.equal(
        "owner_only",
      );
      expect(mapRevert(enc("NotOwner", [ME, 1]), { principal: ME, kind: "account" }).code).to.equal(
        "account_chain_secured",
      );
    });
    it("UnknownGroup → 404 group_not_found; KeyExpired of the caller → 401 api_key_expired", () => {
      expect(mapRevert(enc("UnknownGroup", [1, 9]), { principal: ME, kind: "usage" }).code).to.equal(
        "group_not_found",
      );
      expect(mapRevert(enc("KeyExpired", [ME, 5]), { principal: ME, kind: "usage" }).code).to.equal(
        "api_key_expired",
      );
    });
    it("every registry error maps to a catalogued code", () => {
      registryInterface.forEachError((f) => {
        const args = f.inputs.map((i) =>
          i.type === "address"
            ? ME
            : i.type === "string"
              ? "x"
              : i.type === "bytes32"
                ? "0x" + "1".repeat(64)
                : 1,
        );
        const e = mapRevert(registryInterface.encodeErrorResult(f, args), { principal: ME, kind: "usage" });
        expect(ERROR_CATALOGUE, f.name).to.have.property(e.code);
      });
    });
  });

  describe("documentation", () => {
    it("docs/errors.md lists every catalogued code with its status", () => {
      const md = fs.readFileSync(path.join(__dirname, "..", "..", "docs", "errors.md"), "utf8");
      for (const [c, e] of Object.entries(ERROR_CATALOGUE))
        expect(md, c).to.match(new RegExp(`\\| \`${c}\` +\\| ${e.status} +\\|`));
    });
    it("every code the relayer throws is catalogued (billing's codes in billing's catalogue)", () => {
      const catalogue = { ...ERROR_CATALOGUE, ...BILLING_ERROR_CATALOGUE };
      const root = path.join(__dirname, "..", "..", "relayer");
      const files = fs
        .readdirSync(root, { recursive: true })
        .map(String)
        .filter((f) => f.endsWith(".ts") && !f.startsWith("billing"));
      let found = 0;
      for (const f of files) {
        const src = fs.readFileSync(path.join(root, f), "utf8");
        for (const m of src.matchAll(/new ApiError\(\s*"([a-z_]+)"/g)) {
          found++;
          expect(catalogue, `${f}: ${m[1]}`).to.have.property(m[1]);
        }
      }
      expect(found).to.be.greaterThan(100);
    });
    it("no throw site writes a status: ApiError takes it from the catalogue", () => {
      // The type already refuses a status before the code (the first argument is a code); this catches a
      // cast or an `any` that would slip a status literal back in, anywhere in the repository.
      const repo = path.join(__dirname, "..", "..");
      for (const dir of ["relayer", "scripts", "cli", "sdk", "bench", "test"]) {
        const files = fs
          .readdirSync(path.join(repo, dir), { recursive: true })
          .map(String)
          .filter((f) => f.endsWith(".ts") && !f.includes("node_modules"));
        for (const f of files) {
          const src = fs.readFileSync(path.join(repo, dir, f), "utf8");
          expect(src, `${dir}/${f}`).to.not.match(/new ApiError\(\s*\d/);
        }
      }
      expect(new ApiError("missing_scope", "m").status).to.equal(ERROR_CATALOGUE.missing_scope.status);
    });
    it("the OpenAPI document describes every route", () => {
      const doc = buildOpenApi({ chainId: 1, cfg: { registryAddress: ME, forwarderAddress: ME } as never });
      for (const [method, route] of ROUTES) {
        const p = route.replace(/:([a-z_]+)/g, "{$1}");
        expect(doc.paths, `${method} ${route}`).to.have.property(p);
        expect(
          (doc.paths as Record<string, Record<string, unknown>>)[p],
          `${method} ${route}`,
        ).to.have.property(method.toLowerCase());
      }
    });
  });
});
