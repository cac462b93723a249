/**
 * Delivery against real receivers: retries until success and no further, a restart in the middle of
 * a retry schedule, a receiver that never answers, redirects, and the address guard at delivery time.
 */
import { expect } from "chai";
import { makeAddressGuard } from "../../enclave";
import { sendOnce } from "../../relayer/webhooks/send";
import type { Stack } from "../helpers/stack";
import { Receiver } from "./receiver";
import { newAccount, register, startWebhookStack } from "./support";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("webhooks: delivery", function () {
  this.timeout(120_000);
  let s: Stack;
  let key: string;
  const receivers: Receiver[] = [];

  async function receiver(): Promise<Receiver> {
    const r = await new Receiver().start();
    receivers.push(r);
    return r;
  }

  async function deliveries(endpointId: string) {
    const r = await s.api("GET", `/core/v1/webhooks/${endpointId}/deliveries`, { key });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.items as Array<{
      status: string;
      attempts: number;
      last_status: number | null;
      last_error: string | null;
    }>;
  }

  async function createPkp(): Promise<void> {
    const r = await s.api("POST", "/core/v1/pkps/create", { key, body: { name: "p" } });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
  }

  before(async () => {
    s = await startWebhookStack();
    ({ key } = await newAccount(s));
  });
  after(async () => {
    for (const r of receivers) await r.close();
    await s?.close();
  });
  afterEach(async () => {
    // Each test's endpoints go away, so later tests' events do not reach earlier receivers.
    const list = await s.api("GET", "/core/v1/webhooks", { key });
    for (const e of list.body.items) await s.api("DELETE", `/core/v1/webhooks/${e.id}`, { key });
  });

  it("a receiver answering 500 three times, then 200, gets exactly 4 attempts and then no more", async () => {
    const r = await receiver();
    r.behaviour = (n) => ({ status: n <= 3 ? 500 : 200 });
    const hook = await register(s, key, r.url, ["pkp.created"]);
    await createPkp();
    await r.until(() => r.received.length >= 4);
    await sleep(3_000); // longer than the schedule's largest wait (1 s) several times over
    expect(r.received.length).to.equal(4);
    expect(new Set(r.received.map((x) => x.body)).size).to.equal(1);
    const [d] = await deliveries(hook.id);
    expect(d).to.include({ status: "succeeded", attempts: 4, last_status: 200, last_error: null });
  });

  it("a restart of the relayer in the middle of a retry schedule loses nothing", async () => {
    const r = await receiver();
    r.behaviour = (n) => ({ status: n <= 2 ? 503 : 200 });
    const hook = await register(s, key, r.url, ["pkp.created"]);
    await createPkp();
    await r.until(() => r.received.length >= 1);
    // Restart between attempts: once the first failure is recorded and its retry is scheduled.
    for (let i = 0; i < 100 && !((await deliveries(hook.id))[0]?.attempts >= 1); i++) await sleep(50);
    await s.restartRelayer();
    await r.until(() => r.received.length >= 3);
    await sleep(1_500);
    expect(r.received.length).to.equal(3);
    const [d] = await deliveries(hook.id);
    expect(d).to.include({ status: "succeeded", attempts: 3, last_status: 200 });
  });

  it("a graceful restart lets an attempt already sent finish and records it: the receiver is not sent it again", async () => {
    const r = await receiver();
    r.behaviour = () => "hang";
    const hook = await register(s, key, r.url, ["pkp.created"]);
    await createPkp();
    await r.until(() => r.hanging.size >= 1);
    const restarting = s.restartRelayer();
    await sleep(200); // the stop is waiting on the attempt in flight
    for (const res of r.hanging) res.writeHead(200).end("ok");
    await restarting;
    await sleep(1_500);
    expect(r.received.length).to.equal(1);
    const [d] = await deliveries(hook.id);
    expect(d).to.include({ status: "succeeded", attempts: 1, last_status: 200 });
  });

  it("a receiver that never answers does not hold up API requests", async () => {
    const r = await receiver();
    r.behaviour = () => "hang";
    const hook = await register(s, key, r.url, ["pkp.created"]);
    await createPkp();
    await r.until(() => r.hanging.size >= 1);
    // While the delivery hangs, the API answers writes and reads.
    for (let i = 0; i < 3; i++) await createPkp();
    expect((await s.api("GET", "/core/v1/pkps", { key })).status).to.equal(200);
    expect(r.hanging.size).to.be.greaterThan(0);
    // The attempt ends at its timeout and is recorded as a failure to retry.
    let logged: Awaited<ReturnType<typeof deliveries>>[number] | undefined;
    for (let i = 0; i < 100 && !logged; i++) {
      logged = (await deliveries(hook.id)).find((d) => d.attempts > 0);
      if (!logged) await sleep(100);
    }
    expect(logged?.last_error).to.equal("no answer within 2000 ms");
  });

  it("a redirect is not followed: 3xx is a failed attempt", async () => {
    const target = await receiver();
    const r = await receiver();
    r.behaviour = () => ({ status: 302, location: target.url });
    const hook = await register(s, key, r.url, ["pkp.created"]);
    await createPkp();
    await r.until(() => r.received.length >= 1);
    await sleep(500);
    expect(target.received).to.have.length(0);
    const [d] = await deliveries(hook.id);
    expect(d).to.include({ status: "pending", last_status: 302 });
    expect(d.last_error).to.equal(`redirect to ${target.url} not followed`);
  });

  it("at delivery time, a name that now resolves to loopback is refused before any connection", async () => {
    const r = await receiver();
    const port = new URL(r.url).port;
    const result = await sendOnce(`http://localhost:${port}/hook`, {}, "{}", {
      guard: makeAddressGuard([]),
      timeoutMs: 2_000,
      maxResponseBytes: 4_096,
    });
    expect(result.ok).to.equal(false);
    expect(result.error).to.match(/localhost resolves to (127\.0\.0\.1|::1), a loopback address/);
    expect(r.received).to.have.length(0);
  });

  it("at delivery time, a loopback IP literal is refused before any connection", async () => {
    const r = await receiver();
    const result = await sendOnce(r.url, {}, "{}", {
      guard: makeAddressGuard([]),
      timeoutMs: 2_000,
      maxResponseBytes: 4_096,
    });
    expect(result).to.deep.equal({
      ok: false,
      status: null,
      error: "127.0.0.1 is a loopback address, which deliveries never go to",
    });
    expect(r.received).to.have.length(0);
  });
});
