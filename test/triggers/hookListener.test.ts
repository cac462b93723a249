/**
 * The hooks' own listener (relayer/triggers/hookListener.ts, hookThread.ts) on a real stack: the
 * triggers' answers announce its URL; each refusal is answered by its thread with the app's answer
 * (the same call to the main port, whose app and fast path answer it, is compared) and never reaches
 * the main thread (its count of handed calls does not move, and the refusals that need no hint are
 * answered while the main thread is blocked in a synchronous child process); an accepted delivery
 * crosses once and runs once; a change of the trigger is seen at once.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { createHmac, randomBytes } from "node:crypto";
import { expect } from "chai";
import type { HookListener } from "../../relayer/triggers/hookListener";
import { HOOK_THREAD_NICE } from "../../relayer/triggers/hookThread";
import type { TriggerService } from "../../relayer/triggers/service";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger, waitForRun } from "./helpers";

const PER_IP = 5;
const PER_TRIGGER = 30;
const BODY_BYTES = 1_024;

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

describe("triggers: the hooks' own listener", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof accountWithKey>>;
  let hooks: HookListener;
  let nextIp = 1;

  before(async () => {
    s = await startStack({
      trustProxy: 1,
      triggers: {
        hooksPort: 0,
        // The runner is started by the last test: until then a queued run stays queued.
        run: false,
        pollMs: 50,
        hookBodyBytes: BODY_BYTES,
        hookPerIpPerMinute: PER_IP,
        hookPerTriggerPerMinute: PER_TRIGGER,
      },
    });
    a = await accountWithKey(s, "async function main() { return 7; }");
    hooks = s.relayer.hooks!;
  });
  after(async () => {
    await s?.close();
  });

  /** A client address of its own (a fresh per-IP budget). */
  const freshIp = () => `10.8.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;

  async function call(
    base: string,
    path: string,
    ip: string,
    headers: Record<string, string> = {},
    body = "{}",
  ): Promise<Answer> {
    const r = await fetch(base + path, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": ip, ...headers },
      body,
    });
    const out: Answer = { status: r.status, headers: {}, body: (await r.json()) as Record<string, unknown> };
    r.headers.forEach((v, k) => (out.headers[k] = v));
    return out;
  }

  /** What must be equal to the main port's answer: all but the request's own id, the date, the connection. */
  function comparable(x: Answer) {
    expect(x.body.request_id).to.match(/^[0-9a-f-]{36}$/);
    expect(x.headers["x-request-id"]).to.equal(x.body.request_id);
    const headers = { ...x.headers };
    for (const h of ["date", "x-request-id", "x-correlation-id", "connection", "keep-alive"])
      delete headers[h];
    return { status: x.status, headers, body: { ...x.body, request_id: "-" } };
  }

  /** The same call to the listener and to the main port (other addresses: budgets of their own). */
  async function expectAppAnswer(
    path: string,
    status: number,
    code: string,
    headers: Record<string, string> = {},
    body = "{}",
  ) {
    // A hook's first call asks the main thread for its hint (a lookup); the call itself never crosses.
    const handed = hooks.handed.calls;
    const thread = await call(hooks.origin, path, freshIp(), headers, body);
    expect(hooks.handed.calls, "calls handed to the main thread").to.equal(handed);
    const main = await call(s.url, path, freshIp(), headers, body);
    expect(thread.status, JSON.stringify(thread.body)).to.equal(status);
    expect((thread.body.error as { code: string }).code).to.equal(code);
    expect(comparable(thread)).to.deep.equal(comparable(main));
  }

  const hookPath = (t: { webhook: { url: string } }) => new URL(t.webhook.url).pathname;

  it("the triggers' answers announce the listener's URL; the main port still serves the same path", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    expect(t.webhook.url).to.equal(`${hooks.origin}${hookPath(t)}`);
    expect(new URL(hooks.origin).port).to.equal(String(hooks.port));
    expect(hooks.port).to.not.equal(s.relayer.port);
    const got = await s.api("GET", `/core/v1/triggers/${t.id}`, { key: a.accountKey });
    expect(got.body.webhook.url).to.equal(t.webhook.url);
    const viaMain = await call(s.url, hookPath(t), freshIp());
    expect(viaMain.status, JSON.stringify(viaMain.body)).to.equal(202);
  });

  it("unknown, disabled and deleted hooks: the app's 404 from the thread, once it has asked", async () => {
    const unknown = `/hooks/v1/hk_${randomBytes(24).toString("base64url")}`;
    const disabled = await createTrigger(s, a, { kind: "webhook" });
    await s.api("POST", `/core/v1/triggers/${disabled.id}/disable`, { key: a.accountKey, body: {} });
    const deleted = await createTrigger(s, a, { kind: "webhook" });
    await s.api("DELETE", `/core/v1/triggers/${deleted.id}`, { key: a.accountKey });
    for (const path of [unknown, hookPath(disabled), hookPath(deleted)]) {
      // The first call asks the main thread (a lookup, not the call); the hint answers the next.
      const lookups = hooks.handed.lookups;
      const calls = hooks.handed.calls;
      expect((await call(hooks.origin, path, freshIp())).status).to.equal(404);
      expect(hooks.handed.lookups).to.equal(lookups + 1);
      expect(hooks.handed.calls).to.equal(calls);
      await expectAppAnswer(path, 404, "trigger_not_found");
    }
  });

  it("a known-full queue, the trigger's rate and a wrong HMAC: the app's answers, from the thread", async () => {
    const full = await createTrigger(s, a, {
      kind: "webhook",
      limits: { max_queued_runs: 1, runs_per_minute: 600, concurrency: "parallel" },
    });
    // The first call queues the one run; the second is refused by the database, which tells the thread.
    expect((await call(hooks.origin, hookPath(full), freshIp())).status).to.equal(202);
    const second = await call(hooks.origin, hookPath(full), freshIp());
    expect(second.status).to.equal(429);
    expect((second.body.error as { code: string }).code).to.equal("trigger_queue_full");
    await expectAppAnswer(hookPath(full), 429, "trigger_queue_full");

    const signed = await createTrigger(s, a, { kind: "webhook", webhook: { hmac: true } });
    await expectAppAnswer(hookPath(signed), 401, "webhook_signature_invalid", {
      "x-sigil-signature": "sha256=00",
    });
    // The right signature crosses and is accepted.
    const sig = "sha256=" + createHmac("sha256", signed.webhook_secret).update("{}").digest("hex");
    const ok = await call(hooks.origin, hookPath(signed), freshIp(), { "x-sigil-signature": sig });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(202);

    // The trigger's own rate: PER_TRIGGER calls a minute on this listener, then 429 rate_limited there.
    const busy = await createTrigger(s, a, {
      kind: "webhook",
      webhook: { hmac: true },
      limits: { max_queued_runs: 100, runs_per_minute: 600, concurrency: "parallel" },
    });
    const handed = hooks.handed.calls;
    for (let i = 0; i < PER_TRIGGER; i++)
      expect((await call(hooks.origin, hookPath(busy), freshIp())).status).to.equal(401);
    expect(hooks.handed.calls, "wrong signatures never cross").to.equal(handed);
    const limited = await call(hooks.origin, hookPath(busy), freshIp());
    expect(limited.status).to.equal(429);
    expect((limited.body.error as { code: string; details: { scope: string } }).code).to.equal(
      "rate_limited",
    );
    expect((limited.body.error as { details: { scope: string } }).details.scope).to.equal("trigger");
    expect(limited.headers["retry-after"]).to.match(/^\d+$/);
  });

  it("the refusals that need no hint are answered while the main thread is blocked", function () {
    // spawnSync blocks this (the main) thread until the child is done: every answer it gets is the
    // listener's thread's. The child sends, from one address, a route the listener does not serve, a
    // malformed hook id, an oversized body, and calls past the per-IP limit (which the route's refusal,
    // coming first, does not count).
    const script = `
      const base = ${JSON.stringify(hooks.origin)};
      const send = (path, body, method = "POST") => fetch(base + path, {
        method, headers: { "x-forwarded-for": "10.7.0.1", "content-type": "application/json" },
        body: method === "POST" ? body : undefined,
      }).then(async (r) => [r.status, (await r.json()).error.code]);
      (async () => {
        const out = [];
        out.push(await send("/core/v1/svc_action", "{}"));
        out.push(await send("/hooks/v1/hk_short", "{}"));
        out.push(await send("/hooks/v1/hk_short", "x".repeat(${BODY_BYTES + 1})));
        for (let i = 0; i < 5; i++) out.push(await send("/hooks/v1/hk_short", "{}"));
        console.log(JSON.stringify(out));
      })().catch((e) => { console.error(e); process.exit(1); });
    `;
    const handed = { ...hooks.handed };
    const child = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", timeout: 60_000 });
    expect(child.status, child.stderr).to.equal(0);
    expect(JSON.parse(child.stdout)).to.deep.equal([
      [404, "route_not_found"],
      [404, "trigger_not_found"],
      [413, "payload_too_large"],
      [404, "trigger_not_found"],
      [404, "trigger_not_found"],
      [404, "trigger_not_found"],
      [429, "rate_limited"],
      [429, "rate_limited"],
    ]);
    expect(hooks.handed).to.deep.equal(handed);
  });

  it("an oversized body and the per-IP limit: the app's answers", async () => {
    await expectAppAnswer("/hooks/v1/hk_short", 413, "payload_too_large", {}, "x".repeat(BODY_BYTES + 1));
    const ip = freshIp();
    for (let i = 0; i < PER_IP; i++)
      expect((await call(hooks.origin, "/hooks/v1/hk_short", ip)).status).to.equal(404);
    const limited = await call(hooks.origin, "/hooks/v1/hk_short", ip);
    expect(limited.status).to.equal(429);
    expect((limited.body.error as { details: { scope: string } }).details.scope).to.equal("address");
  });

  it("a trigger disabled after its hint was taken answers 404 at once (the change reaches the thread)", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    expect((await call(hooks.origin, hookPath(t), freshIp())).status).to.equal(202);
    await s.api("POST", `/core/v1/triggers/${t.id}/disable`, { key: a.accountKey, body: {} });
    expect((await call(hooks.origin, hookPath(t), freshIp())).status).to.equal(404);
  });
  it("the listener's thread runs at a lower priority than the main thread (Linux)", function () {
    /** Each thread's nice value (field 19 of /proc/<pid>/task/<tid>/stat), by thread id. */
    const niceOf = (tid: string) =>
      Number(fs.readFileSync(`/proc/self/task/${tid}/stat`, "utf8").split(") ")[1].split(" ")[16]);
    if (!fs.existsSync("/proc/self/task")) return this.skip();
    const main = niceOf(String(process.pid));
    if (main >= HOOK_THREAD_NICE) return this.skip(); // the whole process already runs that low
    const lowered = fs.readdirSync("/proc/self/task").filter((tid) => niceOf(tid) === HOOK_THREAD_NICE);
    expect(lowered.length, "threads at the hooks' nice").to.be.at.least(1);
    expect(niceOf(String(process.pid))).to.equal(main);
  });

  it("a burst at an empty queue: no more fresh deliveries in flight to the main thread than the queue holds", async () => {
    const t = await createTrigger(s, a, {
      kind: "webhook",
      limits: { max_queued_runs: 3, runs_per_minute: 600, concurrency: "parallel" },
    });
    // The hint first (a lookup, answered 202), so that the burst meets a thread that knows the trigger.
    expect((await call(hooks.origin, hookPath(t), freshIp())).status).to.equal(202);
    const handed = hooks.handed.calls;
    const burst = await Promise.all(
      Array.from({ length: 20 }, () => call(hooks.origin, hookPath(t), freshIp())),
    );
    expect(burst.filter((r) => r.status === 202).length).to.equal(2);
    // (20 calls: within the trigger's own rate on this listener, PER_TRIGGER a minute.)
    expect(burst.filter((r) => r.status === 429).length).to.equal(18);
    for (const r of burst.filter((x) => x.status === 429))
      expect(r.body.error).to.deep.include({
        code: "trigger_queue_full",
        details: { reason: "queue_full", limit: 3 },
      });
    // At most 3 in flight at once: the 2 stored, then at most 3 more until the database's "full" is back.
    expect(hooks.handed.calls - handed, "calls that crossed in the burst").to.be.at.most(5);
  });

  it("a run claimed from a full queue lets one call cross, not the burst; the minute's runs refused on the thread", async () => {
    const t = await createTrigger(s, a, {
      kind: "webhook",
      limits: { max_queued_runs: 2, runs_per_minute: 600, concurrency: "parallel" },
    });
    for (let i = 0; i < 2; i++)
      expect((await call(hooks.origin, hookPath(t), freshIp())).status).to.equal(202);
    expect((await call(hooks.origin, hookPath(t), freshIp())).status).to.equal(429);
    // Runs the queued runs (this trigger's two and any an earlier test left): two claims of this one.
    expect(await (s.relayer.triggers as TriggerService).runner.drain()).to.be.at.least(2);
    // The claims' "room" messages are posted before drain ends; give the thread a moment to take them.
    await new Promise((r) => setTimeout(r, 100));
    let handed = hooks.handed.calls;
    const burst = await Promise.all(
      Array.from({ length: 12 }, () => call(hooks.origin, hookPath(t), freshIp())),
    );
    expect(burst.filter((r) => r.status === 202).length).to.equal(2);
    expect(burst.filter((r) => r.status === 429).length).to.equal(10);
    expect(hooks.handed.calls - handed, "calls that crossed after two claims").to.equal(2);

    const minute = await createTrigger(s, a, {
      kind: "webhook",
      limits: { max_queued_runs: 10, runs_per_minute: 2, concurrency: "parallel" },
    });
    for (let i = 0; i < 2; i++)
      expect((await call(hooks.origin, hookPath(minute), freshIp())).status).to.equal(202);
    // The third crosses: the database refuses it, and tells the thread.
    expect((await call(hooks.origin, hookPath(minute), freshIp())).status).to.equal(429);
    handed = hooks.handed.calls;
    for (let i = 0; i < 5; i++) {
      const r = await call(hooks.origin, hookPath(minute), freshIp());
      expect(r.status).to.equal(429);
      expect(r.body.error).to.deep.include({
        code: "trigger_queue_full",
        details: { reason: "rate", limit: 2 },
      });
      expect(r.headers["retry-after"]).to.equal("60");
    }
    expect(hooks.handed.calls, "refusals past the minute's runs never cross").to.equal(handed);
    await expectAppAnswer(hookPath(minute), 429, "trigger_queue_full");
  });

  it("an accepted delivery crosses to the main thread once, answered 202 with its run, which runs once", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    const before = { ...hooks.handed };
    const r = await call(hooks.origin, hookPath(t), freshIp(), { "x-custom": "v", cookie: "c=1" }, '{"n":1}');
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    expect(r.headers["x-request-id"]).to.match(/^[0-9a-f-]{36}$/);
    expect(hooks.handed.calls - before.calls).to.equal(1);
    expect(hooks.handed.lookups - before.lookups).to.equal(1);
    s.relayer.triggers.runner.start();
    const run = await waitForRun(s, a.accountKey, t.id, r.body.run_id as string);
    expect(run.status, JSON.stringify(run)).to.equal("succeeded");
    expect(run.firing_id).to.equal(r.body.firing_id);
    const runs = await s.api("GET", `/core/v1/triggers/${t.id}/runs`, { key: a.accountKey });
    expect(runs.body.total).to.equal(1);
  });
});
