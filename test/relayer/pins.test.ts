/**
 * Disk quotas (issue 13, item 6), on the real stack with billing: pins are limited per account, billed
 * once per (account, CID) per started 100 KB, refused for keys that have no use for stored code, and
 * code fetched from IPFS by CID (GET /actions/:cid, executions by CID) counts against the same quota.
 * Nothing is stored, counted or charged for a refused pin. On both engines: with PostgreSQL the pins
 * live in the shared database, so a quota holds across instances (last block), and the account's
 * pinned actions are listed newest first (GET /actions/pinned).
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { createSigil } from "sigil/sdk";
import { computeCid } from "../../enclave";
import { startRelayer, type RunningRelayer } from "../../relayer";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { startStack, type ApiResponse, type Stack } from "../helpers/stack";

const QUOTA = 150 * 1024;
const UNIT = 100 * 1024;

/** JavaScript of exactly `bytes` bytes (distinct per tag, so each is a new CID). */
function codeOf(bytes: number, tag: string): string {
  const head = `async function main() { return "${tag}"; }\n//`;
  return head + "x".repeat(bytes - Buffer.byteLength(head));
}

describeOnEngines("relayer: pin quotas and pin billing", function (engine) {
  this.timeout(120_000);
  let s: Stack;
  let billing: Billing;
  let dir: string;
  let gateway: http.Server;
  const served = new Map<string, string>();
  const asked: string[] = [];
  let databaseUrl: string | undefined;

  const stored = (cid: string) => fs.existsSync(path.join(s.dataDir, "actions", cid));
  const balance = async (key: string) =>
    (await s.api("GET", "/core/v1/billing/balance", { key })).body.balance_cents as number;
  const pin = (key: string, code: string) => s.api("POST", "/core/v1/actions", { key, body: { code } });
  const expectError = (r: ApiResponse, status: number, code: string) => {
    expect(r.status, JSON.stringify(r.body)).to.equal(status);
    expect(r.body.error.code).to.equal(code);
  };
  const newAccount = async () => {
    const r = await s.api("POST", "/core/v1/new_account", { body: { account_name: "pins" } });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return { key: r.body.api_key as string };
  };
  const usageKey = async (accountKey: string, scopes: Record<string, unknown>) => {
    const r = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: accountKey,
      body: { name: "k", ...scopes },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.usage_api_key as string;
  };
  /** Code the gateway serves and no one has pinned. */
  const onIpfsOnly = async (bytes: number, tag: string) => {
    const code = codeOf(bytes, tag);
    const cid = await computeCid(new TextEncoder().encode(code));
    served.set(cid, code);
    return { code, cid };
  };

  before(async () => {
    gateway = http.createServer((req, res) => {
      const cid = (req.url ?? "").replace(/^\/ipfs\//, "");
      asked.push(cid);
      const body = served.get(cid);
      res.statusCode = body === undefined ? 404 : 200;
      res.end(body);
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", () => r()));
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-pins-"));
    databaseUrl = engine === "postgres" ? await freshDatabaseUrl() : undefined;
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      databaseUrl,
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 0,
    });
    s = await startStack({
      databaseUrl,
      billing,
      pinQuotaBytes: QUOTA,
      ipfsGateways: [`http://127.0.0.1:${(gateway.address() as AddressInfo).port}`],
    });
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    gateway?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("a pin answers its size, its charge and the account's usage; the balance drops by the price", async () => {
    const a = await newAccount();
    const code = codeOf(1000, "small");
    const r = await pin(a.key, code);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body).to.deep.equal({
      cid: await computeCid(new TextEncoder().encode(code)),
      bytes: 1000,
      charged_cents: 1,
      used_bytes: 1000,
      quota_bytes: QUOTA,
    });
    expect(await balance(a.key)).to.equal(99);
  });

  it("pinning the same CID again costs nothing and uses no more quota", async () => {
    const a = await newAccount();
    const code = codeOf(2000, "again");
    await pin(a.key, code);
    const again = await pin(a.key, code);
    expect(again.status).to.equal(201);
    expect(again.body).to.include({ charged_cents: 0, used_bytes: 2000 });
    expect(await balance(a.key)).to.equal(99);
  });

  it("the price is per started 100 KB", async () => {
    const a = await newAccount();
    expect((await pin(a.key, codeOf(UNIT, "one unit"))).body.charged_cents).to.equal(1);
    const b = await newAccount();
    expect((await pin(b.key, codeOf(UNIT + 1, "two units"))).body.charged_cents).to.equal(2);
    expect(await balance(a.key)).to.equal(99);
    expect(await balance(b.key)).to.equal(98);
  });

  it("over the quota: 413 pin_quota_exceeded with the numbers; nothing stored, counted or charged", async () => {
    const a = await newAccount();
    await pin(a.key, codeOf(100_000, "first"));
    const code = codeOf(QUOTA - 100_000 + 1, "one byte too many");
    const cid = await computeCid(new TextEncoder().encode(code));
    const r = await pin(a.key, code);
    expectError(r, 413, "pin_quota_exceeded");
    expect(r.body.error.details).to.deep.equal({
      cid,
      bytes: QUOTA - 100_000 + 1,
      used_bytes: 100_000,
      quota_bytes: QUOTA,
    });
    expect(stored(cid)).to.equal(false);
    expect(await balance(a.key)).to.equal(99);
    // Exactly at the quota is accepted.
    const fits = await pin(a.key, codeOf(QUOTA - 100_000, "fits exactly"));
    expect(fits.status, JSON.stringify(fits.body)).to.equal(201);
    expect(fits.body.used_bytes).to.equal(QUOTA);
  });

  it("quotas are per account: another account pins what a full one cannot", async () => {
    const full = await newAccount();
    await pin(full.key, codeOf(QUOTA, "fills it"));
    const code = codeOf(500, "shared");
    expectError(await pin(full.key, code), 413, "pin_quota_exceeded");
    const other = await newAccount();
    const r = await pin(other.key, code);
    expect(r.status).to.equal(201);
    expect(r.body.used_bytes).to.equal(500);
  });

  it("a usage key without a manage-actions or execute scope may not pin: 403, nothing stored", async () => {
    const a = await newAccount();
    const k = await usageKey(a.key, { can_create_pkps: true });
    const code = codeOf(700, "unscoped");
    const r = await pin(k, code);
    expectError(r, 403, "not_authorized_to_pin");
    expect(stored(await computeCid(new TextEncoder().encode(code)))).to.equal(false);
    expect(await balance(a.key)).to.equal(100 - 1); // the add_usage_api_key write only
  });

  it("a usage key with execute (or manage-actions) on some group may pin, billed to its account", async () => {
    const a = await newAccount();
    const executor = await usageKey(a.key, { execute_in_groups: [0] });
    const manager = await usageKey(a.key, { manage_ipfs_ids_in_groups: [0] });
    expect((await pin(executor, codeOf(800, "by executor"))).status).to.equal(201);
    const r = await pin(manager, codeOf(900, "by manager"));
    expect(r.status).to.equal(201);
    expect(r.body.used_bytes).to.equal(1700);
    expect(await balance(a.key)).to.equal(100 - 2 - 2);
  });

  it("without credits: 402 insufficient_credits, nothing stored", async () => {
    const a = await newAccount();
    for (let i = 0; i < 100; i++) expect((await pin(a.key, codeOf(300, `spend ${i}`))).status).to.equal(201);
    expect(await balance(a.key)).to.equal(0);
    const code = codeOf(300, "broke");
    expectError(await pin(a.key, code), 402, "insufficient_credits");
    expect(stored(await computeCid(new TextEncoder().encode(code)))).to.equal(false);
  });

  describe("code fetched from IPFS by CID", () => {
    it("GET /actions/:cid pins what the gateway returned for the caller's account, once", async () => {
      const a = await newAccount();
      const { code, cid } = await onIpfsOnly(1200, "fetched");
      const r = await s.api("GET", `/core/v1/actions/${cid}`, { key: a.key });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.code).to.equal(code);
      expect(stored(cid)).to.equal(true);
      expect(await balance(a.key)).to.equal(99);
      // Now pinned for this account: pinning it explicitly costs nothing more.
      expect((await pin(a.key, code)).body).to.include({ charged_cents: 0, used_bytes: 1200 });
    });

    it("a key that may not pin cannot make the relayer fetch: 403 before any gateway request", async () => {
      const a = await newAccount();
      const k = await usageKey(a.key, { can_create_groups: true });
      const { cid } = await onIpfsOnly(1300, "not for this key");
      asked.length = 0;
      expectError(await s.api("GET", `/core/v1/actions/${cid}`, { key: k }), 403, "not_authorized_to_pin");
      expect(asked).to.deep.equal([]);
      expect(stored(cid)).to.equal(false);
    });

    it("a key that may not pin still reads code already stored", async () => {
      const a = await newAccount();
      const k = await usageKey(a.key, { can_create_groups: true });
      const code = codeOf(400, "already here");
      const { cid } = (await pin(a.key, code)).body;
      const r = await s.api("GET", `/core/v1/actions/${cid}`, { key: k });
      expect(r.status).to.equal(200);
      expect(r.body.code).to.equal(code);
    });

    it("over the quota: 413 pin_quota_exceeded, and nothing stored", async () => {
      const a = await newAccount();
      await pin(a.key, codeOf(QUOTA - 1000, "almost full"));
      const { cid } = await onIpfsOnly(1001, "one byte over");
      expectError(await s.api("GET", `/core/v1/actions/${cid}`, { key: a.key }), 413, "pin_quota_exceeded");
      expect(stored(cid)).to.equal(false);
    });

    it("an execution by CID that misses the store counts against the quota too", async () => {
      const a = await newAccount();
      const { cid } = await onIpfsOnly(1500, "executed");
      const g = await s.api("POST", "/core/v1/groups", { key: a.key, body: { name: "g", actions: [cid] } });
      expect(g.status, JSON.stringify(g.body)).to.equal(201);
      const run = await s.api("POST", "/core/v1/svc_action", { key: a.key, body: { cid } });
      expect(run.status, JSON.stringify(run.body)).to.equal(200);
      expect(run.body.response).to.equal("executed");
      expect(stored(cid)).to.equal(true);
      const usage = await pin(a.key, codeOf(100, "probe"));
      expect(usage.body.used_bytes).to.equal(1500 + 100);
    });

    it("an execution by CID over the quota: 413 pin_quota_exceeded, nothing run or stored", async () => {
      const a = await newAccount();
      await pin(a.key, codeOf(QUOTA, "full"));
      const { cid } = await onIpfsOnly(600, "never runs");
      await s.api("POST", "/core/v1/groups", { key: a.key, body: { name: "g", actions: [cid] } });
      expectError(
        await s.api("POST", "/core/v1/svc_action", { key: a.key, body: { cid } }),
        413,
        "pin_quota_exceeded",
      );
      expect(stored(cid)).to.equal(false);
    });
  });
  describe("GET /actions/pinned", () => {
    const listPinned = (key: string, query = "") => s.api("GET", `/core/v1/actions/pinned${query}`, { key });

    it("lists the account's pins newest first as {cid, bytes, pinned_at}, paged like the other lists", async () => {
      const a = await newAccount();
      const cids: string[] = [];
      for (const [i, size] of [300, 400, 500].entries()) {
        cids.push((await pin(a.key, codeOf(size, `listed ${i}`))).body.cid);
        await new Promise((r) => setTimeout(r, 5)); // distinct milliseconds: the order is by time
      }
      const r = await listPinned(a.key, "?page_number=0&page_size=2");
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body).to.include({ page_number: 0, page_size: 2, total: 3 });
      expect(r.body.items.map((p: { cid: string }) => p.cid)).to.deep.equal([cids[2], cids[1]]);
      expect(r.body.items[0].bytes).to.equal(500);
      expect(r.body.items[0].pinned_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Date.parse(r.body.items[0].pinned_at)).to.be.closeTo(Date.now(), 60_000);
      const second = await listPinned(a.key, "?page_number=1&page_size=2");
      expect(second.body.items.map((p: { cid: string }) => p.cid)).to.deep.equal([cids[0]]);
    });

    it("shows only the caller's account's pins; pinning again does not add a row", async () => {
      const a = await newAccount();
      const b = await newAccount();
      const code = codeOf(350, "both pin it");
      await pin(a.key, code);
      await pin(a.key, code);
      await pin(b.key, codeOf(360, "only b"));
      const r = await listPinned(a.key);
      expect(r.body.total).to.equal(1);
      expect(r.body.items.map((p: { bytes: number }) => p.bytes)).to.deep.equal([350]);
    });

    it("a usage key that may pin may list; one that may not gets 403 not_authorized_to_pin", async () => {
      const a = await newAccount();
      await pin(a.key, codeOf(370, "visible"));
      const executor = await usageKey(a.key, { execute_in_groups: [0] });
      const unscoped = await usageKey(a.key, { can_create_pkps: true });
      expect((await listPinned(executor)).body.total).to.equal(1);
      expectError(await listPinned(unscoped), 403, "not_authorized_to_pin");
    });

    it("the SDK iterates every pin (listPinnedActions), newest first", async () => {
      const a = await newAccount();
      const cids: string[] = [];
      for (let i = 0; i < 3; i++) {
        cids.unshift((await pin(a.key, codeOf(390 + i, `sdk ${i}`))).body.cid);
        await new Promise((r) => setTimeout(r, 5));
      }
      const sigil = createSigil({ baseUrl: s.url, apiKey: a.key });
      const seen: string[] = [];
      for await (const p of sigil.listPinnedActions()) seen.push(p.cid);
      expect(seen).to.deep.equal(cids);
    });

    it("`sigil actions pinned --json` prints the page", async () => {
      const a = await newAccount();
      const { cid } = (await pin(a.key, codeOf(395, "cli"))).body;
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(
          process.execPath,
          [path.join(__dirname, "..", "..", "bin", "sigil.js"), "--json", "actions", "pinned"],
          {
            env: { ...process.env, SIGIL_URL: s.url, SIGIL_API_KEY: a.key },
          },
        );
        let stdout = "";
        child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
        child.on("close", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`exit ${code}`))));
      });
      const page = JSON.parse(out);
      expect(page).to.include({ page_number: 0, total: 1 });
      expect(page.items.map((p: { cid: string }) => p.cid)).to.deep.equal([cid]);
    });

    it("a bad page is 400 invalid_pagination", async () => {
      const a = await newAccount();
      expectError(await listPinned(a.key, "?page_size=0"), 400, "invalid_pagination");
    });
  });

  if (engine === "postgres")
    describe("two instances on one PostgreSQL", () => {
      let second: RunningRelayer;
      before(async () => {
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-pins-2-"));
        second = await startRelayer({ ...s.relayerOptions, dataDir, port: 0, billing });
      });
      after(async () => {
        await second?.close();
      });

      it("the quota holds across instances: what one instance counted, the other refuses past", async () => {
        const a = await newAccount();
        expect((await pin(a.key, codeOf(QUOTA - 1000, "on the first"))).status).to.equal(201);
        // The second instance learns of the new account from the chain within a poll interval.
        const deadline = Date.now() + 10_000;
        let r: Response;
        const body = JSON.stringify({ code: codeOf(1001, "on the second") });
        for (;;) {
          r = await fetch(`${second.url}/core/v1/actions`, {
            method: "POST",
            headers: { "x-api-key": a.key, "content-type": "application/json" },
            body,
          });
          if (r.status !== 401 || Date.now() > deadline) break;
          await new Promise((res) => setTimeout(res, 50));
        }
        const answer = (await r.json()) as { error: { details: Record<string, unknown> } };
        expect(r.status, JSON.stringify(answer)).to.equal(413);
        expect(answer.error.details).to.include({ used_bytes: QUOTA - 1000, quota_bytes: QUOTA });
      });

      it("concurrent pins of one account on both instances never pass the quota together", async () => {
        const a = await newAccount();
        await pin(a.key, codeOf(300, "seen by both")); // so that the second instance knows the account
        const deadline = Date.now() + 10_000;
        while (
          (await fetch(`${second.url}/core/v1/account`, { headers: { "x-api-key": a.key } })).status === 401
        ) {
          if (Date.now() > deadline) throw new Error("the second instance never saw the account");
          await new Promise((res) => setTimeout(res, 50));
        }
        // 10 pins of 30,000 bytes against 153,600 - 300 bytes left: exactly 5 fit.
        const answers = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            fetch(`${i % 2 ? second.url : s.url}/core/v1/actions`, {
              method: "POST",
              headers: { "x-api-key": a.key, "content-type": "application/json" },
              body: JSON.stringify({ code: codeOf(30_000, `race ${i}`) }),
            }).then((r) => r.status),
          ),
        );
        expect(answers.filter((st) => st === 201)).to.have.length(5);
        expect(answers.filter((st) => st === 413)).to.have.length(5);
        expect((await pin(a.key, codeOf(300, "seen by both"))).body.used_bytes).to.equal(300 + 5 * 30_000);
      });

      it("both instances list the same pins", async () => {
        const a = await newAccount();
        const { cid } = (await pin(a.key, codeOf(380, "listed everywhere"))).body;
        const deadline = Date.now() + 10_000;
        let r: Response;
        for (;;) {
          r = await fetch(`${second.url}/core/v1/actions/pinned`, { headers: { "x-api-key": a.key } });
          if (r.status !== 401 || Date.now() > deadline) break;
          await new Promise((res) => setTimeout(res, 50));
        }
        const answer = (await r.json()) as { items: Array<{ cid: string }> };
        expect(r.status, JSON.stringify(answer)).to.equal(200);
        expect(answer.items.map((p) => p.cid)).to.deep.equal([cid]);
      });
    });
});
