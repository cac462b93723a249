/**
 * What cross-instance consistency costs per request on PostgreSQL (`npm run bench:consistency`).
 * Everything real: anvil with the contracts, a PermissionCache on it, an embedded PostgreSQL server
 * (the npm package's binaries), the relayer's own classes. Alternating blocks of the measured and the
 * baseline operation in the same run, so drift of a shared machine hits both sides:
 *
 *  1. Authorizing a request: `freshen()` (read the shared write mark, one primary-key SELECT) then the
 *     key lookup, against the key lookup alone (what one process does).
 *  2. A signed request's replay check: the nonce claimed in the shared table (one INSERT … ON CONFLICT),
 *     against the in-process map (what one process does). Signature recovery is in both.
 *  3. End to end over HTTP: a hello-world execution through a second relayer instance on the same
 *     database and chain, with the mark read on and off (everything else the same); 4. the same
 *     with 10 concurrent clients.
 *
 *   BENCH_ROUNDS=… changes the sample size (default 2,000 per side for 1 and 2, 400 for 3).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Request } from "express";
import { startRelayer } from "../relayer";
import { SharedNonceStore } from "../relayer/cluster/sharedNonces";
import { SharedWriteMark } from "../relayer/cluster/writeMark";
import { RegistryReader } from "../relayer/chain/registryReader";
import { makeProvider } from "../relayer/chain/rpc";
import { openDataLayer } from "../relayer/db";
import { SignedRequestVerifier } from "../relayer/http/signedRequest";
import { PermissionCache } from "../relayer/permissions/permissionCache";
import { signRequest, usageKeyWallet } from "../sdk/index";
import { quietLogger, setupAccount, startStack } from "../testkit/stack";
import { startBenchPostgres } from "./embeddedPostgres";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2_000);
const HTTP_ROUNDS = Math.max(100, Math.floor(ROUNDS / 5));
const BLOCK = 50;

/** Mean microseconds per operation of `a` and `b`, alternating blocks of BLOCK. */
async function alternate(
  rounds: number,
  a: (i: number) => Promise<unknown>,
  b: (i: number) => Promise<unknown>,
): Promise<{ a: number; b: number }> {
  let ta = 0;
  let tb = 0;
  for (let i = 0; i < BLOCK * 2; i++) {
    await a(-1 - i);
    await b(-1 - i);
  }
  for (let done = 0; done < rounds; done += BLOCK) {
    let t = process.hrtime.bigint();
    for (let i = 0; i < BLOCK; i++) await a(done + i);
    ta += Number(process.hrtime.bigint() - t);
    t = process.hrtime.bigint();
    for (let i = 0; i < BLOCK; i++) await b(done + i);
    tb += Number(process.hrtime.bigint() - t);
  }
  return { a: ta / rounds / 1_000, b: tb / rounds / 1_000 };
}

function report(title: string, r: { a: number; b: number }, aName: string, bName: string): void {
  console.log(
    `${title}\n  ${aName}: ${r.a.toFixed(1)} µs   ${bName}: ${r.b.toFixed(1)} µs   ` +
      `extra: ${(r.a - r.b).toFixed(1)} µs per request   ratio: ${((r.b / r.a) * 100).toFixed(1)}% of the baseline rate`,
  );
}

