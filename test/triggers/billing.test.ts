/**
 * Triggered runs and billing, on a real stack with the real ledger (simulated processor): an empty
 * balance skips the run, pauses the account's triggers and stores a `trigger.disabled` event; a top-up
 * resumes them. An action's own error is a final `failed` run with a `trigger.run_failed` event.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger, waitForRun } from "./helpers";

describe("triggers: billing", function () {
  this.timeout(120_000);
  let s: Stack;
  let billing: Billing;
  let dir: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-trigger-billing-"));
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
      signupCreditCents: 0,
      // Setting up is free here; a run costs 1 cent a second (it reserves its 30 s limit: 30 cents).
      prices: { write_cents: 0, pin_cents_per_100kb: 0, execution_cents_per_second: 1 },
      chargeFlushMs: 0,
    });
    s = await startStack({
      billing,
      triggers: { pollMs: 50, resumeCheckMs: 100 },
      webhooks: { allowAddresses: ["127.0.0.1"] },
    });
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A top-up through the simulated processor: create, succeed, confirm. */
  const topUp = async (key: string, cents: number) => {
    const pi = await s.api("POST", "/core/v1/billing/create_payment_intent", {
      key,
      body: { amount_cents: cents },
    });
    expect(pi.status, JSON.stringify(pi.body)).to.equal(200);
    const id = pi.body.payment_intent_id as string;
    const ok = await s.api("POST", `/core/v1/billing/simulated/intents/${id}/succeed`, { key, body: {} });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    const paid = await s.api("POST", "/core/v1/billing/confirm_payment", {
      key,
      body: { payment_intent_id: id },
    });
    expect(paid.status, JSON.stringify(paid.body)).to.equal(200);
  };

  const events = async (accountId: number, type: string) =>
    (
      (await billing.db.exec("SELECT payload FROM webhook_outbox_events WHERE account_id = ? AND type = ?", [
        String(accountId),
        type,
      ])) as Array<{ payload: string }>
    ).map((r) => JSON.parse(r.payload));

  it("an empty balance skips the run, pauses the account's triggers and says so; a top-up resumes them", async () => {
    const a = await accountWithKey(s);
    const hook = await s.api("POST", "/core/v1/webhooks", {
      key: a.accountKey,
      body: { url: "http://127.0.0.1:9/", event_types: ["trigger.disabled", "trigger.run_failed"] },
    });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
    const t = await createTrigger(s, a, { kind: "webhook" });
    const other = await createTrigger(s, a, { kind: "webhook" });
    const f = await s.api("POST", `/core/v1/triggers/${t.id}/fire`, { key: a.accountKey, body: {} });
    const run = await waitForRun(s, a.accountKey, t.id, f.body.run_id);
    expect(run).to.include({ status: "skipped", skip_reason: "insufficient_credits", charged_cents: 0 });
    for (const id of [t.id, other.id]) {
      const got = await s.api("GET", `/core/v1/triggers/${id}`, { key: a.accountKey });
      expect(got.body.paused).to.equal("insufficient_credits");
    }
    const refused = await s.api("POST", `/core/v1/triggers/${other.id}/fire`, {
      key: a.accountKey,
      body: {},
    });
    expect([refused.status, refused.body.error.code]).to.deep.equal([402, "insufficient_credits"]);
    const disabled = await events(a.accountId, "trigger.disabled");
    expect(disabled.map((e) => e.data.trigger_id).sort()).to.deep.equal([t.id, other.id].sort());
    expect(disabled[0].data.reason).to.equal("insufficient_credits");

    await topUp(a.accountKey, 1_000);
    const until = Date.now() + 10_000;
    let paused: unknown = "insufficient_credits";
    while (paused !== null && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100));
      paused = (await s.api("GET", `/core/v1/triggers/${t.id}`, { key: a.accountKey })).body.paused;
    }
    expect(paused).to.equal(null);
    const again = await s.api("POST", `/core/v1/triggers/${t.id}/fire`, { key: a.accountKey, body: {} });
    const ok = await waitForRun(s, a.accountKey, t.id, again.body.run_id);
    expect(ok.status).to.equal("succeeded");
    expect(ok.charged_cents).to.equal(1);
  });

  it("an action's own error is a final failed run (no retry) with a trigger.run_failed event", async () => {
    const a = await accountWithKey(s, 'async function main() { throw new Error("boom"); }');
    await s.api("POST", "/core/v1/webhooks", {
      key: a.accountKey,
      body: { url: "http://127.0.0.1:9/", event_types: ["trigger.run_failed"] },
    });
    await topUp(a.accountKey, 1_000);
    const t = await createTrigger(s, a, { kind: "webhook", retry: { max_attempts: 3, backoff_ms: 100 } });
    const f = await s.api("POST", `/core/v1/triggers/${t.id}/fire`, { key: a.accountKey, body: {} });
    const run = await waitForRun(s, a.accountKey, t.id, f.body.run_id);
    expect(run.status).to.equal("failed");
    expect(run.attempt).to.equal(1);
    expect(run.error.message).to.contain("boom");
    const failed = await events(a.accountId, "trigger.run_failed");
    expect(failed.map((e) => e.data.run_id)).to.deep.equal([f.body.run_id]);
  });
});
