/**
 * Revocation always goes through (docs/billing.md, "Revocation"): removing a usage key, and so ending a
 * rotation's overlap early, is never refused for credit. It is charged like any write after it landed,
 * so on an empty account it becomes a debt, which the next top-up pays first. Real stack with billing
 * (real ledger, simulated processor), every write a real registry transaction.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import { startStack, type Stack } from "../helpers/stack";

const ROOT = path.join(__dirname, "..", "..");

/** `npx sigil …` against `url` as `apiKey` (asynchronous: the relayer runs in this process). */
function cli(url: string, apiKey: string, args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, "bin", "sigil.js"), ...args], {
      cwd: ROOT,
      env: { ...process.env, SIGIL_URL: url, SIGIL_API_KEY: apiKey },
    });
    let stdout = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.on("close", (code) => resolve({ code, stdout }));
  });
}

/** Sign-up credit: three writes. */
const CREDIT = 3;

describe("relayer: revocation is never refused for credit", function () {
  this.timeout(120_000);
  let s: Stack;
  let billing: Billing;
  let dir: string;

  const balance = async (key: string) =>
    (await s.api("GET", "/core/v1/billing/balance", { key })).body.balance_cents as number;
  const codeOf = (r: { status: number; body: { error?: { code: string } } }) => [
    r.status,
    r.body.error?.code ?? null,
  ];

  /** A new account that spent its whole credit on CREDIT usage keys: balance 0. */
  async function emptyAccountWithKeys(): Promise<{
    key: string;
    usage: Array<{ id: string; value: string }>;
  }> {
    const a = await s.api("POST", "/core/v1/new_account", { body: { account_name: "revocation" } });
    expect(a.status).to.equal(201);
    const key = a.body.api_key as string;
    const usage: Array<{ id: string; value: string }> = [];
    for (let i = 0; i < CREDIT; i++) {
      const u = await s.api("POST", "/core/v1/add_usage_api_key", { key, body: { name: `k${i}` } });
      expect(u.status, JSON.stringify(u.body)).to.equal(201);
      usage.push({ id: u.body.id, value: u.body.usage_api_key });
    }
    expect(await balance(key)).to.equal(0);
    return { key, usage };
  }

  const remove = (key: string, id: string) =>
    s.api("POST", "/core/v1/remove_usage_api_key", { key, body: { id } });
  /** Whether a usage key still authenticates (a read). */
  const usable = async (value: string) => (await s.api("GET", "/core/v1/account", { key: value })).status;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-revocation-"));
    billing = await createBilling({
      dbPath: path.join(dir, "billing.sqlite"),
      processor: new SimulatedProcessor(),
      signupCreditCents: CREDIT,
      chargeFlushMs: 0,
    });
    s = await startStack({ billing });
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("at balance 0 another write is 402 insufficient_credits (the gate revocation skips)", async () => {
    const { key } = await emptyAccountWithKeys();
    expect(codeOf(await s.api("POST", "/core/v1/add_usage_api_key", { key, body: {} }))).to.deep.equal([
      402,
      "insufficient_credits",
    ]);
  });

  it("at balance 0 a usage key is removed (200)", async () => {
    const { key, usage } = await emptyAccountWithKeys();
    const r = await remove(key, usage[0].id);
    expect([r.status, r.body.removed, r.body.id]).to.deep.equal([200, true, usage[0].id]);
  });

  it("a key removed at balance 0 is refused at once: 401 unknown_api_key", async () => {
    const { key, usage } = await emptyAccountWithKeys();
    expect(await usable(usage[0].value)).to.equal(200);
    expect((await remove(key, usage[0].id)).status).to.equal(200);
    expect(codeOf(await s.api("GET", "/core/v1/account", { key: usage[0].value }))).to.deep.equal([
      401,
      "unknown_api_key",
    ]);
  });

  it("a removal at balance 0 is charged after it landed: the balance becomes a debt of one write", async () => {
    const { key, usage } = await emptyAccountWithKeys();
    expect((await remove(key, usage[0].id)).status).to.equal(200);
    expect(await balance(key)).to.equal(-1);
  });

  it("on an account in debt a usage key is removed (200) and the debt grows by one write", async () => {
    const { key, usage } = await emptyAccountWithKeys();
    expect((await remove(key, usage[0].id)).status).to.equal(200);
    expect(await balance(key)).to.equal(-1);
    const r = await remove(key, usage[1].id);
    expect([r.status, r.body.removed]).to.deep.equal([200, true]);
    expect(await usable(usage[1].value)).to.equal(401);
    expect(await balance(key)).to.equal(-2);
  });

  it("a rotation's overlap is ended early at balance 0 by removing the old key; the new key keeps working", async () => {
    const a = await s.api("POST", "/core/v1/new_account", { body: { account_name: "rotation" } });
    const key = a.body.api_key as string;
    const old = await s.api("POST", "/core/v1/add_usage_api_key", { key, body: { name: "old" } });
    expect((await s.api("POST", "/core/v1/add_usage_api_key", { key, body: { name: "x" } })).status).to.equal(
      201,
    );
    const rotated = await s.api("POST", "/core/v1/rotate_usage_api_key", {
      key,
      body: { id: old.body.id, overlap_seconds: 3600 },
    });
    expect(rotated.status, JSON.stringify(rotated.body)).to.equal(201);
    expect(await balance(key)).to.equal(0);
    expect(await usable(old.body.usage_api_key)).to.equal(200);
    expect((await remove(key, old.body.id)).status).to.equal(200);
    expect([await usable(old.body.usage_api_key), await usable(rotated.body.usage_api_key)]).to.deep.equal([
      401, 200,
    ]);
  });

  it("the CLI revokes a key at balance 0: `sigil keys remove` exits 0", async () => {
    const { key, usage } = await emptyAccountWithKeys();
    const r = await cli(s.url, key, ["--json", "keys", "remove", usage[0].id]);
    expect([r.code, JSON.parse(r.stdout).removed]).to.deep.equal([0, true]);
    expect(await usable(usage[0].value)).to.equal(401);
  });
});
