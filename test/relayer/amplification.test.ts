/**
 * No request is an amplifier: unknown keys and PKP ids cost the chain at most one call per distinct value
 * (the permission cache remembers misses, bounded, for a TTL), every /core/v1 request is counted per IP
 * before authentication, and a key or PKP that appears on chain is usable at once all the same (the event
 * drops the remembered miss). An expired key the relayer never cached is told apart from an unknown one.
 *
 * The relayers under test talk to anvil through a counting JSON-RPC proxy (a real HTTP server in this
 * file), so the assertions are about the calls the chain actually received.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { eventually } from "../../testkit/eventually";
import { AbiCoder, keccak256, Wallet, ZeroAddress } from "ethers";
import { startRelayer, type RelayerOptions } from "../../relayer";
import { resolveConfig } from "../../relayer/config";
import { AccountRegistry__factory } from "../../typechain-types";
import { DEV_KEYS } from "../helpers/anvil";
import { quietLogger, startStack, type Stack } from "../helpers/stack";

const POLL_MS = 200;

/**
 * Waits until the relayer's poller has processed `block` (GET /health's public last_processed_block):
 * what "within one poll" means, without a wall-clock bound that a loaded machine would break.
 */
async function processed(r: { api: ProxiedRelayer["api"] }, block: number): Promise<void> {
  await eventually(async () => Number((await r.api("GET", "/health")).body.last_processed_block) >= block, {
    what: `the relayer to process block ${block}`,
  });
}

/** A JSON-RPC proxy that counts the requests it forwards, by method (batches counted per entry). */
interface CountingProxy {
  url: string;
  count(method: string): number;
  close(): Promise<void>;
}

