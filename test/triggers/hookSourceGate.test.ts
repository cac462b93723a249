/**
 * The hooks' own listener refuses a source over its per-IP budget at the socket
 * (relayer/triggers/hookSourceGate.ts) on a real stack, no proxy in front: the call the budget refuses
 * closes its keep-alive connection; the source's next connections get the fixed 429 without their
 * bytes being parsed (bytes that are not HTTP get it too) and without reaching the main thread; another
 * address is served; the refused calls stored nothing.
 */
import * as http from "node:http";
import * as net from "node:net";
import { expect } from "chai";
import type { HookListener } from "../../relayer/triggers/hookListener";
import { startStack, type Stack } from "../helpers/stack";
import { accountWithKey, createTrigger } from "./helpers";

const PER_IP = 3;

describe("triggers: the hooks' listener refuses a source over its budget at the socket", function () {
  this.timeout(120_000);
  let s: Stack;
  let hooks: HookListener;

  before(async () => {
    s = await startStack({
      triggers: { hooksPort: 0, run: false, hookPerIpPerMinute: PER_IP, hookPerTriggerPerMinute: 1_000 },
    });
    hooks = s.relayer.hooks!;
  });
  after(async () => {
    await s?.close();
  });

  /** One POST on `agent`'s connections: the status, the headers and the body. */
  function post(url: string, agent: http.Agent, delivery: string) {
    return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>(
      (resolve, reject) => {
        const req = http.request(
          url,
          {
            method: "POST",
            agent,
            headers: { "content-type": "application/json", "x-github-delivery": delivery },
          },
          (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (body += c));
            res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
          },
        );
        req.on("error", reject);
        req.end("{}");
      },
    );
  }

  /** Raw bytes on a fresh connection (from `localAddress`): everything the listener answers until it closes. */
  function raw(port: number, bytes: string, localAddress = "127.0.0.1") {
    return new Promise<string>((resolve, reject) => {
      const socket = net.connect({ port, host: "127.0.0.1", localAddress }, () => socket.write(bytes));
      let got = "";
      socket.setEncoding("utf8");
      socket.on("data", (c: string) => (got += c));
      socket.on("close", () => resolve(got));
      socket.on("error", reject);
      socket.setTimeout(10_000, () => socket.destroy(new Error("no answer")));
    });
  }

  it("past the budget: Connection: close, then 429 at accept for any bytes, another address still served", async () => {
    const a = await accountWithKey(s, "async function main() { return 1; }");
    const t = await createTrigger(s, a, { kind: "webhook", limits: { max_queued_runs: 20 } });
    const url: string = t.webhook.url;
    const { pathname } = new URL(url);
    expect(url.startsWith(hooks.origin)).to.equal(true);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < PER_IP; i++) {
        const r = await post(url, agent, `d-${i}`);
        expect(r.status, r.body).to.equal(202);
        expect(r.headers.connection).to.equal("keep-alive");
      }
      const over = await post(url, agent, "d-over");
      expect(over.status, over.body).to.equal(429);
      expect(JSON.parse(over.body).error.code).to.equal("rate_limited");
      expect(over.headers.connection, "the refused source must come back through the gate").to.equal("close");
    } finally {
      agent.destroy();
    }

    const handed = hooks.handed.calls;
    const request = `POST ${pathname} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
    const atAccept = await raw(hooks.port, request);
    expect(atAccept).to.match(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
    expect(atAccept).to.match(/\r\nConnection: close\r\n/);
    expect(atAccept).to.match(/\r\nRetry-After: \d+\r\n/);
    const body = JSON.parse(atAccept.slice(atAccept.indexOf("\r\n\r\n") + 4));
    expect(body.error.code).to.equal("rate_limited");
    // Not HTTP at all: a parser would answer 400; the gate never parses, so it is the same 429.
    expect(await raw(hooks.port, "\x00\x01 not http \r\n\r\n")).to.match(/^HTTP\/1\.1 429 /);
    expect(hooks.handed.calls, "nothing reached the main thread").to.equal(handed);

    // Another address (loopback's 127.0.0.2) has a budget of its own and is parsed and served.
    const other = await raw(
      hooks.port,
      request.replace("Host: x", "Host: x\r\nConnection: close"),
      "127.0.0.2",
    );
    expect(other).to.match(/^HTTP\/1\.1 202 /);

    // Only the calls within the budget were stored.
    const runs = await s.api("GET", `/core/v1/triggers/${t.id}/runs?page_size=100`, { key: a.accountKey });
    expect(runs.body.total).to.equal(PER_IP + 1);
  });
});
