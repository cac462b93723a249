/**
 * The HTTP guard (relayer/http/guard.ts) in front of every route, sealed idempotent answers at rest, and
 * the public / operator views of GET /health. Each defect these tests pin was a 500 or a leak before.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { gzipSync } from "node:zlib";
import { expect } from "chai";
import { Enclave } from "../../enclave";
import { assertJsonDepth, MAX_JSON_DEPTH } from "../../relayer/http/guard";
import { canonical } from "../../relayer/idempotency";
import { OPERATOR_HEADERS, setupAccount, startStack, type ApiResponse, type Stack } from "../helpers/stack";

const SECRET = "correct-horse-battery-staple-7f3a9c";
/** Decrypts what it is given with the run's PKP: the plaintext exists only inside the run's answer. */
const DECRYPT_CODE =
  "async function main(p) { return { secret: await Actions.decrypt({ pkpId: p.pkp, ciphertext: p.ct }) }; }";

function expectError(r: ApiResponse, status: number, code: string) {
  expect(r.status, JSON.stringify(r.body)).to.equal(status);
  expect(r.body.error.code, JSON.stringify(r.body)).to.equal(code);
}

/** `depth` nested arrays around `inner`: "[[[inner]]]". */
function nested(depth: number, inner = "1"): string {
  return "[".repeat(depth) + inner + "]".repeat(depth);
}

