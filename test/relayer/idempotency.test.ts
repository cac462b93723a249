/** Idempotency-Key on POST: the same request twice writes once; a reused key with another body is 409. */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { AccountRegistry__factory } from "../../typechain-types";
import { Client } from "pg";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { startStack, type Stack } from "../helpers/stack";

describeOnEngines("relayer: Idempotency-Key", function (engine) {
  this.timeout(120_000);
  let s: Stack;
  let accountKey: string;
  let accountId: number;
  let databaseUrl: string | undefined;

  /** Everything the idempotency records hold, as stored (the SQLite files, or the PostgreSQL rows). */
  const storedRecords = async (): Promise<Buffer> => {
    if (!databaseUrl) {
      const files = fs.readdirSync(s.dataDir).filter((f) => f.startsWith("relayer.sqlite"));
      return Buffer.concat(files.map((f) => fs.readFileSync(path.join(s.dataDir, f))));
    }
    const c = new Client({ connectionString: databaseUrl });
    await c.connect();
    try {
      const rows = (await c.query("SELECT scope, key, body FROM idempotency")).rows as Array<
        Record<string, string>
      >;
      if (rows.length === 0) throw new Error("no idempotency records in PostgreSQL");
      return Buffer.from(JSON.stringify(rows));
    } finally {
      await c.end();
    }
  };

  const pkpCount = async () => {
    const registry = AccountRegistry__factory.connect(s.deployment.registry, s.provider);
    return Number((await registry.listPkps(accountId, 0, 100))[1]);
  };

  before(async () => {
    databaseUrl = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    s = await startStack({ databaseUrl });
    const a = await s.api("POST", "/core/v1/new_account", { body: { account_name: "idem" } });
    accountKey = a.body.api_key;
    accountId = a.body.account_id;
  });
  after(async () => {
    await s?.close();
  });

  it("the same POST twice with one Idempotency-Key writes once and replays the first answer", async () => {
    const before = await pkpCount();
    const h = { "idempotency-key": "create-pkp-1" };
    const r1 = await s.api("POST", "/core/v1/pkps/create", {
      key: accountKey,
      body: { name: "once" },
      headers: h,
    });
    const r2 = await s.api("POST", "/core/v1/pkps/create", {
      key: accountKey,
      body: { name: "once" },
      headers: h,
    });
    expect(r1.status).to.equal(201);
    expect(r2.status).to.equal(201);
    expect(r2.body).to.deep.equal(r1.body);
    expect(r2.headers.get("idempotent-replayed")).to.equal("true");
    expect(await pkpCount()).to.equal(before + 1);
  });

  it("concurrent duplicates join the first request and write once", async () => {
    const before = await pkpCount();
    const h = { "idempotency-key": "create-pkp-concurrent" };
    const rs = await Promise.all(
      Array.from({ length: 5 }, () =>
        s.api("POST", "/core/v1/pkps/create", { key: accountKey, body: { name: "c" }, headers: h }),
      ),
    );
    for (const r of rs) expect(r.body.pkp_id).to.equal(rs[0].body.pkp_id);
    expect(await pkpCount()).to.equal(before + 1);
  });

  it("the same key with a different body is 409 idempotency_key_reused and writes nothing", async () => {
    const before = await pkpCount();
    const r = await s.api("POST", "/core/v1/pkps/create", {
      key: accountKey,
      body: { name: "different" },
      headers: { "idempotency-key": "create-pkp-1" },
    });
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal("idempotency_key_reused");
    expect(await pkpCount()).to.equal(before);
  });

  it("the same body sent with keys in another order is the same request", async () => {
    const h = { "idempotency-key": "order" };
    const r1 = await s.api("POST", "/core/v1/groups", {
      key: accountKey,
      body: { name: "n", description: "d" },
      headers: h,
    });
    const r2 = await s.api("POST", "/core/v1/groups", {
      key: accountKey,
      rawBody: '{"description":"d","name":"n"}',
      headers: { ...h, "content-type": "application/json" },
    });
    expect(r2.body.group_id).to.equal(r1.body.group_id);
  });

  it("an add_usage_api_key replay returns the same key, which is never stored in clear", async () => {
    const h = { "idempotency-key": "add-key-1" };
    const r1 = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "k" },
      headers: h,
    });
    const r2 = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "k" },
      headers: h,
    });
    expect(r2.body.usage_api_key).to.equal(r1.body.usage_api_key);
    expect(r2.body.id).to.equal(r1.body.id);
    expect((await storedRecords()).includes(Buffer.from(r1.body.usage_api_key))).to.equal(false);
  });

  it("a new_account replay creates nothing and withholds the account key it never stored", async () => {
    const h = { "idempotency-key": "signup-1" };
    const r1 = await s.api("POST", "/core/v1/new_account", { body: { account_name: "once" }, headers: h });
    const r2 = await s.api("POST", "/core/v1/new_account", { body: { account_name: "once" }, headers: h });
    expect(r2.body.account_id).to.equal(r1.body.account_id);
    expect(r2.body.api_key).to.equal(null);
    expect(r2.body.api_key_withheld).to.equal(true);
  });

  it("records survive a relayer restart", async () => {
    await s.restartRelayer();
    const r = await s.api("POST", "/core/v1/pkps/create", {
      key: accountKey,
      body: { name: "once" },
      headers: { "idempotency-key": "create-pkp-1" },
    });
    expect(r.headers.get("idempotent-replayed")).to.equal("true");
  });

  it("a malformed Idempotency-Key is 400 invalid_idempotency_key", async () => {
    const r = await s.api("POST", "/core/v1/pkps/create", {
      key: accountKey,
      body: {},
      headers: { "idempotency-key": "x".repeat(300) },
    });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal("invalid_idempotency_key");
  });

  it("a refused request is not kept: fixing the cause and retrying with the same key works", async () => {
    const h = { "idempotency-key": "fix-and-retry" };
    const bad = await s.api("POST", "/core/v1/groups", { key: accountKey, body: { name: 5 }, headers: h });
    expect(bad.status).to.equal(400);
    const bad2 = await s.api("POST", "/core/v1/groups", {
      key: accountKey,
      body: { name: "ok" },
      headers: h,
    });
    expect(bad2.status).to.equal(201);
  });
});
