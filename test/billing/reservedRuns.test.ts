/**
 * Runs in flight are reserved: a burst of concurrent runs cannot spend past a key's cap or the
 * account's balance, because each run's worst case (its time limit at the price) is held from
 * admission until its charge replaces it. Real stack, real SES workers, a real ledger on each engine
 * (one SQLite file, or a database on the test PostgreSQL server), default write-behind charges.
 */
import { expect } from "chai";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { type Stack, setupAccount, startStack } from "../helpers/stack";

/** Sleeps for js_params.ms without holding a CPU (the machine is shared). */
const SLEEPER = "async function main(p) { await new Promise((r) => setTimeout(r, p.ms)); return 'slept'; }";
const BURST = 10;
const SIGNUP_CENTS = 5; // setupAccount spends 3 (a PKP, a group, a pin): 2 cents are left

describeOnEngines("billing: runs in flight reserve their worst case", function (engine) {
  this.timeout(180_000);
  let dir: string;
  let billing: Billing;
  let s: Stack;
  let account: Awaited<ReturnType<typeof setupAccount>>;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-reserved-"));
    billing = await createBilling({
      dbPath: path.join(dir, "ledger.sqlite"),
      databaseUrl: engine === "postgres" ? await freshDatabaseUrl() : undefined,
      processor: new SimulatedProcessor(),
      signupCreditCents: SIGNUP_CENTS,
    });
    s = await startStack({ billing, executor: { poolSize: 2 } });
    account = await setupAccount(s, SLEEPER);
  });
  after(async () => {
    await s?.close();
    await billing?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const run = (key: string, body: Record<string, unknown>) =>
    s.api("POST", "/core/v1/svc_action", { key, body: { cid: account.cid, ...body } });
  const balance = async (key: string) => {
    const r = await s.api("GET", "/core/v1/billing/balance", { key });
    expect(r.status).to.equal(200);
    return { balance_cents: r.body.balance_cents as number, reserved_cents: r.body.reserved_cents as number };
  };
  async function topUp(key: string, cents: number): Promise<void> {
    const c = await s.api("POST", "/core/v1/billing/create_payment_intent", {
      key,
      body: { amount_cents: cents },
    });
    expect(c.status).to.equal(200);
    const ok = await s.api("POST", `/core/v1/billing/simulated/intents/${c.body.payment_intent_id}/succeed`, {
      key,
    });
    expect(ok.status).to.equal(200);
  }
  /** A funded account (the setup's account keeps its 2 cents) with a usage key capped at `cap`. */
  async function cappedKey(cap: number): Promise<{ key: string; address: string }> {
    const other = await setupAccount(s, SLEEPER);
    await topUp(other.accountKey, 500);
    const k = await s.api("POST", "/core/v1/add_usage_api_key", {
      key: other.accountKey,
      body: { name: "capped", execute_in_groups: [other.groupId], spend_cap_cents: cap },
    });
    expect(k.status).to.equal(201);
    return { key: k.body.usage_api_key as string, address: k.body.id as string };
  }

  it("10 concurrent 1-second runs against a 2-cent cap: two run, eight are refused, 2 cents are spent", async () => {
    const k = await cappedKey(2);
    const answers = await Promise.all(
      Array.from({ length: BURST }, () => run(k.key, { timeout_ms: 1000, js_params: { ms: 700 } })),
    );
    expect(answers.filter((r) => r.status === 200)).to.have.length(2);
    const refused = answers.filter((r) => r.status !== 200);
    expect(refused.map((r) => [r.status, r.body.error.code])).to.deep.equal(
      Array.from({ length: BURST - 2 }, () => [403, "spend_cap_reached"]),
    );
    await billing.flushCharges();
    expect((await billing.keySpend(k.address)).spent_cents).to.equal(2);
  });

  it("10 concurrent 1-second runs against a 2-cent balance: two run, eight are refused, the balance ends at 0", async () => {
    expect((await balance(account.accountKey)).balance_cents).to.equal(2);
    const answers = await Promise.all(
      Array.from({ length: BURST }, () =>
        run(account.accountKey, { timeout_ms: 1000, js_params: { ms: 700 } }),
      ),
    );
    expect(answers.filter((r) => r.status === 200)).to.have.length(2);
    const refused = answers.filter((r) => r.status !== 200);
    expect(refused.map((r) => [r.status, r.body.error.code])).to.deep.equal(
      Array.from({ length: BURST - 2 }, () => [402, "insufficient_credits"]),
    );
    expect(await balance(account.accountKey)).to.deep.equal({ balance_cents: 0, reserved_cents: 0 });
  });

  it("a run whose time limit does not fit the cap is refused naming what it reserves and the timeout_ms that fits", async () => {
    const k = await cappedKey(2);
    const r = await run(k.key, { js_params: { ms: 1 } }); // the service's limit: 30 s, 30 cents
    expect(r.status).to.equal(403);
    expect(r.body.error).to.deep.equal({
      code: "spend_cap_reached",
      message:
        "this run's time limit (30000 ms) reserves 30 cents; this key has spent 0 of its 2-cent cap and 0 cents are reserved for its runs in flight; a timeout_ms of at most 2000 would fit",
      details: {
        key_address: k.address.toLowerCase(),
        spent_cents: 0,
        cap_cents: 2,
        price_cents: 30,
        reserved_cents: 0,
        time_limit_ms: 30_000,
        max_timeout_ms: 2000,
      },
      fix: "Send a smaller `timeout_ms`, retry when the key's runs in flight have ended, or have the owner raise or remove the cap.",
      docs_url: "docs/errors.md#spend_cap_reached",
    });
    expect((await run(k.key, { timeout_ms: 2000, js_params: { ms: 1 } })).status).to.equal(200);
  });

  it("the balance shows what a run in flight reserves, and nothing once it has been charged", async () => {
    const funded = await setupAccount(s, SLEEPER);
    await topUp(funded.accountKey, 500);
    const before = (await balance(funded.accountKey)).balance_cents;
    const pending = run(funded.accountKey, { timeout_ms: 3000, js_params: { ms: 1500 } });
    let seen = await balance(funded.accountKey);
    for (let i = 0; i < 50 && seen.reserved_cents === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      seen = await balance(funded.accountKey);
    }
    expect(seen).to.deep.equal({ balance_cents: before, reserved_cents: 3 });
    const done = await pending;
    expect(done.body.charged_cents).to.equal(2);
    expect(await balance(funded.accountKey)).to.deep.equal({ balance_cents: before - 2, reserved_cents: 0 });
  });
});