async function main(): Promise<void> {
  const pg = await startBenchPostgres();
  const s = await startStack({ databaseUrl: pg.url });
  const layer = await openDataLayer({ databaseUrl: pg.url, sqlitePath: "" });
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  try {
    const a = await setupAccount(s);
    const key = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "bench", execute_in_groups: [a.groupId] },
    });
    const usageKey = key.body.usage_api_key as string;
    const address = usageKeyWallet(usageKey).address;

    // 1. freshen + lookup vs lookup.
    const rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
    cleanups.push(() => rpc.close());
    const dataDir = mkdtempSync(join(tmpdir(), "sigil-bench-cache-"));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const mark = new SharedWriteMark(layer, SharedWriteMark.scopeOf(31337, s.deployment.registry));
    const cache = new PermissionCache({
      provider: rpc.provider,
      reader: new RegistryReader(rpc.provider, s.deployment.registry),
      registry: s.deployment.registry,
      chainId: 31337,
      deployBlock: s.deployment.deployBlock,
      dataDir,
      pollIntervalMs: 60_000,
      logger: quietLogger(),
      sharedMark: mark,
    });
    await cache.ensureSynced();
    const now = Math.floor(Date.now() / 1000);
    const r1 = await alternate(
      ROUNDS,
      async () => {
        await cache.freshen();
        return cache.lookupKey(address, now);
      },
      () => cache.lookupKey(address, now),
    );
    report("1. authorizing a request (warm cache)", r1, "mark read + lookup", "lookup alone");

    // 2. signed request: shared nonce vs in-memory nonce.
    const deployment = { chainId: 31337, registryAddress: s.deployment.registry };
    const wallet = usageKeyWallet(usageKey);
    const route = "/core/v1/svc_action";
    const body = Buffer.from("{}");
    const requests = (n: number) =>
      Array.from({ length: n }, () => {
        const headers = signRequest(wallet, deployment, "POST", route, body);
        const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
        return {
          method: "POST",
          originalUrl: route,
          headers: lower,
          get: (h: string) => lower[h.toLowerCase()],
        } as unknown as Request;
      });
    const warm = BLOCK * 2;
    const sharedReqs = requests(ROUNDS + warm);
    const memoryReqs = requests(ROUNDS + warm);
    const shared = new SignedRequestVerifier({ ...deployment, sharedNonces: new SharedNonceStore(layer) });
    const memory = new SignedRequestVerifier(deployment);
    const r2 = await alternate(
      ROUNDS,
      async (i) => shared.verifyRequest(sharedReqs[i < 0 ? -1 - i : warm + i], body),
      async (i) => memory.verifyRequest(memoryReqs[i < 0 ? -1 - i : warm + i], body),
    );
    report("2. a signed request's checks", r2, "shared nonce (PostgreSQL)", "in-memory nonce");

    // 3. HTTP: the same PostgreSQL instance with the mark read on and off (PermissionCache.freshen
    // switched between blocks: nothing else differs, rate limits on PostgreSQL included).
    const second = await startRelayer({
      ...s.relayerOptions,
      dataDir: mkdtempSync(join(tmpdir(), "sigil-bench-2-")),
      port: 0,
    });
    cleanups.push(() => second.close());
    const realFreshen = PermissionCache.prototype.freshen;
    cleanups.push(() => (PermissionCache.prototype.freshen = realFreshen));
    const exec = async () => {
      const r = await fetch(second.url + "/core/v1/svc_action", {
        method: "POST",
        headers: { "x-api-key": usageKey, "content-type": "application/json" },
        body: JSON.stringify({ code: a.code, pkp_id: a.pkpId }),
      });
      if (r.status !== 200) throw new Error(`execution: ${r.status} ${await r.text()}`);
      await r.arrayBuffer();
    };
    const r3 = await alternate(
      HTTP_ROUNDS,
      async () => {
        PermissionCache.prototype.freshen = realFreshen;
        await exec();
      },
      async () => {
        PermissionCache.prototype.freshen = () => null;
        await exec();
      },
    );
    report(
      "3. a hello-world execution over HTTP through a second instance on PostgreSQL, one client",
      r3,
      "mark read on",
      "mark read off",
    );
    // 4. The same with 10 clients at once (concurrent requests share mark reads: SharedWriteMark.read).
    const ten = async () => {
      await Promise.all(Array.from({ length: 10 }, () => exec()));
    };
    const r4 = await alternate(
      Math.max(BLOCK, Math.floor(HTTP_ROUNDS / 10)),
      async () => {
        PermissionCache.prototype.freshen = realFreshen;
        await ten();
      },
      async () => {
        PermissionCache.prototype.freshen = () => null;
        await ten();
      },
    );
    report("4. the same, 10 clients at once (per round of 10 requests)", r4, "mark read on", "mark read off");
  } finally {
    for (const c of cleanups.reverse()) await c();
    await layer.close();
    await s.close();
    await pg.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