describe("relayer: HTTP guard", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;

  before(async () => {
    s = await startStack();
    a = await setupAccount(s, DECRYPT_CODE);
  });
  after(async () => {
    await s?.close();
  });

  describe("JSON nesting depth", () => {
    it("new_account with an Idempotency-Key and 100,000 nested arrays: 400 json_too_deep", async () => {
      const r = await s.api("POST", "/core/v1/new_account", {
        rawBody: `{"account_name": ${nested(100_000)}}`,
        headers: { "content-type": "application/json", "idempotency-key": "deep-1" },
      });
      expectError(r, 400, "json_too_deep");
      expect(r.body.error.details).to.deep.equal({ max_depth: MAX_JSON_DEPTH });
    });
    it("svc_action with 100,000 nested arrays in js_params: 400 json_too_deep", async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", {
          key: a.accountKey,
          rawBody: `{"cid": "${a.cid}", "js_params": ${nested(100_000)}}`,
          headers: { "content-type": "application/json" },
        }),
        400,
        "json_too_deep",
      ));
    it("a DELETE carrying a deep body: 400 json_too_deep", async () =>
      expectError(
        await s.api("DELETE", `/core/v1/groups/${a.groupId}`, {
          key: a.accountKey,
          rawBody: nested(5_000),
          headers: { "content-type": "application/json" },
        }),
        400,
        "json_too_deep",
      ));
    it(`exactly ${MAX_JSON_DEPTH} levels (js_params at ${MAX_JSON_DEPTH - 1}) reach the route`, async () => {
      // The route answers (here: the action is refused its decrypt of a non-ciphertext), not the guard.
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        rawBody: `{"cid": "${a.cid}", "pkp_id": "${a.pkpId}", "js_params": ${nested(MAX_JSON_DEPTH - 1)}}`,
        headers: { "content-type": "application/json" },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    });
    it(`${MAX_JSON_DEPTH + 1} levels: 400 json_too_deep`, async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", {
          key: a.accountKey,
          rawBody: `{"cid": "${a.cid}", "pkp_id": "${a.pkpId}", "js_params": ${nested(MAX_JSON_DEPTH)}}`,
          headers: { "content-type": "application/json" },
        }),
        400,
        "json_too_deep",
      ));
    it("brackets inside strings (with escaped quotes) do not count", async () => {
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: a.accountKey,
        body: { cid: a.cid, pkp_id: a.pkpId, js_params: { s: '\\"' + "[{".repeat(20_000) } },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    });
  });

  describe("bodies, headers and query strings", () => {
    it("a gzip-compressed body: 415 unsupported_media_type", async () => {
      const r = await fetch(`${s.url}/core/v1/new_account`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-encoding": "gzip" },
        body: gzipSync(Buffer.from("{}")),
      });
      expect(r.status).to.equal(415);
      expect(((await r.json()) as { error: { code: string } }).error.code).to.equal("unsupported_media_type");
    });
    it("a body declared in another charset than UTF-8: 415 unsupported_media_type", async () =>
      expectError(
        await s.api("POST", "/core/v1/new_account", {
          rawBody: "{}",
          headers: { "content-type": "application/json; charset=latin1" },
        }),
        415,
        "unsupported_media_type",
      ));
    it("an Idempotency-Key of 10,000 characters on a GET: 400 invalid_idempotency_key", async () =>
      expectError(
        await s.api("GET", "/core/v1/pkps", {
          key: a.accountKey,
          headers: { "idempotency-key": "k".repeat(10_000) },
        }),
        400,
        "invalid_idempotency_key",
      ));
    it("an X-Correlation-Id of 4,000 bytes: 400 header_too_long naming the header", async () => {
      const r = await s.api("GET", "/core/v1/config", { headers: { "x-correlation-id": "c".repeat(4_000) } });
      expectError(r, 400, "header_too_long");
      expect(r.body.error.details).to.deep.equal({ header: "x-correlation-id", max: 1024 });
    });
    it("an X-Api-Key of 2,000 bytes: 400 header_too_long", async () =>
      expectError(
        await s.api("GET", "/core/v1/pkps", { key: "ak_" + "a".repeat(2_000) }),
        400,
        "header_too_long",
      ));
    it("a repeated query parameter: 400 invalid_query naming it", async () => {
      const r = await s.api("GET", "/core/v1/pkps?page_size=1&page_size=2", { key: a.accountKey });
      expectError(r, 400, "invalid_query");
      expect(r.body.error.details).to.deep.equal({ parameter: "page_size" });
    });
    it("a query string of 2,000 bytes: 400 invalid_query", async () =>
      expectError(
        await s.api("GET", `/core/v1/pkps?x=${"y".repeat(2_000)}`, { key: a.accountKey }),
        400,
        "invalid_query",
      ));
    it("a normal paged list still works", async () => {
      const r = await s.api("GET", "/core/v1/pkps?page_number=0&page_size=5", { key: a.accountKey });
      expect(r.status).to.equal(200);
      expect(r.body.page_size).to.equal(5);
    });
  });

  describe("strings the fuzzer broke", () => {
    // Found by test/relayer/fuzz.test.ts (SIGIL_FUZZ_SEED=684152565): ethers cannot UTF-8-encode an
    // unpaired surrogate, so the write failed with 500 after validation had passed.
    for (const [route, field] of [
      ["/core/v1/groups", "name"],
      ["/core/v1/pkps/create", "description"],
      ["/core/v1/new_account", "account_name"],
    ]) {
      it(`${route} with an unpaired surrogate in \`${field}\`: 400 invalid_request naming it`, async () => {
        const r = await s.api("POST", route, {
          key: a.accountKey,
          rawBody: `{"${field}": "a\\ud800b"}`,
          headers: { "content-type": "application/json", "idempotency-key": `surrogate-${field}` },
        });
        expectError(r, 400, "invalid_request");
        expect(r.body.error.details).to.deep.equal({ field });
      });
    }
    it("a well-formed astral character (a surrogate pair) is accepted", async () => {
      const r = await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: "key 😀" } });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      expect(r.body.name).to.equal("key 😀");
    });
  });

  describe("secrets at rest", () => {
    it("an action's decrypted secret kept under an Idempotency-Key is in neither the database nor its WAL, and the replay returns it", async () => {
      const body = {
        cid: a.cid,
        pkp_id: a.pkpId,
        js_params: { pkp: a.pkpId, ct: s.enclave.pkpEncrypt(a.pkpId, SECRET) },
      };
      const headers = { "idempotency-key": "secret-run-1" };
      const first = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body, headers });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.response).to.deep.equal({ secret: SECRET });

      const dir = s.relayerOptions.dataDir;
      const files = fs.readdirSync(dir).filter((f) => f.startsWith("relayer.sqlite"));
      expect(files).to.include("relayer.sqlite-wal");
      const all = Buffer.concat(files.map((f) => fs.readFileSync(path.join(dir, f))));
      // The record is there (so the grep looks at the right bytes), its secret is not.
      expect(all.includes(Buffer.from("secret-run-1", "utf8"))).to.equal(true);
      expect(all.includes(Buffer.from(SECRET, "utf8"))).to.equal(false);

      const replay = await s.api("POST", "/core/v1/svc_action", { key: a.accountKey, body, headers });
      expect(replay.headers.get("idempotent-replayed")).to.equal("true");
      expect(replay.body).to.deep.equal(first.body);
    });
    it("another caller's key with the same Idempotency-Key does not replay it", async () => {
      const other = await setupAccount(s, DECRYPT_CODE);
      const r = await s.api("POST", "/core/v1/svc_action", {
        key: other.accountKey,
        body: { cid: other.cid, pkp_id: other.pkpId, js_params: { pkp: other.pkpId, ct: "0x00" } },
        headers: { "idempotency-key": "secret-run-1" },
      });
      expect(r.headers.get("idempotent-replayed")).to.equal(null);
      expect(JSON.stringify(r.body)).to.not.contain(SECRET);
    });
  });

  describe("GET /health", () => {
    it("without a token: only {status, last_processed_block}, no RPC text or gas wallet addresses", async () => {
      const r = await s.api("GET", "/health");
      expect(r.status).to.equal(200);
      expect(Object.keys(r.body).sort()).to.deep.equal(["last_processed_block", "status"]);
      expect(r.body.status).to.equal("ok");
      expect(r.body.last_processed_block).to.be.a("number");
      const text = JSON.stringify(r.body).toLowerCase();
      expect(text).to.not.contain(s.enclave.gasAddress(0).toLowerCase().slice(2));
    });
    it("with the operator token: chain, cache, executor and gas wallets", async () => {
      const r = await s.api("GET", "/health", { headers: OPERATOR_HEADERS });
      expect(r.status).to.equal(200);
      expect(r.body.status).to.equal("ok");
      expect(r.body.chain.reachable).to.equal(true);
      expect(r.body.gas_wallets).to.include(s.enclave.gasAddress(0));
    });
    it("with a wrong operator token: 401 invalid_operator_token", async () =>
      expectError(
        await s.api("GET", "/health", { headers: { "x-operator-token": "guess" } }),
        401,
        "invalid_operator_token",
      ));
  });
});

