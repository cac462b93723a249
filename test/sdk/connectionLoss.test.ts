/**
 * The SDK's writes are exactly once without the caller thinking about it (sdk/transport.ts): every
 * call carries one Idempotency-Key, reused on each retry, and a lost connection, where the client
 * cannot know whether the write happened, is retried with it: the service answers from what the first
 * attempt did. The real relayer sits behind a front that cuts chosen connections after the service
 * answered (the answer never reaches the client).
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { createSigil } from "sigil/sdk";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

interface Attempt {
  key: string | undefined;
  cut: boolean;
}

/** Forwards to `target`; `cut(n)` for the n-th pkps/create: the service answers, the client never hears. */
async function cuttingFront(target: string, cut: (n: number) => "after" | "in_flight" | null) {
  const attempts: Attempt[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const create = req.method === "POST" && req.url === "/core/v1/pkps/create";
      const what = create ? cut(attempts.length) : null;
      if (create) attempts.push({ key: req.headers["idempotency-key"] as string, cut: what === "after" });
      if (what === "in_flight") {
        const body = {
          error: { code: "idempotency_key_in_flight", message: "running" },
          request_id: "front",
        };
        res
          .writeHead(409, { "content-type": "application/json", "retry-after": "0" })
          .end(JSON.stringify(body));
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers))
        if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) headers[k] = v;
      const r = await fetch(target + req.url, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      const out = Buffer.from(await r.arrayBuffer());
      if (what === "after") {
        req.socket.destroy(); // the write happened; its answer is lost with the connection
        return;
      }
      const h: Record<string, string> = {};
      r.headers.forEach((v, k) => {
        if (!["content-length", "connection", "keep-alive", "transfer-encoding"].includes(k)) h[k] = v;
      });
      res.writeHead(r.status, h).end(out);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    attempts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("SDK transport: exactly-once writes across a lost connection", function () {
  this.timeout(120_000);
  let s: Stack;
  let accountKey: string;

  before(async () => {
    s = await startStack();
    accountKey = (await setupAccount(s)).accountKey;
  });
  after(async () => {
    await s?.close();
  });

  const pkpCount = async () =>
    (await s.api("GET", "/core/v1/pkps", { key: accountKey })).body.total as number;

  it("a write whose answer was lost is retried with the same Idempotency-Key and happens once", async () => {
    const front = await cuttingFront(s.url, (n) => (n === 0 ? "after" : null));
    try {
      const before = await pkpCount();
      const pkp = await createSigil({ baseUrl: front.url, apiKey: accountKey, baseDelayMs: 10 }).createPkp({
        name: "lost answer",
      });
      expect(front.attempts.map((a) => a.cut)).to.deep.equal([true, false]);
      expect(front.attempts[0].key).to.be.a("string");
      expect(front.attempts[1].key).to.equal(front.attempts[0].key);
      expect(pkp.pkp_id).to.match(/^0x[0-9a-f]{64}$/);
      expect(await pkpCount()).to.equal(before + 1);
    } finally {
      await front.close();
    }
  });

  it("409 idempotency_key_in_flight is waited out, then the write happens once", async () => {
    const front = await cuttingFront(s.url, (n) => (n === 0 ? "in_flight" : null));
    try {
      const before = await pkpCount();
      await createSigil({ baseUrl: front.url, apiKey: accountKey, baseDelayMs: 10 }).createPkp({
        name: "waited",
      });
      expect(front.attempts).to.have.length(2);
      expect(front.attempts[1].key).to.equal(front.attempts[0].key);
      expect(await pkpCount()).to.equal(before + 1);
    } finally {
      await front.close();
    }
  });
});
