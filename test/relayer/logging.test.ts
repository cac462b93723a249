/**
 * Logs never contain a key: a full lifecycle (including refusals, idempotent replays and an action that
 * logs its params) is run with the relayer's logs captured at debug level; no key string, nor its hex
 * part, appears in them.
 */
import { Writable } from "node:stream";
import { expect } from "chai";
import pino from "pino";
import { startStack, type Stack } from "../helpers/stack";

describe("relayer: logs never contain a key", function () {
  this.timeout(120_000);
  let s: Stack;
  const lines: string[] = [];

  before(async () => {
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    s = await startStack({ logger: pino({ level: "debug" }, sink) });
  });
  after(async () => {
    await s?.close();
  });

  it("a full lifecycle leaves request logs without any key material", async () => {
    const acct = await s.api("POST", "/core/v1/new_account", {
      body: { account_name: "logs" },
      headers: { "idempotency-key": "l1" },
    });
    const ak: string = acct.body.api_key;
    const pkp = (
      await s.api("POST", "/core/v1/pkps/create", { headers: { authorization: `Bearer ${ak}` }, body: {} })
    ).body.pkp_id;
    const code = "async function main(p) { console.log(JSON.stringify(p)); return 1; }";
    const cid = (await s.api("POST", "/core/v1/actions", { key: ak, body: { code } })).body.cid;
    const g = (
      await s.api("POST", "/core/v1/groups", { key: ak, body: { name: "g", pkps: [pkp], actions: [cid] } })
    ).body.group_id;
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: ak,
      body: { name: "u", execute_in_groups: [g] },
      headers: { "idempotency-key": "l2" },
    });
    const uk: string = k.body.usage_api_key;
    await s.api("POST", "/core/v1/add_usage_api_key", {
      key: ak,
      body: { name: "u", execute_in_groups: [g] },
      headers: { "idempotency-key": "l2" },
    });
    await s.api("POST", "/core/v1/svc_action", {
      key: uk,
      body: { cid, pkp_id: pkp, js_params: { leak: uk } },
    });
    await s.api("POST", "/core/v1/update_usage_api_key", { key: ak, body: { usage_api_key: uk, name: "u" } });
    await s.api("POST", "/core/v1/svc_action", { key: uk, body: { cid } });
    await s.api("POST", "/core/v1/add_usage_api_key", { key: uk, body: { name: "x" } });
    await s.api("POST", "/core/v1/remove_usage_api_key", { key: ak, body: { usage_api_key: uk } });
    await s.api("GET", "/core/v1/pkps", { key: uk });
    await s.api("GET", `/core/v1/${uk}`, { key: uk });
    await s.api("POST", "/core/v1/update_usage_api_key", {
      key: ak,
      rawBody: `{"usage_api_key": "${uk}"`,
      headers: { "content-type": "application/json" },
    });
    await s.api("GET", "/core/v1/pkps", { key: "uk_" + "z".repeat(64) });

    const text = lines.join("");
    expect(lines.length).to.be.greaterThan(10);
    expect(text).to.contain('"route":"/core/v1/svc_action"');
    for (const secret of [ak, uk, ak.slice(3), uk.slice(3)])
      expect(text.includes(secret), "a key reached the logs").to.equal(false);
  });
});