describe("relayer: guard units", () => {
  it("a record sealed by the enclave opens only under the same context and root key", () => {
    const enclave = Enclave.fromRootKey("22".repeat(32));
    const sealed = enclave.sealRecord("scope\nuk_caller\nidem-1", Buffer.from(SECRET));
    expect(sealed).to.not.contain(Buffer.from(SECRET).toString("hex"));
    expect(Buffer.from(enclave.openRecord("scope\nuk_caller\nidem-1", sealed)).toString()).to.equal(SECRET);
    expect(() => enclave.openRecord("scope\nuk_other\nidem-1", sealed)).to.throw("Decryption failed");
    expect(() =>
      Enclave.fromRootKey("33".repeat(32)).openRecord("scope\nuk_caller\nidem-1", sealed),
    ).to.throw("Decryption failed");
  });
  it("assertJsonDepth skips brackets in strings, including after escaped quotes", () => {
    expect(() => assertJsonDepth(Buffer.from(`["\\"[[[[", [[1]]]`), 3)).to.not.throw();
    expect(() => assertJsonDepth(Buffer.from(`[[[[1]]]]`), 3)).to.throw("nested deeper than 3 levels");
  });
  it("assertJsonDepth treats multi-byte UTF-8 as string content", () => {
    expect(() => assertJsonDepth(Buffer.from(`["ü[{€😀", {"é": [1]}]`), 3)).to.not.throw();
  });
  it("canonical() renders 200,000 levels without overflowing the stack", () => {
    let v: unknown = 1;
    for (let i = 0; i < 200_000; i++) v = i % 2 ? [v] : { k: v };
    // 100,000 objects `{"k":…}` (6 characters each), 100,000 arrays `[…]` (2 each), the innermost 1.
    expect(canonical(v).length).to.equal(100_000 * 6 + 100_000 * 2 + 1);
  });
  it("canonical() sorts keys and otherwise matches JSON.stringify", () => {
    const v = { b: [1, "x", null, { d: true, c: 1.5 }], a: { "": "é\n" } };
    expect(canonical(v)).to.equal('{"a":{"":"é\\n"},"b":[1,"x",null,{"c":1.5,"d":true}]}');
  });
});
