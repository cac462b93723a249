/**
 * Triggers through the API on a real stack (anvil, contracts, executor, SQLite): create, read, update,
 * enable/disable, delete with their refusals; a manual firing runs the action as the usage key with the
 * firing in js_params; revoking that key fails the next run with the refusal recorded.
 */
import { expect } from "chai";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger, waitForRun } from "./helpers";

const ECHO = "async function main(p) { return { trigger: p.trigger, extra: p.extra }; }";

describe("triggers: the API", function () {
  this.timeout(120_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof accountWithKey>>;

  before(async () => {
    s = await startStack({ triggers: { pollMs: 50 } });
    a = await accountWithKey(s, ECHO);
  });
  after(async () => {
    await s?.close();
  });

  const post = (route: string, body: unknown, key = a.accountKey) =>
    s.api("POST", `/core/v1${route}`, { key, body });

  it("creates a schedule trigger and answers it with its next run", async () => {
    const t = await createTrigger(s, a, { kind: "schedule", schedule: { cron: "*/5 * * * *" } });
    expect(t.id).to.match(/^trg_[0-9a-f]{32}$/);
    expect(t.kind).to.equal("schedule");
    expect(t.enabled).to.equal(true);
    expect(t.paused).to.equal(null);
    expect(t.run_as).to.deep.equal({ key_address: a.keyAddress });
    expect(t.schedule.missed).to.equal("skip");
    expect(new Date(t.schedule.next_run_at).getUTCMinutes() % 5).to.equal(0);
    expect(t.limits).to.deep.equal({ runs_per_minute: 60, max_queued_runs: 100, concurrency: "serial" });
    expect(t.retry).to.deep.equal({ max_attempts: 3, backoff_ms: 10_000 });
  });

  it("refuses a 6-field cron expression with invalid_trigger naming schedule.cron", async () => {
    const r = await post("/triggers", {
      name: "t",
      kind: "schedule",
      cid: a.cid,
      run_as: { key_address: a.keyAddress },
      schedule: { cron: "* * * * * *" },
    });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_trigger");
    expect(r.body.error.details.field).to.equal("schedule.cron");
  });

  it("refuses an unknown kind, a bad CID, a PKP of no account, a key of no account, a chain not configured", async () => {
    const base = { name: "t", kind: "webhook", cid: a.cid, run_as: { key_address: a.keyAddress } };
    const cases: Array<[Record<string, unknown>, number, string]> = [
      // The declared schema lists the kinds: an unknown one is refused like any value outside an enum.
      [{ ...base, kind: "sometimes" }, 400, "invalid_request"],
      [{ ...base, cid: "not-a-cid" }, 400, "invalid_cid"],
      [{ ...base, pkp_ids: ["0x" + "ab".repeat(32)] }, 404, "pkp_not_found"],
      [{ ...base, run_as: { key_address: "0x" + "12".repeat(20) } }, 404, "usage_key_not_found"],
      [
        {
          ...base,
          kind: "chain_event",
          chain_event: { chain_id: 999_999, address: "0x" + "12".repeat(20), topic0: "0x" + "00".repeat(32) },
        },
        400,
        "chain_not_configured",
      ],
      [{ ...base, limits: { max_queued_runs: 0 } }, 400, "invalid_trigger"],
      [{ ...base, js_params: { trigger: 1 } }, 400, "invalid_trigger"],
      [{ ...base, colour: "red" }, 400, "unknown_field"],
      [{ ...base, kind: "schedule" }, 400, "invalid_trigger"],
    ];
    for (const [body, status, code] of cases) {
      const r = await post("/triggers", body);
      expect([r.status, r.body.error?.code], JSON.stringify(body)).to.deep.equal([status, code]);
    }
  });

  it("a usage key cannot manage triggers: 403 owner_only", async () => {
    const r = await s.api("GET", "/core/v1/triggers", { key: a.usageKey });
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal("owner_only");
  });

  it("another account's trigger, and a deleted one, are 404 trigger_not_found", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    const other = await accountWithKey(s);
    const r = await s.api("GET", `/core/v1/triggers/${t.id}`, { key: other.accountKey });
    expect([r.status, r.body.error.code]).to.deep.equal([404, "trigger_not_found"]);
    expect((await s.api("DELETE", `/core/v1/triggers/${t.id}`, { key: a.accountKey })).status).to.equal(200);
    const gone = await s.api("GET", `/core/v1/triggers/${t.id}`, { key: a.accountKey });
    expect([gone.status, gone.body.error.code]).to.deep.equal([404, "trigger_not_found"]);
  });

  it("updates some fields and keeps the others; the kind cannot change", async () => {
    const t = await createTrigger(s, a, { kind: "schedule", schedule: { cron: "0 * * * *" } });
    const r = await post(`/triggers/${t.id}`, { name: "hourly", limits: { concurrency: "parallel" } });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.name).to.equal("hourly");
    expect(r.body.limits).to.deep.equal({
      runs_per_minute: 60,
      max_queued_runs: 100,
      concurrency: "parallel",
    });
    expect(r.body.schedule.cron).to.equal("0 * * * *");
    const k = await post(`/triggers/${t.id}`, { kind: "webhook" });
    expect([k.status, k.body.error.code]).to.deep.equal([400, "invalid_trigger"]);
  });

  it("lists the account's triggers, paged", async () => {
    const r = await s.api("GET", "/core/v1/triggers?page_size=1", { key: a.accountKey });
    expect(r.status).to.equal(200);
    expect(r.body.items.length).to.equal(1);
    expect(r.body.total).to.equal(2);
  });

  it("a manual firing runs the action as the usage key, with the firing under js_params.trigger", async () => {
    const t = await createTrigger(s, a, { kind: "webhook", js_params: { extra: 7 } });
    const f = await post(`/triggers/${t.id}/fire`, {});
    expect(f.status, JSON.stringify(f.body)).to.equal(202);
    expect(f.body.firing_id).to.match(/^manual:[0-9a-f-]{36}$/);
    const run = await waitForRun(s, a.accountKey, t.id, f.body.run_id);
    expect(run.status, JSON.stringify(run)).to.equal("succeeded");
    expect(run.attempt).to.equal(1);
    expect(run.response.extra).to.equal(7);
    expect(run.response.trigger).to.include({
      id: t.id,
      firing_id: f.body.firing_id,
      kind: "webhook",
      source: "manual",
    });
    expect(run.response.trigger.pkp_ids).to.deep.equal([a.pkpId]);
  });

  it("runs list newest first and filter by status", async () => {
    const t = await createTrigger(s, a, { kind: "webhook", limits: { concurrency: "parallel" } });
    const first = await post(`/triggers/${t.id}/fire`, {});
    await waitForRun(s, a.accountKey, t.id, first.body.run_id);
    const second = await post(`/triggers/${t.id}/fire`, {});
    await waitForRun(s, a.accountKey, t.id, second.body.run_id);
    const all = await s.api("GET", `/core/v1/triggers/${t.id}/runs`, { key: a.accountKey });
    expect(all.body.items.map((r: { id: string }) => r.id)).to.deep.equal([
      second.body.run_id,
      first.body.run_id,
    ]);
    const failed = await s.api("GET", `/core/v1/triggers/${t.id}/runs?status=failed`, { key: a.accountKey });
    expect(failed.body.total).to.equal(0);
    const bad = await s.api("GET", `/core/v1/triggers/${t.id}/runs?status=maybe`, { key: a.accountKey });
    expect([bad.status, bad.body.error.code]).to.deep.equal([400, "invalid_request"]);
  });

  it("revoking the trigger's usage key (path A) makes the next run failed, with the refusal recorded", async () => {
    const b = await accountWithKey(s, ECHO);
    const t = await createTrigger(s, b, { kind: "webhook" });
    const rm = await post("/remove_usage_api_key", { usage_api_key: b.usageKey }, b.accountKey);
    expect(rm.status, JSON.stringify(rm.body)).to.equal(200);
    const f = await post(`/triggers/${t.id}/fire`, {}, b.accountKey);
    const run = await waitForRun(s, b.accountKey, t.id, f.body.run_id);
    expect(run.status).to.equal("failed");
    expect(run.attempt).to.equal(1);
    expect(run.error.code).to.equal("unknown_api_key");
  });

  it("a disabled trigger cannot be fired: 404; enabled again, it can", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    expect((await post(`/triggers/${t.id}/disable`, {})).body.enabled).to.equal(false);
    const r = await post(`/triggers/${t.id}/fire`, {});
    expect([r.status, r.body.error.code]).to.deep.equal([404, "trigger_not_found"]);
    expect((await post(`/triggers/${t.id}/enable`, {})).body.enabled).to.equal(true);
    expect((await post(`/triggers/${t.id}/fire`, {})).status).to.equal(202);
  });

  it("stops at the per-account limit with trigger_limit_reached", async () => {
    s.relayerOptions.triggers = { pollMs: 50, maxPerAccount: 2 };
    await s.restartRelayer();
    const c = await accountWithKey(s);
    await createTrigger(s, c, { kind: "webhook" });
    await createTrigger(s, c, { kind: "webhook" });
    const r = await post(
      "/triggers",
      { name: "t", kind: "webhook", cid: c.cid, run_as: { key_address: c.keyAddress } },
      c.accountKey,
    );
    expect([r.status, r.body.error.code]).to.deep.equal([409, "trigger_limit_reached"]);
  });
});
