/**
 * The cluster's round-robin front (scripts/cluster/balancer.ts) against real HTTP servers standing in
 * for instances: it takes turns, passes bodies and headers through untouched both ways, routes around
 * an instance that refuses connections (and marks it down), and answers typed errors when no instance
 * accepts (503) or one drops a request it had received (502).
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { startBalancer, type RunningBalancer } from "../../scripts/cluster/balancer";
import { freePort } from "../../scripts/start/anvil";

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A stand-in instance that echoes what it received and names itself in a header. */
async function fakeInstance(name: string, seen: Seen[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString();
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (req.url === "/drop") {
        req.socket.destroy();
        return;
      }
      res.writeHead(201, { "x-instance": name, "x-custom": "v1", "set-cookie": ["a=1", "b=2"] });
      res.end(`${name}:${body}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

async function send(url: string, init: RequestInit = {}) {
  const r = await fetch(url, init);
  return { status: r.status, headers: r.headers, text: await r.text() };
}

describe("cluster: the round-robin front", function () {
  const seen: Seen[] = [];
  let a: Awaited<ReturnType<typeof fakeInstance>>;
  let b: Awaited<ReturnType<typeof fakeInstance>>;
  let front: RunningBalancer;
  let deadUrl: string;

  beforeEach(async () => {
    seen.length = 0;
    a = await fakeInstance("a", seen);
    b = await fakeInstance("b", seen);
    deadUrl = `http://127.0.0.1:${await freePort()}`; // nothing listens there
  });
  afterEach(async () => {
    await front?.close();
    await a.close();
    await b.close();
  });

  it("sends requests to the instances in turn", async () => {
    front = await startBalancer({
      port: 0,
      backends: [
        { id: "a", url: a.url },
        { id: "b", url: b.url },
      ],
    });
    const names = [];
    for (let i = 0; i < 4; i++) names.push((await send(`${front.url}/x`)).headers.get("x-instance"));
    expect(names).to.deep.equal(["a", "b", "a", "b"]);
  });

  it("passes the method, path, query, headers and body through untouched, and the answer back", async () => {
    front = await startBalancer({ port: 0, backends: [{ id: "a", url: a.url }] });
    const body = JSON.stringify({ code: "async function main() {}", ünïcödé: [1, 2] });
    const r = await send(`${front.url}/core/v1/svc_action?page_number=1&x=%2F`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "sigil-signature": "0xabc",
        "idempotency-key": "k-1",
        "x-api-key": "ak_123",
      },
      body,
    });
    expect(seen).to.have.length(1);
    expect(seen[0]).to.include({ method: "POST", url: "/core/v1/svc_action?page_number=1&x=%2F", body });
    expect(seen[0].headers).to.include({
      "content-type": "application/json",
      "sigil-signature": "0xabc",
      "idempotency-key": "k-1",
      "x-api-key": "ak_123",
      "content-length": String(Buffer.byteLength(body)),
    });
    expect(seen[0].headers).to.not.have.property("x-forwarded-for");
    expect(r.status).to.equal(201);
    expect(r.text).to.equal(`a:${body}`);
    expect(r.headers.get("x-custom")).to.equal("v1");
    expect(r.headers.getSetCookie()).to.deep.equal(["a=1", "b=2"]);
  });

  it("routes around an instance that refuses connections and marks it down", async () => {
    front = await startBalancer({
      port: 0,
      backends: [
        { id: "dead", url: deadUrl },
        { id: "a", url: a.url },
      ],
    });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await send(`${front.url}/x`, { method: "POST", body: `n${i}` }));
    expect(answers.map((r) => [r.status, r.text])).to.deep.equal([
      [201, "a:n0"],
      [201, "a:n1"],
      [201, "a:n2"],
      [201, "a:n3"],
    ]);
    expect(front.down()).to.deep.equal(["dead"]);
  });

  it("no instance accepting: 503 no_instance_available with Retry-After", async () => {
    front = await startBalancer({ port: 0, backends: [{ id: "dead", url: deadUrl }] });
    const r = await send(`${front.url}/core/v1/account`);
    expect(r.status).to.equal(503);
    expect(r.headers.get("retry-after")).to.equal("1");
    expect(JSON.parse(r.text).error.code).to.equal("no_instance_available");
  });

  it("an instance that drops a request it received: 502 instance_connection_lost, not sent elsewhere", async () => {
    front = await startBalancer({
      port: 0,
      backends: [
        { id: "a", url: a.url },
        { id: "b", url: b.url },
      ],
    });
    const r = await send(`${front.url}/drop`, { method: "POST", body: "once" });
    expect(r.status).to.equal(502);
    expect(JSON.parse(r.text).error.code).to.equal("instance_connection_lost");
    expect(seen.map((s) => s.body)).to.deep.equal(["once"]);
  });
});
