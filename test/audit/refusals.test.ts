/**
 * Refusals in the audit log (docs/audit-log.md, "Entry kinds"): a request with an expired usage key is
 * a refusal entry of the key's account, like the other refusals of a recognised key, under the same
 * rate limit; and on PostgreSQL the refusal limit holds for the cluster, not per instance.
 */
import { expect } from "chai";
import pino from "pino";
import { AuditLog } from "../../relayer/audit/log";
import { openDataLayer, SharedTokenBuckets, type DataLayer } from "../../relayer/db";
import { keyHash } from "../../enclave";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

// Answers are whatever JSON the API returned; the tests assert on their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe("audit log: an expired key's refusal is an entry", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;

  before(async () => {
    s = await startStack({ executor: { poolSize: 1 }, audit: { refusalsPerMinute: 2 } });
    a = await setupAccount(s);
  });
  after(async () => {
    await s?.close();
  });

  it("recorded with the key's address and hash prefix, and rate-limited like the others", async () => {
    const exp = Math.floor(Date.now() / 1000) + 2;
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: a.accountKey,
      body: { name: "short", expiration: exp },
    });
    expect(k.status, JSON.stringify(k.body)).to.equal(201);
    await new Promise((r) => setTimeout(r, Math.max(0, exp * 1000 - Date.now()) + 200));
    const requestIds: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await s.api("GET", "/core/v1/pkps", { key: k.body.usage_api_key });
      expect(r.status).to.equal(401);
      expect(r.body.error.code).to.equal("api_key_expired");
      requestIds.push(String(r.headers.get("x-request-id")));
    }
    const list = (await fetch(`${s.url}/core/v1/audit?type=refusal`, {
      headers: { "x-api-key": a.accountKey },
    }).then((r) => r.json())) as Json;
    const items = (list.items as Json[]).slice().reverse(); // oldest first
    // refusalsPerMinute 2: the first two are written, the other two only counted.
    expect(items.map((e) => e.data.request_id)).to.deep.equal(requestIds.slice(0, 2));
    expect(items[0].data).to.deep.include({
      method: "GET",
      route: "/core/v1/pkps",
      code: "api_key_expired",
      key_hash_prefix: keyHash(k.body.usage_api_key).slice(0, 10),
      principal: { kind: "usage_key", address: String(k.body.id).toLowerCase() },
      suppressed: 0,
    });
  });
});

describeOnPostgres("audit log: the refusal limit is the cluster's on PostgreSQL", function () {
  this.timeout(120_000);
  let db: DataLayer;
  before(async () => {
    db = await openDataLayer({ databaseUrl: await freshDatabaseUrl(), sqlitePath: "" });
  });
  after(async () => {
    await db?.close();
  });

  it("three instances admit refusalsPerMinute refusals of an account in all, not each", async () => {
    const perMinute = 5;
    const signer = {
      address: "0x" + "00".repeat(20),
      sign: (): string => {
        throw new Error("unused");
      },
    };
    const instances = ["i1", "i2", "i3"].map(
      (id) =>
        new AuditLog(
          db,
          signer,
          id,
          { refusalsPerMinute: perMinute, sweepMs: 3_600_000 },
          pino({ level: "silent" }),
          {},
          new SharedTokenBuckets(db, "audit_refusals", perMinute, 60_000),
        ),
    );
    let admitted = 0;
    for (let round = 0; round < 4; round++)
      for (const log of instances) if ((await log.admitRefusal("42")).admit) admitted++;
    expect(admitted).to.equal(perMinute);
    // Another account has its own budget.
    expect((await instances[0].admitRefusal("43")).admit).to.equal(true);
    await Promise.all(instances.map((l) => l.stop()));
  });
});
