/**
 * The hooks' fast path (relayer/triggers/hookFastPath.ts) on a real stack: each refusal it answers is
 * the app's answer (the same relayer's app, served alone on a second server, is asked the same), what
 * needs the body or the database (an HMAC, a re-delivery) is left to the app, a known-full trigger is
 * refused without a database statement and before its body has arrived, a trigger with room again is
 * accepted, and a keep-alive connection carries a refused and an accepted call. Every call names its
 * client address in X-Forwarded-For (the stack trusts one proxy hop), so each test has per-IP budgets
 * of its own and the per-IP refusal is tested on the fast path's own reading of the address.
 */
import { createHmac, randomBytes } from "node:crypto";
import * as http from "node:http";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import type { DataLayer } from "../../relayer/db";
import type { TriggerService } from "../../relayer/triggers/service";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger } from "./helpers";

const PER_IP = 5;

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

describe("triggers: the hooks' fast path", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof accountWithKey>>;
  let service: TriggerService;
  /** The same relayer's Express app on a server of its own: the answers without the fast path. */
  let appOnly: http.Server;
  let appOnlyUrl: string;
  let statements = 0;
  let nextIp = 1;

  before(async () => {
    s = await startStack({
      trustProxy: 1,
      // Nothing in the background reads the database during a counted window.
      webhooks: { deliveryPollMs: 600_000 },
      pollIntervalMs: 600_000,
      triggers: { run: false, hookPerIpPerMinute: PER_IP, hookPerTriggerPerMinute: 100_000 },
    });
    a = await accountWithKey(s, "async function main() { return 1; }");
    service = s.relayer.triggers as TriggerService;
    appOnly = http.createServer(s.relayer.app);
    await new Promise<void>((resolve) => appOnly.listen(0, "127.0.0.1", resolve));
    appOnlyUrl = `http://127.0.0.1:${(appOnly.address() as AddressInfo).port}`;
    // Counts every statement through the real data layer the triggers use (nothing is replaced).
    const db: DataLayer = service.store.db;
    for (const method of ["all", "first", "run", "exec", "transaction"] as const) {
      const real = (db[method] as (...args: unknown[]) => unknown).bind(db);
      (db as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        statements++;
        return real(...args);
      };
    }
  });
  after(async () => {
    await new Promise((resolve) => appOnly?.close(resolve));
    await s?.close();
  });

  /** A client address of its own (a fresh per-IP budget). */
  const freshIp = () => `10.9.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;

  async function call(base: string, path: string, ip: string, headers: Record<string, string> = {}) {
    const r = await fetch(base + path, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": ip, ...headers },
      body: "{}",
    });
    const out: Answer = { status: r.status, headers: {}, body: (await r.json()) as Record<string, unknown> };
    r.headers.forEach((v, k) => (out.headers[k] = v));
    return out;
  }

  /** The same call to the relayer (fast path first) and to its app alone: both answers. */
  async function both(path: string, ip: string, headers: Record<string, string> = {}) {
    const fast = await call(s.url, path, ip, headers);
    const slow = await call(appOnlyUrl, path, ip, headers);
    return { fast, slow };
  }

  /** What must be equal: everything but the request's own id (a fresh one in both) and the date. */
  function comparable(x: Answer) {
    expect(x.body.request_id).to.match(/^[0-9a-f-]{36}$/);
    expect(x.headers["x-request-id"]).to.equal(x.body.request_id);
    expect(x.headers["x-correlation-id"]).to.equal(x.body.request_id);
    const headers = { ...x.headers };
    for (const h of ["date", "x-request-id", "x-correlation-id"]) delete headers[h];
    return { status: x.status, headers, body: { ...x.body, request_id: "-" } };
  }

  function expectSame(pair: { fast: Answer; slow: Answer }, status: number, code: string) {
    expect(pair.fast.status).to.equal(status);
    expect((pair.fast.body.error as { code: string }).code).to.equal(code);
    expect(comparable(pair.fast)).to.deep.equal(comparable(pair.slow));
  }

  /** A trigger whose queue (of `max`) this instance has just been told is full. */
  async function fullTrigger(max: number) {
    const t = await createTrigger(s, a, {
      kind: "webhook",
      limits: { max_queued_runs: max, runs_per_minute: 600, concurrency: "parallel" },
    });
    const path = new URL(t.webhook.url as string).pathname;
    for (let i = 0; i < max; i++) expect((await call(s.url, path, freshIp())).status).to.equal(202);
    expect((await call(s.url, path, freshIp())).status).to.equal(429);
    return { t, path };
  }

  it("a malformed hook id: the app's 404", async () => {
    expectSame(await both("/hooks/v1/hk_short", freshIp()), 404, "trigger_not_found");
    expectSame(await both("/hooks/v1/not-a-hook?x=1", freshIp()), 404, "trigger_not_found");
  });

  it("the source over its per-IP limit: the app's 429 rate_limited, counted once per call", async () => {
    const ip = freshIp();
    // Both servers share the relayer's limits: PER_IP calls in all pass the limit, the next is refused.
    for (let i = 0; i < PER_IP; i++)
      expect((await call(i % 2 ? appOnlyUrl : s.url, "/hooks/v1/hk_short", ip)).status).to.equal(404);
    let pair = await both("/hooks/v1/hk_short", ip);
    // Retry-After (and the message) count down in whole seconds: a pair taken across a second's edge
    // differs by one; the next pair cannot cross another edge.
    if (pair.fast.headers["retry-after"] !== pair.slow.headers["retry-after"])
      pair = await both("/hooks/v1/hk_short", ip);
    expectSame(pair, 429, "rate_limited");
    expect(Number(pair.fast.headers["retry-after"])).to.be.at.least(1);
  });

  it("a hook remembered as unknown, disabled or deleted: the app's 404", async () => {
    const unknown = `/hooks/v1/hk_${randomBytes(24).toString("base64url")}`;
    const disabled = await createTrigger(s, a, { kind: "webhook" });
    await s.api("POST", `/core/v1/triggers/${disabled.id}/disable`, { key: a.accountKey, body: {} });
    const deleted = await createTrigger(s, a, { kind: "webhook" });
    await s.api("DELETE", `/core/v1/triggers/${deleted.id}`, { key: a.accountKey });
    for (const path of [
      unknown,
      new URL(disabled.webhook.url as string).pathname,
      new URL(deleted.webhook.url as string).pathname,
    ]) {
      // The first call asks the database (and this instance remembers the answer); then both paths.
      expect((await call(s.url, path, freshIp())).status).to.equal(404);
      const before = statements;
      expectSame(await both(path, freshIp()), 404, "trigger_not_found");
      expect(statements - before, path).to.equal(0);
    }
  });

  it("a known-full trigger: the app's 429 trigger_queue_full, without a database statement", async () => {
    const { path } = await fullTrigger(2);
    expectSame(await both(path, freshIp()), 429, "trigger_queue_full");
    const before = statements;
    const refused = await Promise.all(Array.from({ length: 20 }, () => call(s.url, path, freshIp())));
    expect(refused.map((r) => r.status)).to.deep.equal(Array(20).fill(429));
    expect(statements - before, "statements during 20 refusals").to.equal(0);
  });

  it("what needs the body or the database goes to the app: an HMAC's 401 before a full queue, a re-delivery's run", async () => {
    const t = await createTrigger(s, a, {
      kind: "webhook",
      webhook: { hmac: true },
      limits: { max_queued_runs: 1, runs_per_minute: 600, concurrency: "parallel" },
    });
    const path = new URL(t.webhook.url as string).pathname;
    const signed = {
      "x-sigil-signature": "sha256=" + createHmac("sha256", t.webhook_secret).update("{}").digest("hex"),
    };
    const first = await call(s.url, path, freshIp(), { ...signed, "x-github-delivery": "d-1" });
    expect(first.status).to.equal(202);
    expect((await call(s.url, path, freshIp(), signed)).status).to.equal(429);
    // The queue is known full, yet a wrong signature is judged first, as the app does.
    expectSame(
      await both(path, freshIp(), { "x-sigil-signature": "sha256=00" }),
      401,
      "webhook_signature_invalid",
    );
    // A re-delivery of the stored firing is answered its run, not the full queue's 429.
    const again = await call(s.url, path, freshIp(), { ...signed, "x-github-delivery": "d-1" });
    expect(again.status).to.equal(202);
    expect(again.body.run_id).to.equal(first.body.run_id);
  });

  it("a refusal is answered before its body arrives; the connection then serves the next request", async () => {
    const { path } = await fullTrigger(1);
    const socket = net.connect(Number(new URL(s.url).port), "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    let received = "";
    socket.on("data", (d: Buffer) => (received += d.toString("latin1")));
    const answers = (n: number) =>
      new Promise<void>((resolve, reject) => {
        const until = Date.now() + 10_000;
        const check = () => {
          if ((received.match(/HTTP\/1\.1 /g) ?? []).length >= n) resolve();
          else if (Date.now() > until) reject(new Error(`no answer ${n}: ${received}`));
          else setTimeout(check, 5);
        };
        check();
      });
    const head = (p: string, length: number) =>
      `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Forwarded-For: ${freshIp()}\r\nContent-Length: ${length}\r\n\r\n`;
    // Headers only: the 10 bytes of body announced are held back until the answer is in.
    socket.write(head(path, 10));
    await answers(1);
    expect(received).to.match(/^HTTP\/1\.1 429 /);
    expect(received).to.include("trigger_queue_full");
    // The body arrives late and is discarded; the same connection then carries the next request.
    socket.write('{"x":"12"}' + head("/hooks/v1/hk_short", 2) + "{}");
    await answers(2);
    expect(received.split("HTTP/1.1 ")[2]).to.match(/^404 /);
    expect(socket.destroyed).to.equal(false);
    socket.destroy();
  });

  it("a hook whose queue has room again is accepted", async () => {
    const { t, path } = await fullTrigger(1);
    expect((await call(s.url, path, freshIp())).status).to.equal(429);
    // Runs the queued runs here: the claim tells this instance the queue has room.
    expect(await service.runner.drain()).to.be.at.least(1);
    const r = await call(s.url, path, freshIp());
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    const runs = await s.api("GET", `/core/v1/triggers/${t.id}/runs?status=queued`, { key: a.accountKey });
    expect(runs.body.total).to.equal(1);
  });

  it("one keep-alive connection carries a refused call and then an accepted one", async () => {
    const t = await createTrigger(s, a, { kind: "webhook" });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (path: string) =>
      new Promise<{ status: number; port: number; reused: boolean }>((resolve, reject) => {
        const req = http.request(
          `${s.url}${path}`,
          {
            method: "POST",
            agent,
            headers: { "content-type": "application/json", "x-forwarded-for": freshIp() },
          },
          (res) => {
            res.resume();
            res.on("end", () =>
              resolve({ status: res.statusCode!, port: req.socket!.localPort!, reused: req.reusedSocket }),
            );
          },
        );
        req.on("error", reject);
        req.end(JSON.stringify({ pad: "x".repeat(200) }));
      });
    try {
      const refused = await post("/hooks/v1/hk_short");
      const accepted = await post(new URL(t.webhook.url as string).pathname);
      expect(refused.status).to.equal(404);
      expect(accepted.status).to.equal(202);
      expect(accepted.reused).to.equal(true);
      expect(accepted.port).to.equal(refused.port);
    } finally {
      agent.destroy();
    }
  });
});
