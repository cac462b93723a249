import { expect } from "chai";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { computeCid, ContentStore, GatewayClient } from "../../enclave";
import { expectEnclaveRejection } from "./helpers";

const utf8 = (s: string) => new TextEncoder().encode(s);
const HELLO = utf8("hello world\n");
const HELLO_V0 = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
const HELLO_V1 = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4";

describe("enclave content store", function () {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), "sigil-store-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("put returns the CIDv0 and get returns the bytes", async function () {
    const store = new ContentStore(dir);
    expect(await store.put(HELLO)).to.equal(HELLO_V0);
    expect(Buffer.from((await store.get(HELLO_V0))!).toString()).to.equal("hello world\n");
  });

  it("has() reflects what was stored", async function () {
    const store = new ContentStore(dir);
    expect(await store.has(HELLO_V0)).to.equal(false);
    await store.put(HELLO);
    expect(await store.has(HELLO_V0)).to.equal(true);
  });

  it("get of an unknown CID is null", async function () {
    expect(await new ContentStore(dir).get(HELLO_V0)).to.equal(null);
  });

  it("put is idempotent and leaves no temporary files", async function () {
    const store = new ContentStore(dir);
    await store.put(HELLO);
    await store.put(HELLO);
    expect(readdirSync(dir)).to.deep.equal([HELLO_V0]);
  });

  it("a multi-chunk file round-trips", async function () {
    const store = new ContentStore(dir, { maxBytes: 1 << 20 });
    const bytes = new Uint8Array(600_000).map((_, i) => i % 253);
    const cid = await store.put(bytes);
    expect(cid).to.equal(await computeCid(bytes));
    expect(Buffer.compare(Buffer.from((await store.get(cid))!), Buffer.from(bytes))).to.equal(0);
  });

  it("bytes corrupted on disk are refused with cid_mismatch", async function () {
    const store = new ContentStore(dir);
    await store.put(HELLO);
    writeFileSync(path.join(dir, HELLO_V0), "hello world!\n");
    await expectEnclaveRejection(store.get(HELLO_V0), "cid_mismatch");
  });

  it("a file truncated on disk is refused with cid_mismatch", async function () {
    const store = new ContentStore(dir);
    await store.put(HELLO);
    writeFileSync(path.join(dir, HELLO_V0), "");
    await expectEnclaveRejection(store.get(HELLO_V0), "cid_mismatch");
  });

  it("content over maxBytes is refused with content_too_large", async function () {
    await expectEnclaveRejection(new ContentStore(dir, { maxBytes: 10 }).put(HELLO), "content_too_large");
  });

  it("an invalid CID is refused with invalid_cid (no path traversal)", async function () {
    const store = new ContentStore(dir);
    await expectEnclaveRejection(store.get("../../etc/passwd"), "invalid_cid");
    await expectEnclaveRejection(store.has("../x"), "invalid_cid");
  });

  it("a non-bytes put is refused with invalid_content", async function () {
    await expectEnclaveRejection(new ContentStore(dir).put("text" as never), "invalid_content");
  });

  it("creates its directory on first put", async function () {
    const sub = path.join(dir, "a", "b");
    await new ContentStore(sub).put(HELLO);
    expect(statSync(sub).isDirectory()).to.equal(true);
  });
});

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

