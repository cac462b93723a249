/**
 * Bad input on every endpoint answers 4xx with the right code, never 500: malformed JSON, wrong types,
 * missing fields, oversized bodies, unknown ids, invalid CIDs, PKP ids and keys. Then a seeded randomized
 * pass of 1,200 requests with zero 5xx, every error in the documented envelope with a catalogued code.
 */
import { expect } from "chai";
import { ERROR_CATALOGUE } from "../../relayer/errorCatalogue";
import { ROUTES } from "../../relayer/app";
import { setupAccount, startStack, type ApiResponse, type Stack, OPERATOR_HEADERS } from "../helpers/stack";

const UNKNOWN_PKP = "0x" + "ab".repeat(32);
const UNKNOWN_CID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"; // "hello world\n", never pinned here
const BILLING_CODES = new Set(["insufficient_credits", "spend_cap_reached"]);

function expectError(r: ApiResponse, status: number, code: string) {
  expect(r.status, JSON.stringify(r.body)).to.equal(status);
  expect(r.body.error.code, JSON.stringify(r.body)).to.equal(code);
  expect(r.body.request_id).to.equal(r.headers.get("x-request-id"));
}

describe("relayer: bad input", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;
  let usageKey: string;

  before(async () => {
    s = await startStack();
    a = await setupAccount(s);
    usageKey = (
      await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "u", execute_in_groups: [0] },
      })
    ).body.usage_api_key;
  });
  after(async () => {
    await s?.close();
  });

  const posts = ROUTES.filter(([m]) => m === "POST").map(([, p]) => p.replace(":id", "1"));

  describe("every POST endpoint", () => {
    for (const route of posts) {
      it(`${route}: malformed JSON is 400 invalid_json`, async () => {
        expectError(
          await s.api("POST", route, {
            key: a.accountKey,
            rawBody: '{"name": ',
            headers: { "content-type": "application/json" },
          }),
          400,
          "invalid_json",
        );
      });
      it(`${route}: a body over the limit is 413 payload_too_large`, async () => {
        expectError(
          await s.api("POST", route, {
            key: a.accountKey,
            rawBody: JSON.stringify({ name: "x".repeat(1_100_000) }),
            headers: { "content-type": "application/json" },
          }),
          413,
          "payload_too_large",
        );
      });
      it(`${route}: a non-JSON body is 415 unsupported_media_type`, async () => {
        expectError(
          await s.api("POST", route, {
            key: a.accountKey,
            rawBody: "name=x",
            headers: { "content-type": "application/x-www-form-urlencoded" },
          }),
          415,
          "unsupported_media_type",
        );
      });
    }
  });

  describe("keys", () => {
    it("no key: 401 missing_api_key", async () =>
      expectError(await s.api("GET", "/core/v1/pkps"), 401, "missing_api_key"));
    it("an ak_ key one digit short: 401 invalid_api_key saying the length is wrong, without echoing the key", async () => {
      const short = "ak_" + "a".repeat(63);
      const r = await s.api("GET", "/core/v1/pkps", { key: short });
      expectError(r, 401, "invalid_api_key");
      expect(r.body.error.details.reason).to.equal("API key has the wrong length");
      expect(r.body.error.message).to.contain("64 lowercase hex digits");
      expect(JSON.stringify(r.body)).to.not.contain(short);
    });
    it("garbage key: 401 invalid_api_key", async () =>
      expectError(await s.api("GET", "/core/v1/pkps", { key: "hunter2" }), 401, "invalid_api_key"));
    it("well-formed but unregistered usage key: 401 unknown_api_key", async () =>
      expectError(
        await s.api("GET", "/core/v1/pkps", { key: s.enclave.generateUsageKey().apiKey }),
        401,
        "unknown_api_key",
      ));
    it("well-formed but unregistered account key: 401 unknown_api_key", async () =>
      expectError(
        await s.api("GET", "/core/v1/pkps", { key: s.enclave.generateAccountKey().apiKey }),
        401,
        "unknown_api_key",
      ));
    it("Authorization other than Bearer: 401 invalid_api_key", async () =>
      expectError(
        await s.api("GET", "/core/v1/pkps", { headers: { authorization: "Basic dXNlcjpwYXNz" } }),
        401,
        "invalid_api_key",
      ));
    it("Authorization: Bearer works like X-Api-Key", async () => {
      const r = await s.api("GET", "/core/v1/pkps", { headers: { authorization: `Bearer ${usageKey}` } });
      expect(r.status).to.equal(200);
    });
    it("two different keys in the two headers: 401 invalid_api_key", async () =>
      expectError(
        await s.api("GET", "/core/v1/pkps", {
          key: usageKey,
          headers: { authorization: `Bearer ${a.accountKey}` },
        }),
        401,
        "invalid_api_key",
      ));
    it("an expired key: 401 api_key_expired", async () => {
      const exp = Math.floor(Date.now() / 1000) + 2;
      const k = await s.api("POST", "/core/v1/add_usage_api_key", {
        key: a.accountKey,
        body: { name: "short", expiration: exp },
      });
      expect(k.status, JSON.stringify(k.body)).to.equal(201);
      expect(k.body.expiration).to.equal(exp);
      await new Promise((r) => setTimeout(r, Math.max(0, exp * 1000 - Date.now()) + 100));
      expectError(await s.api("GET", "/core/v1/pkps", { key: k.body.usage_api_key }), 401, "api_key_expired");
    });
  });

  describe("new_account", () => {
    it("wrong type: 400 invalid_request naming the field", async () => {
      const r = await s.api("POST", "/core/v1/new_account", { body: { account_name: 5 } });
      expectError(r, 400, "invalid_request");
      expect(r.body.error.details.field).to.equal("account_name");
    });
    it("not an object: 400 invalid_request", async () =>
      expectError(await s.api("POST", "/core/v1/new_account", { body: [1, 2] }), 400, "invalid_request"));
    it("unknown field: 400 unknown_field", async () =>
      expectError(
        await s.api("POST", "/core/v1/new_account", { body: { acount_name: "typo" } }),
        400,
        "unknown_field",
      ));
    it("bad e-mail: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", "/core/v1/new_account", { body: { email: "nope" } }),
        400,
        "invalid_request",
      ));
    it("name too long: 400 string_too_long", async () =>
      expectError(
        await s.api("POST", "/core/v1/new_account", { body: { account_name: "x".repeat(300) } }),
        400,
        "string_too_long",
      ));
  });

  describe("usage keys", () => {
    const add = (body: unknown) => s.api("POST", "/core/v1/add_usage_api_key", { key: a.accountKey, body });
    it("array field as a string: 400 invalid_request", async () =>
      expectError(await add({ name: "k", execute_in_groups: "1" }), 400, "invalid_request"));
    it("negative group id: 400 invalid_group_id", async () =>
      expectError(await add({ name: "k", execute_in_groups: [-1] }), 400, "invalid_group_id"));
    it("fractional group id: 400 invalid_group_id", async () =>
      expectError(await add({ name: "k", add_pkp_to_groups: [1.5] }), 400, "invalid_group_id"));
    it("unknown group id: 404 group_not_found", async () =>
      expectError(await add({ name: "k", execute_in_groups: [999] }), 404, "group_not_found"));
    it("boolean as a string: 400 invalid_request", async () =>
      expectError(await add({ name: "k", can_create_pkps: "yes" }), 400, "invalid_request"));
    it("expiration in the past: 400 expiration_in_past", async () =>
      expectError(await add({ name: "k", expiration: 1 }), 400, "expiration_in_past"));
    it("too many entries: 400 too_many_entries", async () =>
      expectError(
        await add({ name: "k", execute_in_groups: Array.from({ length: 65 }, (_, i) => i) }),
        400,
        "too_many_entries",
      ));
    it("update without usage_api_key or id: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", "/core/v1/update_usage_api_key", { key: a.accountKey, body: { name: "x" } }),
        400,
        "invalid_request",
      ));
    it("update with the account key as usage_api_key: 400 invalid_usage_api_key", async () =>
      expectError(
        await s.api("POST", "/core/v1/update_usage_api_key", {
          key: a.accountKey,
          body: { usage_api_key: a.accountKey },
        }),
        400,
        "invalid_usage_api_key",
      ));
    it("update_metadata with a garbage key: 400 invalid_usage_api_key", async () =>
      expectError(
        await s.api("POST", "/core/v1/update_usage_api_key_metadata", {
          key: a.accountKey,
          body: { usage_api_key: "uk_zz" },
        }),
        400,
        "invalid_usage_api_key",
      ));
    it("remove with a malformed id: 400 invalid_address", async () =>
      expectError(
        await s.api("POST", "/core/v1/remove_usage_api_key", { key: a.accountKey, body: { id: "0x123" } }),
        400,
        "invalid_address",
      ));
    it("remove an unknown key: 404 usage_key_not_found", async () =>
      expectError(
        await s.api("POST", "/core/v1/remove_usage_api_key", {
          key: a.accountKey,
          body: { usage_api_key: s.enclave.generateUsageKey().apiKey },
        }),
        404,
        "usage_key_not_found",
      ));
    for (const q of ["page_size=0", "page_size=101", "page_number=-1", "page_number=abc", "page_size=1e3"]) {
      it(`list_api_keys?${q}: 400 invalid_pagination`, async () =>
        expectError(
          await s.api("GET", `/core/v1/list_api_keys?${q}`, { key: a.accountKey }),
          400,
          "invalid_pagination",
        ));
    }
  });

  describe("PKPs", () => {
    it("name of the wrong type: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: { name: [] } }),
        400,
        "invalid_request",
      ));
    for (const bad of ["0x12", "xyz", "0x" + "0".repeat(64), "0x" + "g".repeat(64)]) {
      it(`GET /pkps/${bad.slice(0, 12)}…: 400 invalid_pkp_id`, async () =>
        expectError(await s.api("GET", `/core/v1/pkps/${bad}`), 400, "invalid_pkp_id"));
    }
    it("GET an unknown PKP: 404 pkp_not_found", async () =>
      expectError(await s.api("GET", `/core/v1/pkps/${UNKNOWN_PKP}`), 404, "pkp_not_found"));
    it("GET a PKP needs no key and returns its public key and address", async () => {
      const r = await s.api("GET", `/core/v1/pkps/${a.pkpId}`);
      expect(r.status).to.equal(200);
      expect(r.body).to.include({
        pkp_id: a.pkpId,
        address: s.enclave.pkpAddress(a.pkpId),
        account_id: a.accountId,
      });
    });
  });

  describe("groups", () => {
    it("invalid PKP id in pkps: 400 invalid_pkp_id", async () =>
      expectError(
        await s.api("POST", "/core/v1/groups", { key: a.accountKey, body: { name: "g", pkps: ["0xzz"] } }),
        400,
        "invalid_pkp_id",
      ));
    it("unknown PKP in pkps: 404 pkp_not_found", async () =>
      expectError(
        await s.api("POST", "/core/v1/groups", {
          key: a.accountKey,
          body: { name: "g", pkps: [UNKNOWN_PKP] },
        }),
        404,
        "pkp_not_found",
      ));
    it("invalid CID in actions: 400 invalid_cid", async () =>
      expectError(
        await s.api("POST", "/core/v1/groups", {
          key: a.accountKey,
          body: { name: "g", actions: ["notacid"] },
        }),
        400,
        "invalid_cid",
      ));
    for (const id of ["abc", "0", "-1", "1.5", "99999999999999999999"]) {
      it(`GET /groups/${id}: 400 invalid_group_id`, async () =>
        expectError(
          await s.api("GET", `/core/v1/groups/${id}`, { key: a.accountKey }),
          400,
          "invalid_group_id",
        ));
    }
    it("GET an unknown group: 404 group_not_found", async () =>
      expectError(await s.api("GET", "/core/v1/groups/999", { key: a.accountKey }), 404, "group_not_found"));
    it("DELETE an unknown group: 404 group_not_found", async () =>
      expectError(
        await s.api("DELETE", "/core/v1/groups/999", { key: a.accountKey }),
        404,
        "group_not_found",
      ));
    it("members with nothing to do: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, { key: a.accountKey, body: {} }),
        400,
        "invalid_request",
      ));
    it("members as a string: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, {
          key: a.accountKey,
          body: { add: "x" },
        }),
        400,
        "invalid_request",
      ));
    it("an invalid CID to add: 400 invalid_cid", async () =>
      expectError(
        await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, {
          key: a.accountKey,
          body: { add: ["x"] },
        }),
        400,
        "invalid_cid",
      ));
    it("a CID already listed: 409 action_already_in_group", async () =>
      expectError(
        await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, {
          key: a.accountKey,
          body: { add: [a.cid] },
        }),
        409,
        "action_already_in_group",
      ));
    it("removing a CID not listed: 409 action_not_in_group", async () =>
      expectError(
        await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, {
          key: a.accountKey,
          body: { remove: [UNKNOWN_CID] },
        }),
        409,
        "action_not_in_group",
      ));
    it("an unknown PKP to add: 404 pkp_not_found", async () =>
      expectError(
        await s.api("POST", `/core/v1/groups/${a.groupId}/pkps`, {
          key: a.accountKey,
          body: { add: [UNKNOWN_PKP] },
        }),
        404,
        "pkp_not_found",
      ));
    it("a PKP already in the group: 409 pkp_already_in_group", async () =>
      expectError(
        await s.api("POST", `/core/v1/groups/${a.groupId}/pkps`, {
          key: a.accountKey,
          body: { add: [a.pkpId] },
        }),
        409,
        "pkp_already_in_group",
      ));
  });

  describe("actions and execution", () => {
    it("pin without code: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", "/core/v1/actions", { key: a.accountKey, body: {} }),
        400,
        "invalid_request",
      ));
    it("pin code that is not a string: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", "/core/v1/actions", { key: a.accountKey, body: { code: 5 } }),
        400,
        "invalid_request",
      ));
    it("pin code over 256 KB: 413 code_too_large", async () =>
      expectError(
        await s.api("POST", "/core/v1/actions", { key: a.accountKey, body: { code: "x".repeat(262_145) } }),
        413,
        "code_too_large",
      ));
    it("GET an invalid CID: 400 invalid_cid", async () =>
      expectError(await s.api("GET", "/core/v1/actions/notacid", { key: a.accountKey }), 400, "invalid_cid"));
    it("GET an unknown CID: 404 action_not_found", async () =>
      expectError(
        await s.api("GET", `/core/v1/actions/${UNKNOWN_CID}`, { key: a.accountKey }),
        404,
        "action_not_found",
      ));
    it("GET a pinned CID returns its code", async () => {
      const r = await s.api("GET", `/core/v1/actions/${a.cid}`, { key: a.accountKey });
      expect(r.body).to.deep.equal({ cid: a.cid, code: a.code });
    });
    it("actions/cid computes the CID the store uses", async () => {
      const r = await s.api("POST", "/core/v1/actions/cid", { key: a.accountKey, body: { code: a.code } });
      expect(r.body.cid).to.equal(a.cid);
    });
    it("svc_action with neither code nor cid: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: {} }),
        400,
        "invalid_request",
      ));
    it("svc_action with both: 400 invalid_request", async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { code: "1", cid: a.cid } }),
        400,
        "invalid_request",
      ));
    it("svc_action with an invalid CID: 400 invalid_cid", async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid: "Qmnope" } }),
        400,
        "invalid_cid",
      ));
    it("svc_action with an invalid PKP id: 400 invalid_pkp_id", async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid: a.cid, pkp_id: "0x1" } }),
        400,
        "invalid_pkp_id",
      ));
    it("svc_action with js_params over 64 KB: 413 js_params_too_large", async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", {
          key: usageKey,
          body: { cid: a.cid, js_params: { x: "y".repeat(70_000) } },
        }),
        413,
        "js_params_too_large",
      ));
    it("svc_action with inline code listed nowhere: 403 not_authorized_to_execute", async () =>
      expectError(
        await s.api("POST", "/core/v1/svc_action", {
          key: usageKey,
          body: { code: "async function main() { return 1; }" },
        }),
        403,
        "not_authorized_to_execute",
      ));
    it("svc_action with inline code whose CID is listed runs it, and an action that throws is 200 with has_error", async () => {
      const ok = await s.api("POST", "/core/v1/svc_action", {
        key: usageKey,
        body: { code: a.code, pkp_id: a.pkpId },
      });
      expect(ok.status).to.equal(200);
      const thrower = "async function main() { console.log('before'); throw new Error('boom'); }";
      const cid = (await s.api("POST", "/core/v1/actions", { key: a.accountKey, body: { code: thrower } }))
        .body.cid;
      await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, {
        key: a.accountKey,
        body: { add: [cid] },
      });
      const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid } });
      expect(r.status).to.equal(200);
      expect(r.body.has_error).to.equal(true);
      expect(r.body.logs).to.contain("before");
      expect(r.body.error.code).to.equal("action_threw");
    });
    it("an action signing with a PKP of a group it is not listed with is refused inside the run", async () => {
      const other = (await s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: {} })).body
        .pkp_id;
      const code = `async function main() { return await Actions.signMessage({ pkpId: "${other}", message: "hi" }); }`;
      const cid = (await s.api("POST", "/core/v1/actions", { key: a.accountKey, body: { code } })).body.cid;
      await s.api("POST", `/core/v1/groups/${a.groupId}/actions`, {
        key: a.accountKey,
        body: { add: [cid] },
      });
      const r = await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid } });
      expect(r.status).to.equal(200);
      expect(r.body.has_error).to.equal(true);
    });
    it("transfer_ownership to the zero address: 400 invalid_address", async () =>
      expectError(
        await s.api("POST", "/core/v1/account/transfer_ownership", {
          key: a.accountKey,
          body: { new_owner: "0x0000000000000000000000000000000000000000" },
        }),
        400,
        "invalid_address",
      ));
    it("transfer_ownership with a bad checksum: 400 invalid_address", async () =>
      expectError(
        await s.api("POST", "/core/v1/account/transfer_ownership", {
          key: a.accountKey,
          body: { new_owner: "0x000000000000000000000000000000000000DeaD" },
        }),
        400,
        "invalid_address",
      ));
    it("cancel with no transfer pending: 409 no_pending_transfer", async () =>
      expectError(
        await s.api("POST", "/core/v1/account/cancel_ownership_transfer", { key: a.accountKey, body: {} }),
        409,
        "no_pending_transfer",
      ));
  });

  describe("conventions", () => {
    it("every response carries a fresh X-Request-Id and echoes X-Correlation-Id", async () => {
      const r = await s.api("GET", "/core/v1/config", {
        headers: { "x-request-id": "mine", "x-correlation-id": "trace-42" },
      });
      expect(r.headers.get("x-request-id")).to.match(/^[0-9a-f-]{36}$/);
      expect(r.headers.get("x-correlation-id")).to.equal("trace-42");
    });
    it("serves the OpenAPI document", async () => {
      const r = await s.api("GET", "/core/v1/openapi.json");
      expect(r.status).to.equal(200);
      expect(r.body.openapi).to.equal("3.1.0");
      expect(r.body.paths).to.have.property("/core/v1/svc_action");
    });
    it("serves Prometheus metrics and a health report", async () => {
      const m = await s.api("GET", "/metrics");
      expect(m.status).to.equal(200);
      expect(m.body).to.contain("sigil_http_requests_total").and.contain("sigil_cache_last_processed_block");
      const h = await s.api("GET", "/health", { headers: OPERATOR_HEADERS });
      expect(h.status).to.equal(200);
      expect(h.body.chain.reachable).to.equal(true);
      expect(h.body.executor.alive).to.be.greaterThan(0);
    });
    it("GET config reports the chain and contracts", async () => {
      const r = await s.api("GET", "/core/v1/config");
      expect(r.body).to.include({
        chain_id: 31337,
        registry_address: s.deployment.registry,
        forwarder_address: s.deployment.forwarder,
        billing_enabled: false,
      });
    });
    it("GET config lists the chains the service reaches, without their RPC URLs", async () => {
      const r = await s.api("GET", "/core/v1/config");
      expect(r.body.chains).to.deep.equal([{ chain_id: 31337, name: "registry", confirmations: 0 }]);
    });
  });

  describe("routing", () => {
    it("unknown path: 404 route_not_found", async () =>
      expectError(await s.api("GET", "/core/v1/nope", { key: a.accountKey }), 404, "route_not_found"));
    it("wrong method: 405 method_not_allowed with Allow", async () => {
      const r = await s.api("PUT", "/core/v1/groups", { key: a.accountKey });
      expectError(r, 405, "method_not_allowed");
      expect(r.headers.get("allow")).to.equal("POST, GET");
    });
  });

  describe("randomized pass", () => {
    it("1,200 seeded random requests: zero 5xx, every error in the envelope with a catalogued code", async () => {
      let seed = 0x5eed1e55;
      const rnd = () => {
        // mulberry32
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      };
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
      const fields = [
        "name",
        "description",
        "account_name",
        "email",
        "code",
        "cid",
        "pkp_id",
        "js_params",
        "add",
        "remove",
        "usage_api_key",
        "id",
        "new_owner",
        "expiration",
        "can_create_groups",
        "can_delete_groups",
        "can_create_pkps",
        "manage_ipfs_ids_in_groups",
        "add_pkp_to_groups",
        "remove_pkp_from_groups",
        "execute_in_groups",
        "pkps",
        "actions",
        "junk",
      ];
      const value = (depth: number): unknown => {
        switch (Math.floor(rnd() * 14)) {
          case 0:
            return null;
          case 1:
            return rnd() < 0.5;
          case 2:
            return Math.floor(rnd() * 2 ** 40) - 2 ** 39;
          case 3:
            return rnd() * 10;
          case 4:
            return "x".repeat(Math.floor(rnd() * 300));
          case 5:
            return a.cid;
          case 6:
            return a.pkpId;
          case 7:
            return pick([a.groupId, 0, 999, -1, 1.5]);
          case 8:
            return depth > 2 ? [] : Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1));
          case 9:
            return depth > 2
              ? {}
              : Object.fromEntries(
                  Array.from({ length: Math.floor(rnd() * 3) }, () => [pick(fields), value(depth + 1)]),
                );
          case 10:
            return pick([usageKey, "uk_" + "0".repeat(64), "0x" + "1".repeat(64), "ak_x"]);
          case 11:
            return "0x000000000000000000000000000000000000dEaD";
          case 12:
            return [a.groupId];
          default:
            return "";
        }
      };
      const keys = [a.accountKey, usageKey, undefined, "garbage", s.enclave.generateUsageKey().apiKey];
      const ids = [String(a.groupId), "0", "999", "abc", a.pkpId, a.cid, "0x12", "%zz", ""];
      const statuses = new Map<number, number>();
      const bad: string[] = [];
      const one = async () => {
        const [method0, pattern] = pick(ROUTES);
        const method = rnd() < 0.1 ? pick(["GET", "POST", "DELETE", "PUT", "PATCH"]) : method0;
        const route =
          pattern.replace(/:[a-z]+/g, () => pick(ids)) +
          (rnd() < 0.2
            ? `?page_size=${pick(["0", "5", "500", "x"])}&page_number=${pick(["0", "-1", "2"])}`
            : "");
        const key = pick(keys);
        const opts: Parameters<Stack["api"]>[2] = { key };
        if (method !== "GET" && method !== "HEAD") {
          const mode = rnd();
          if (mode < 0.1) {
            opts.rawBody = pick(['{"name":', "[]", "null", "12", '"s"', "{,}", "\u0000"]);
            opts.headers = { "content-type": "application/json" };
          } else if (mode < 0.15) {
            opts.rawBody = "a=b";
            opts.headers = { "content-type": "text/plain" };
          } else
            opts.body = Object.fromEntries(
              Array.from({ length: Math.floor(rnd() * 5) }, () => [pick(fields), value(0)]),
            );
        }
        if (rnd() < 0.05)
          opts.headers = {
            ...(opts.headers ?? {}),
            "idempotency-key": pick(["k1", "k2", "", "x".repeat(300)]),
          };
        if (rnd() < 0.05)
          opts.headers = {
            ...(opts.headers ?? {}),
            authorization: pick(["Bearer", "Bearer x y", `Bearer ${usageKey}`, "Basic abc"]),
          };
        let r: ApiResponse;
        try {
          r = await s.api(method, route, opts);
        } catch (err) {
          bad.push(`${method} ${route}: fetch failed ${(err as Error).message}`);
          return;
        }
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status >= 500)
          bad.push(
            `${method} ${route} ${JSON.stringify(opts.body ?? opts.rawBody)?.slice(0, 200)} → ${r.status} ${JSON.stringify(r.body)}`,
          );
        if (r.status >= 400 && route !== "/metrics") {
          const code = r.body?.error?.code;
          if (typeof code !== "string" || !(code in ERROR_CATALOGUE || BILLING_CODES.has(code)))
            bad.push(`${method} ${route} → ${r.status} uncatalogued ${JSON.stringify(r.body).slice(0, 200)}`);
        }
      };
      const total = 1_200;
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < total) {
            next++;
            await one();
          }
        }),
      );
      expect(bad, bad.slice(0, 5).join("\n")).to.deep.equal([]);
      const count = [...statuses.values()].reduce((x, y) => x + y, 0);
      expect(count).to.equal(total);
    });
  });
});
