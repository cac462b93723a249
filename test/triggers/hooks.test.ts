/**
 * POST /hooks/v1/:hook_id on a real stack: the run gets the parsed body, the raw bytes and the safe
 * headers; an HMAC is checked when the trigger asks for one; the body limit, the 404s that reveal
 * nothing, and a flood of 1,000 calls against max_queued_runs 20.
 */
import { createHmac } from "node:crypto";
import { expect } from "chai";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger, waitForRun } from "./helpers";

const ECHO = "async function main(p) { return { trigger: p.trigger }; }";

describe("triggers: inbound webhooks", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof accountWithKey>>;

  before(async () => {
    s = await startStack({
      triggers: {
        pollMs: 50,
        hookBodyBytes: 1024,
        hookPerIpPerMinute: 100_000,
        hookPerTriggerPerMinute: 100_000,
      },
    });
    a = await accountWithKey(s, ECHO);
  });
  after(async () => {
    await s?.close();
  });

  const hook = (url: string, body: string, headers: Record<string, string> = {}) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  const sign = (secret: string, body: string) =>
    "sha256=" + createHmac("sha256", secret).update(body).digest("hex");

  it("a delivery is answered 202 and its run gets the body, the raw bytes and the safe headers", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    expect(t.webhook.url).to.match(/\/hooks\/v1\/hk_[A-Za-z0-9_-]{32}$/);
    expect(t.webhook.hmac).to.equal(null);
    expect(t).to.not.have.property("webhook_secret");
    const body = JSON.stringify({ action: "opened", n: 1 });
    const r = await hook(t.webhook.url, body, {
      "x-github-delivery": "d-123",
      "x-github-event": "pull_request",
      "x-hub-signature-256": "sha256=abc",
      "stripe-signature": "t=1,v1=x",
      authorization: "Bearer secret-token",
      cookie: "session=1",
      "x-api-key": "uk_not_for_actions",
      "x-forwarded-for": "10.0.0.1",
    });
    expect(r.status).to.equal(202);
    const answer = (await r.json()) as { run_id: string; firing_id: string };
    expect(answer.firing_id).to.equal("webhook:d-123");
    const run = await waitForRun(s, a.accountKey, t.id, answer.run_id);
    expect(run.status, JSON.stringify(run)).to.equal("succeeded");
    const got = run.response.trigger;
    expect(got.source).to.equal("webhook");
    expect(got.body).to.deep.equal({ action: "opened", n: 1 });
    expect(Buffer.from(got.raw_base64, "base64").toString()).to.equal(body);
    expect(got.headers).to.include({
      "x-github-delivery": "d-123",
      "x-github-event": "pull_request",
      "x-hub-signature-256": "sha256=abc",
      "stripe-signature": "t=1,v1=x",
      "content-type": "application/json",
    });
    for (const h of ["authorization", "cookie", "x-api-key", "x-forwarded-for"])
      expect(got.headers).to.not.have.property(h);
  });

  it("the same delivery id twice is stored, and run, once", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    const one = await hook(t.webhook.url, "{}", { "x-github-delivery": "same" });
    const two = await hook(t.webhook.url, "{}", { "x-github-delivery": "same" });
    const [x, y] = [(await one.json()) as { run_id: string }, (await two.json()) as { run_id: string }];
    expect(y.run_id).to.equal(x.run_id);
    const runs = await s.api("GET", `/core/v1/triggers/${t.id}/runs`, { key: a.accountKey });
    expect(runs.body.total).to.equal(1);
  });

  it("with an HMAC: the secret is shown once; a valid signature is accepted", async () => {
    const t = await createTrigger(s, a, { kind: "webhook", webhook: { hmac: true } });
    expect(t.webhook.hmac).to.deep.equal({ header: "x-sigil-signature", prefix: "sha256=", encoding: "hex" });
    expect(t.webhook_secret).to.match(/^whsec_/);
    const again = await s.api("GET", `/core/v1/triggers/${t.id}`, { key: a.accountKey });
    expect(again.body).to.not.have.property("webhook_secret");
    const body = '{"ok":true}';
    const r = await hook(t.webhook.url, body, { "x-sigil-signature": sign(t.webhook_secret, body) });
    expect(r.status).to.equal(202);
  });

  it("with an HMAC: a wrong or missing signature is 401 webhook_signature_invalid and stores nothing", async () => {
    const t = await createTrigger(s, a, { kind: "webhook", webhook: { hmac: true } });
    const body = '{"ok":true}';
    const wrong = await hook(t.webhook.url, body, { "x-sigil-signature": sign("whsec_other", body) });
    expect(wrong.status).to.equal(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).to.equal(
      "webhook_signature_invalid",
    );
    const tampered = await hook(t.webhook.url, '{"ok":false}', {
      "x-sigil-signature": sign(t.webhook_secret, body),
    });
    expect(tampered.status).to.equal(401);
    const missing = await hook(t.webhook.url, body);
    expect(missing.status).to.equal(401);
    const runs = await s.api("GET", `/core/v1/triggers/${t.id}/runs`, { key: a.accountKey });
    expect(runs.body.total).to.equal(0);
  });

  it("a body over the limit is 413 payload_too_large", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    const r = await hook(t.webhook.url, JSON.stringify({ pad: "x".repeat(2_000) }));
    expect(r.status).to.equal(413);
    expect(((await r.json()) as { error: { code: string } }).error.code).to.equal("payload_too_large");
  });

  it("an unknown, a disabled and a deleted hook answer the same 404 trigger_not_found", async () => {
    const disabled = await createTrigger(s, a, { kind: "webhook" });
    await s.api("POST", `/core/v1/triggers/${disabled.id}/disable`, { key: a.accountKey, body: {} });
    const deleted = await createTrigger(s, a, { kind: "webhook" });
    await s.api("DELETE", `/core/v1/triggers/${deleted.id}`, { key: a.accountKey });
    const unknown = `${s.url}/hooks/v1/hk_${"A".repeat(32)}`;
    const answers = [];
    for (const url of [unknown, disabled.webhook.url, deleted.webhook.url]) {
      const r = await hook(url, "{}");
      const body = (await r.json()) as { error: { code: string; message: string } };
      answers.push([r.status, body.error.code, body.error.message]);
    }
    expect(answers[0][0]).to.equal(404);
    expect(answers[0][1]).to.equal("trigger_not_found");
    expect(answers[1]).to.deep.equal(answers[0]);
    expect(answers[2]).to.deep.equal(answers[0]);
  });

  it("a flood of 1,000 calls with max_queued_runs 20 queues exactly 20 and answers the rest 429", async () => {
    // An instance that runs nothing (triggers.run off): every accepted firing stays queued, so the
    // count is the queue's own bound, not a race with the runner.
    const q = await startStack({
      triggers: { run: false, hookPerIpPerMinute: 100_000, hookPerTriggerPerMinute: 100_000 },
    });
    try {
      const b = await accountWithKey(q, ECHO);
      const t = await createTrigger(q, b, {
        kind: "webhook",
        limits: { max_queued_runs: 20, runs_per_minute: 600 },
      });
      const statuses = new Map<string, number>();
      const batch = 50;
      for (let i = 0; i < 1_000; i += batch) {
        const rs = await Promise.all(Array.from({ length: batch }, () => hook(t.webhook.url, "{}")));
        for (const r of rs) {
          const code =
            r.status === 202
              ? "202"
              : `${r.status} ${((await r.json()) as { error: { code: string } }).error.code}`;
          statuses.set(code, (statuses.get(code) ?? 0) + 1);
        }
      }
      expect(Object.fromEntries(statuses)).to.deep.equal({ "202": 20, "429 trigger_queue_full": 980 });
      const runs = await q.api("GET", `/core/v1/triggers/${t.id}/runs?status=queued`, { key: b.accountKey });
      expect(runs.body.total).to.equal(20);
    } finally {
      await q.close();
    }
  });
});