async function countingProxy(upstream: string): Promise<CountingProxy> {
  const counts = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      try {
        const parsed = JSON.parse(body) as { method?: string } | { method?: string }[];
        for (const m of Array.isArray(parsed) ? parsed : [parsed]) {
          const name = String(m.method);
          counts.set(name, (counts.get(name) ?? 0) + 1);
        }
      } catch {
        // Forwarded as is; the node answers the parse error.
      }
      fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body }).then(
        async (r) => {
          res.writeHead(r.status, { "content-type": "application/json" });
          res.end(await r.text());
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    count: (method) => counts.get(method) ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface Reply {
  status: number;
  body: { error?: { code: string; details?: Record<string, unknown> } } & Record<string, unknown>;
  headers: Headers;
}

interface ProxiedRelayer {
  api(
    method: string,
    route: string,
    key?: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Reply>;
  close(): Promise<void>;
}

const randomHex = (bytes: number) => crypto.randomBytes(bytes).toString("hex");

describe("relayer: no request is an amplifier", function () {
  this.timeout(180_000);
  let s: Stack;
  let proxy: CountingProxy;
  const running: ProxiedRelayer[] = [];

  before(async () => {
    s = await startStack({ pollIntervalMs: POLL_MS });
    proxy = await countingProxy(s.chain.rpcUrl);
  });
  after(async () => {
    for (const r of running) await r.close().catch(() => undefined);
    await proxy?.close();
    await s?.close();
  });

  /** A relayer of the stack's deployment and enclave, reading the chain through the counting proxy. */
  async function relayerBehindProxy(over: Partial<RelayerOptions>): Promise<ProxiedRelayer> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-amplification-"));
    const relayer = await startRelayer({
      ...s.relayerOptions,
      rpcUrl: proxy.url,
      dataDir,
      port: 0,
      logger: quietLogger(),
      ...over,
    });
    const r: ProxiedRelayer = {
      async api(method, route, key, body, headers = {}) {
        const h: Record<string, string> = { ...headers };
        if (key !== undefined) h["x-api-key"] = key;
        if (body !== undefined) h["content-type"] = "application/json";
        const res = await fetch(relayer.url + route, {
          method,
          headers: h,
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as Reply["body"], headers: res.headers };
      },
      async close() {
        await relayer.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      },
    };
    running.push(r);
    return r;
  }

  describe("a flood of unknown keys and PKP ids", () => {
    const PER_IP_PER_MINUTE = 400;
    let r: ProxiedRelayer;
    let startedMs: number;

    before(async () => {
      r = await relayerBehindProxy({
        rateLimits: { perIpPerMinute: PER_IP_PER_MINUTE },
        unknownTtlMs: 60_000,
      });
      startedMs = Date.now();
    });

    it("costs at most one eth_call per distinct key, however often each is sent", async () => {
      // 40 usage keys and 20 account keys, each sent 5 times: 300 requests, under the per-IP burst (400),
      // so every one is admitted and reaches authentication.
      const keys = [
        ...Array.from({ length: 40 }, () => `uk_${randomHex(32)}`),
        ...Array.from({ length: 20 }, () => `ak_${randomHex(32)}`),
      ];
      const before = proxy.count("eth_call");
      for (let round = 0; round < 5; round++) {
        const replies = await Promise.all(keys.map((k) => r.api("GET", "/core/v1/pkps", k)));
        for (const reply of replies) expect(reply.body.error?.code).to.equal("unknown_api_key");
      }
      // Bound: one eth_call per distinct key (60): the first request of each key asks the chain (a
      // simulated owner-only call for a usage key, accountOfMasterKey for an account key); the four
      // repeats are answered from the remembered miss. Without it, this flood costs 300.
      expect(proxy.count("eth_call") - before).to.be.at.most(keys.length);
    });

    it("costs one eth_call for one unknown key sent many times at once", async () => {
      const key = `uk_${randomHex(32)}`;
      const before = proxy.count("eth_call");
      const replies = await Promise.all(Array.from({ length: 20 }, () => r.api("GET", "/core/v1/pkps", key)));
      for (const reply of replies) expect(reply.body.error?.code).to.equal("unknown_api_key");
      // Bound: concurrent lookups of one value share one chain call.
      expect(proxy.count("eth_call") - before).to.equal(1);
    });

    it("costs at most one eth_call per distinct PKP id on the public GET /pkps/:id", async () => {
      const ids = Array.from({ length: 30 }, () => `0x${randomHex(32)}`);
      const before = proxy.count("eth_call");
      for (let round = 0; round < 2; round++) {
        const replies = await Promise.all(ids.map((id) => r.api("GET", `/core/v1/pkps/${id}`)));
        for (const reply of replies) expect(reply.body.error?.code).to.equal("pkp_not_found");
      }
      // Bound: one getPkp per distinct id (30); the 30 repeats are answered from memory.
      expect(proxy.count("eth_call") - before).to.be.at.most(ids.length);
    });

    it("beyond the per-IP limit, new keys cost nothing: 429 before authentication", async () => {
      // 380 requests so far from this IP (300 + 20 + 60) of a burst of 400: of 200 new distinct keys, only
      // the bucket's remainder plus its refill (400 a minute, ~6.7 a second) get through.
      const keys = Array.from({ length: 200 }, () => `uk_${randomHex(32)}`);
      const before = proxy.count("eth_call");
      const replies = await Promise.all(keys.map((k) => r.api("GET", "/core/v1/pkps", k)));
      const elapsedS = (Date.now() - startedMs) / 1000;
      const admitted = replies.filter((x) => x.status === 401);
      const limited = replies.filter((x) => x.status === 429);
      expect(admitted.length + limited.length).to.equal(keys.length);
      for (const x of limited) {
        expect(x.body.error?.code).to.equal("rate_limited");
        expect(Number(x.headers.get("retry-after"))).to.be.at.least(1);
      }
      // Bound: what is left of the burst (400 - 380 = 20), plus the refill since this relayer
      // started (the first floods included), plus one for rounding; each admitted key costs at most one
      // eth_call, each refused one none.
      const refill = Math.ceil((elapsedS * PER_IP_PER_MINUTE) / 60) + 1;
      expect(admitted.length).to.be.at.most(PER_IP_PER_MINUTE - 380 + refill);
      expect(proxy.count("eth_call") - before).to.be.at.most(admitted.length);
    });
  });

  describe("the per-IP limit", () => {
    it("answers 429 rate_limited with Retry-After once the IP's budget is spent, without asking the chain", async () => {
      const r = await relayerBehindProxy({ rateLimits: { perIpPerMinute: 3 } });
      for (let i = 0; i < 3; i++)
        expect((await r.api("GET", "/core/v1/pkps", `uk_${randomHex(32)}`)).status).to.equal(401);
      const before = proxy.count("eth_call");
      const refused = await r.api("GET", "/core/v1/pkps", `uk_${randomHex(32)}`);
      expect(refused.status).to.equal(429);
      expect(refused.body.error?.code).to.equal("rate_limited");
      expect(refused.body.error?.details).to.deep.equal({ limit: 3, scope: "ip" });
      // 3 a minute: a token is back in 20 s.
      expect(refused.headers.get("retry-after")).to.equal("20");
      expect(proxy.count("eth_call")).to.equal(before);
    });

    it("also limits the public GET /pkps/:id", async () => {
      const r = await relayerBehindProxy({ rateLimits: { perIpPerMinute: 2 } });
      const id = `0x${randomHex(32)}`;
      expect((await r.api("GET", `/core/v1/pkps/${id}`)).status).to.equal(404);
      expect((await r.api("GET", `/core/v1/pkps/${id}`)).status).to.equal(404);
      expect((await r.api("GET", `/core/v1/pkps/${id}`)).body.error?.code).to.equal("rate_limited");
    });

    it("ignores X-Forwarded-For by default (a client cannot pick a fresh address)", async () => {
      const r = await relayerBehindProxy({ rateLimits: { perIpPerMinute: 1 } });
      expect((await r.api("GET", "/core/v1/config")).status).to.equal(200);
      const forged = await r.api("GET", "/core/v1/config", undefined, undefined, {
        "x-forwarded-for": "203.0.113.7",
      });
      expect(forged.body.error?.code).to.equal("rate_limited");
    });

    it("refuses to trust every proxy hop (a client could then name its own address)", () => {
      expect(() => resolveConfig({ ...s.relayerOptions, trustProxy: true as unknown as string })).to.throw(
        /trustProxy must be false, a number of proxy hops, or a list of proxy addresses/,
      );
    });

    it("counts the forwarded client address when the proxy in front is trusted", async () => {
      const r = await relayerBehindProxy({ rateLimits: { perIpPerMinute: 1 }, trustProxy: "loopback" });
      const as = (ip: string) =>
        r.api("GET", "/core/v1/config", undefined, undefined, { "x-forwarded-for": ip });
      expect((await as("203.0.113.7")).status).to.equal(200);
      expect((await as("203.0.113.8")).status).to.equal(200);
      expect((await as("203.0.113.7")).body.error?.code).to.equal("rate_limited");
    });
  });

  describe("a remembered miss ends when the chain registers the value", () => {
    let r: ProxiedRelayer;

    before(async () => {
      // A TTL far longer than the test: only the event can end these misses.
      r = await relayerBehindProxy({ unknownTtlMs: 600_000, pollIntervalMs: POLL_MS });
    });

    it("a usage key registered on chain directly (path B) works once the relayer has processed its block, however long the miss was remembered", async () => {
      const owner = new Wallet(DEV_KEYS[1], s.provider);
      const registry = AccountRegistry__factory.connect(s.deployment.registry, owner);
      await (await registry.createAccount("path-b owner", ZeroAddress)).wait();
      const gen = s.enclave.generateUsageKey();
      expect((await r.api("GET", "/core/v1/pkps", gen.apiKey)).body.error?.code).to.equal("unknown_api_key");
      const noScopes = {
        canCreateGroups: false,
        canDeleteGroups: false,
        canCreatePkps: false,
        manageIpfsIdsInGroups: [],
        addPkpToGroups: [],
        removePkpFromGroups: [],
        executeInGroups: [],
      };
      const added = await (await registry.addKey(gen.address, gen.keyHash, "server", "", 0, noScopes)).wait();
      await processed(r, added!.blockNumber);
      expect((await r.api("GET", "/core/v1/pkps", gen.apiKey)).status).to.equal(200);
    });

    // The poller indexes the master key of every AccountCreated it sees, ahead of any remembered miss.
    it("an account key whose account is created on chain works once the relayer has processed its block, however long the miss was remembered", async () => {
      const owner = new Wallet(DEV_KEYS[2], s.provider);
      const registry = AccountRegistry__factory.connect(s.deployment.registry, owner);
      const gen = s.enclave.generateAccountKey();
      expect((await r.api("GET", "/core/v1/account", gen.apiKey)).body.error?.code).to.equal(
        "unknown_api_key",
      );
      const created = await (await registry.createAccount("master key on chain", gen.address)).wait();
      await processed(r, created!.blockNumber);
      expect((await r.api("GET", "/core/v1/account", gen.apiKey)).status).to.equal(200);
    });

    it("a usage key created through the API works on its very next request", async () => {
      const acct = await r.api("POST", "/core/v1/new_account", undefined, { account_name: "api" });
      expect(acct.status).to.equal(201);
      const added = await r.api("POST", "/core/v1/add_usage_api_key", acct.body.api_key as string, {
        name: "server",
      });
      expect(added.status, JSON.stringify(added.body)).to.equal(201);
      expect((await r.api("GET", "/core/v1/pkps", added.body.usage_api_key as string)).status).to.equal(200);
    });

    it("a PKP id refused before its creation is served right after it", async () => {
      const acct = await r.api("POST", "/core/v1/new_account", undefined, { account_name: "pkp" });
      // PKP ids are predictable: keccak256(abi.encode(chainid, registry, accountId, counter)).
      const next = keccak256(
        AbiCoder.defaultAbiCoder().encode(
          ["uint256", "address", "uint64", "uint256"],
          [31337, s.deployment.registry, acct.body.account_id as number, 1],
        ),
      );
      expect((await r.api("GET", `/core/v1/pkps/${next}`)).body.error?.code).to.equal("pkp_not_found");
      const created = await r.api("POST", "/core/v1/pkps/create", acct.body.api_key as string, { name: "p" });
      expect(created.body.pkp_id).to.equal(next);
      const shown = await r.api("GET", `/core/v1/pkps/${next}`);
      expect(shown.status).to.equal(200);
      expect(shown.body.account_id).to.equal(acct.body.account_id);
    });
  });

  // Last: it moves the chain's clock forward.
  describe("an expired key the relayer never cached", () => {
    it("gets 401 api_key_expired with its expiration, not unknown_api_key", async () => {
      const r = await relayerBehindProxy({ pollIntervalMs: POLL_MS });
      const owner = new Wallet(DEV_KEYS[3], s.provider);
      const registry = AccountRegistry__factory.connect(s.deployment.registry, owner);
      await (await registry.createAccount("expiring", ZeroAddress)).wait();
      const gen = s.enclave.generateUsageKey();
      const now = (await s.provider.getBlock("latest"))!.timestamp;
      const expiration = now + 30;
      const noScopes = {
        canCreateGroups: false,
        canDeleteGroups: false,
        canCreatePkps: false,
        manageIpfsIdsInGroups: [],
        addPkpToGroups: [],
        removePkpFromGroups: [],
        executeInGroups: [],
      };
      await (await registry.addKey(gen.address, gen.keyHash, "short", "", expiration, noScopes)).wait();
      await s.provider.send("evm_increaseTime", [120]);
      await s.provider.send("evm_mine", []);
      // The relayer's view is the chain at its cursor: wait until the poller has passed the mined block.
      await processed(r, await s.provider.getBlockNumber());
      for (let i = 0; i < 2; i++) {
        const reply = await r.api("GET", "/core/v1/pkps", gen.apiKey);
        expect(reply.status).to.equal(401);
        expect(reply.body.error?.code).to.equal("api_key_expired");
        expect(reply.body.error?.details).to.deep.equal({ expiration });
      }
    });
  });
});