async function serve(
  handler: Handler,
): Promise<{ url: string; close: () => Promise<void>; hits: () => number }> {
  let hits = 0;
  const server = http.createServer((req, res) => {
    hits++;
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits: () => hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A gateway serving `files` (cid → bytes) at /ipfs/<cid>. */
const gatewayFor =
  (files: Record<string, Uint8Array>): Handler =>
  (req, res) => {
    const cid = req.url?.replace(/^\/ipfs\//, "") ?? "";
    const body = files[cid];
    if (!body) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": "application/octet-stream" }).end(Buffer.from(body));
  };

describe("enclave gateway client", function () {
  const servers: Array<{ close: () => Promise<void> }> = [];
  const start = async (h: Handler) => {
    const s = await serve(h);
    servers.push(s);
    return s;
  };
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it("accepts correct bytes from an honest gateway (CIDv0)", async function () {
    const gw = await start(gatewayFor({ [HELLO_V0]: HELLO }));
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 2000 });
    expect(Buffer.from(await client.fetch(HELLO_V0)).toString()).to.equal("hello world\n");
  });

  it("accepts correct bytes for a CIDv1", async function () {
    const gw = await start(gatewayFor({ [HELLO_V1]: HELLO }));
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 2000 });
    expect(Buffer.from(await client.fetch(HELLO_V1)).toString()).to.equal("hello world\n");
  });

  it("accepts a multi-chunk file for its CIDv1 dag-pb root", async function () {
    const bytes = new Uint8Array(300_000).map((_, i) => (i * 13) % 256);
    const cid = await computeCid(bytes, { version: 1 });
    const gw = await start(gatewayFor({ [cid]: bytes }));
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1 << 20, timeoutMs: 5000 });
    expect((await client.fetch(cid)).length).to.equal(300_000);
  });

  it("refuses wrong bytes with cid_mismatch", async function () {
    const gw = await start(gatewayFor({ [HELLO_V0]: utf8("evil code\n") }));
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 2000 });
    await expectEnclaveRejection(client.fetch(HELLO_V0), "cid_mismatch");
  });

  it("falls through a lying gateway to an honest one, in order", async function () {
    const liar = await start(gatewayFor({ [HELLO_V0]: utf8("evil code\n") }));
    const honest = await start(gatewayFor({ [HELLO_V0]: HELLO }));
    const client = new GatewayClient({ gateways: [liar.url, honest.url], maxBytes: 1024, timeoutMs: 2000 });
    expect(Buffer.from(await client.fetch(HELLO_V0)).toString()).to.equal("hello world\n");
  });

  it("does not ask the second gateway when the first answers correctly", async function () {
    const first = await start(gatewayFor({ [HELLO_V0]: HELLO }));
    const second = await start(gatewayFor({ [HELLO_V0]: HELLO }));
    const client = new GatewayClient({ gateways: [first.url, second.url], maxBytes: 1024, timeoutMs: 2000 });
    await client.fetch(HELLO_V0);
    expect([first.hits(), second.hits()]).to.deep.equal([1, 0]);
  });

  it("times out a slow gateway with gateway_timeout", async function () {
    const gw = await start((_req, res) => {
      res.writeHead(200);
      res.write("hello"); // then never finishes
    });
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 200 });
    const t0 = Date.now();
    await expectEnclaveRejection(client.fetch(HELLO_V0), "gateway_timeout");
    expect(Date.now() - t0).to.be.below(2000);
  });

  it("times out a gateway that never sends headers", async function () {
    const gw = await start(() => undefined);
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 200 });
    await expectEnclaveRejection(client.fetch(HELLO_V0), "gateway_timeout");
  });

  it("refuses a declared oversized body with content_too_large", async function () {
    const big = new Uint8Array(5000);
    const gw = await start((_req, res) =>
      res.writeHead(200, { "content-length": String(big.length) }).end(Buffer.from(big)),
    );
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 2000 });
    await expectEnclaveRejection(client.fetch(HELLO_V0), "content_too_large");
  });

  it("refuses an oversized chunked body (no content-length) with content_too_large", async function () {
    const gw = await start((_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < 10; i++) res.write(Buffer.alloc(512));
      res.end();
    });
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 2000 });
    await expectEnclaveRejection(client.fetch(HELLO_V0), "content_too_large");
  });

  it("reports content_not_found when every gateway answers 404", async function () {
    const gw = await start(gatewayFor({}));
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 2000 });
    await expectEnclaveRejection(client.fetch(HELLO_V0), "content_not_found");
  });

  it("reports gateway_error for a 500 and for a closed port", async function () {
    const gw = await start((_req, res) => res.writeHead(500).end());
    const dead = await serve(gatewayFor({}));
    await dead.close();
    const client = new GatewayClient({ gateways: [gw.url, dead.url], maxBytes: 1024, timeoutMs: 2000 });
    const err = await expectEnclaveRejection(client.fetch(HELLO_V0), "gateway_error");
    expect(err.details).to.include(gw.url);
    expect(err.details).to.include(dead.url);
  });

  it("prefers cid_mismatch over a timeout when gateways fail differently", async function () {
    const liar = await start(gatewayFor({ [HELLO_V0]: utf8("evil\n") }));
    const slow = await start(() => undefined);
    const client = new GatewayClient({ gateways: [slow.url, liar.url], maxBytes: 1024, timeoutMs: 200 });
    await expectEnclaveRejection(client.fetch(HELLO_V0), "cid_mismatch");
  });

  it("refuses an invalid CID before any request", async function () {
    const gw = await start(gatewayFor({}));
    const client = new GatewayClient({ gateways: [gw.url], maxBytes: 1024, timeoutMs: 2000 });
    await expectEnclaveRejection(client.fetch("../admin"), "invalid_cid");
    expect(gw.hits()).to.equal(0);
  });

  it("requests /ipfs/<canonical cid> under a gateway's path prefix", async function () {
    let seen = "";
    const gw = await start((req, res) => {
      seen = req.url ?? "";
      res.writeHead(200).end(Buffer.from(HELLO));
    });
    const client = new GatewayClient({ gateways: [gw.url + "/prefix/"], maxBytes: 1024, timeoutMs: 2000 });
    await client.fetch(HELLO_V0);
    expect(seen).to.equal(`/prefix/ipfs/${HELLO_V0}`);
  });

  it("refuses a configuration without gateways or with a non-http URL", function () {
    expect(() => new GatewayClient({ gateways: [], maxBytes: 1, timeoutMs: 1 })).to.throw(RangeError);
    expect(() => new GatewayClient({ gateways: ["file:///etc"], maxBytes: 1, timeoutMs: 1 })).to.throw(
      RangeError,
    );
  });
});
