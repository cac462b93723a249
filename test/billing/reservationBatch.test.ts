/**
 * PostgreSQL: the reservations of concurrent runs of one instance go together in one
 * `sigil_reserve_batch` call, each with its riding lease (relayer/billing/reservations.ts, migration
 * 22). Each request must get what it would have had alone: exactly as many admitted as the balance or
 * the cap allows (on one instance and across two), a refused lease leaving no reservation row, and a
 * failed statement failing each of its requests with its error and applying nothing.
 */
import { expect } from "chai";
import { join } from "node:path";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { reserveBatcherOf } from "../../relayer/billing/reservations";
import { type DataLayer, SharedConcurrencyCap, openDataLayer } from "../../relayer/db";
import { isPostgresLayer } from "../../relayer/db/engine";
import { ApiError } from "../../relayer/errors";
import { admitRun } from "../../relayer/execution/admission";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { principalFor, tempDir } from "./harness";

const A = "43";
const owner = principalFor(A);

async function outcome(p: Promise<unknown>): Promise<ApiError | "admitted"> {
  try {
    await p;
    return "admitted";
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
}

/** One item of a direct `sigil_reserve_batch` call; a lease capped at `leaseCap` rides where given. */
interface DirectItem {
  account: string;
  key: string;
  cents: number;
  now: number;
  leaseCap?: number;
}

/** The layer's dedicated-connection runner (these suites run on PostgreSQL only). */
function sessionOf(layer: DataLayer) {
  if (!isPostgresLayer(layer)) throw new Error("a PostgreSQL layer was expected");
  return layer.session.bind(layer);
}

const count = async (db: DataLayer, table: string) =>
  Number(((await db.exec(`SELECT COUNT(*) AS n FROM ${table}`)) as Array<{ n: number }>)[0].n);

describeOnPostgres("billing: concurrent reservations admitted in batches (PostgreSQL)", function () {
  this.timeout(60_000);
  let tmp: ReturnType<typeof tempDir>;
  let databaseUrl: string;
  const closers: Array<() => Promise<void>> = [];

  /** One instance: its billing pool and its relayer pool (the leases), both on the test's database. */
  async function instance(cap: number, signupCreditCents = 1000) {
    const billing: Billing = await createBilling({
      dbPath: join(tmp.dir, "billing.sqlite"),
      databaseUrl,
      processor: new SimulatedProcessor(),
      signupCreditCents,
    });
    closers.push(() => billing.close());
    const layer = await openDataLayer({ databaseUrl, sqlitePath: "" });
    closers.push(() => layer.close());
    // Every pooled connection open first, so that the admissions really run side by side.
    await Promise.all(
      [billing.db, layer].flatMap((d) => Array.from({ length: 8 }, () => d.exec("SELECT pg_sleep(0.02)"))),
    );
    return { billing, executionCap: new SharedConcurrencyCap(layer, cap), layer };
  }
  type Instance = Awaited<ReturnType<typeof instance>>;

  /** `n` admissions spread over `instances`, all at once; their outcomes, and the batches they went in. */
  async function admitConcurrently(instances: Instance[], n: number) {
    const before = instances.map((i) => ({ ...reserveBatcherOf(i.billing.db).sizes }));
    const admissions = Array.from({ length: n }, (_, k) =>
      admitRun(instances[k % instances.length], owner, 1_000),
    );
    const answers = await Promise.all(admissions.map(outcome));
    const batches = instances.map((i, k) => {
      const s = reserveBatcherOf(i.billing.db).sizes;
      return { batches: s.batches - before[k].batches, items: s.items - before[k].items, largest: s.largest };
    });
    const release = async () => {
      for (const a of await Promise.allSettled(admissions))
        if (a.status === "fulfilled") {
          a.value.releaseLease();
          await a.value.unreserve();
        }
    };
    return { answers, batches, release };
  }

  beforeEach(async () => {
    tmp = tempDir();
    databaseUrl = await freshDatabaseUrl();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    tmp.cleanup();
  });

  for (const instances of [1, 2])
    it(`40 concurrent 1-cent runs against a 9-cent balance on ${instances} instance(s): exactly 9 admitted, in batches`, async () => {
      const all = await Promise.all(Array.from({ length: instances }, () => instance(100, 9)));
      await all[0].billing.onAccountCreated(A);
      const { answers, batches, release } = await admitConcurrently(all, 40);
      expect(answers.filter((a) => a === "admitted")).to.have.length(9);
      for (const a of answers)
        if (a !== "admitted") {
          expect(a.code).to.equal("insufficient_credits");
          // What a refusal sent alone after the 9 admitted would say: all 9 cents reserved.
          expect(a.details?.reserved_cents).to.equal(9);
        }
      expect(await count(all[0].layer, "billing_reservations")).to.equal(9);
      expect(await count(all[0].layer, "execution_leases")).to.equal(9);
      for (const b of batches) {
        expect(b.items).to.equal(40 / instances);
        expect(b.batches, "fewer statements than admissions").to.be.lessThan(b.items);
        expect(b.largest).to.be.greaterThan(1);
      }
      await release();
    });

  it("two accounts in the same batches, each with its own key cap and lease cap: each gets exactly its own", async () => {
    const [i1, i2] = [await instance(4), await instance(4)];
    const B = "44";
    const usageA = principalFor(A, "usage");
    const usageB = principalFor(B, "usage");
    for (const acct of [A, B]) await i1.billing.onAccountCreated(acct);
    await i1.billing.setKeySpendCap(A, usageA.keyAddress, 3); // A: the cap binds (3 of 4 slots)
    await i1.billing.setKeySpendCap(B, usageB.keyAddress, 10); // B: the lease cap binds (4 slots)
    const admissions = Array.from({ length: 48 }, (_, k) =>
      admitRun(k % 4 < 2 ? i1 : i2, k % 2 ? usageB : usageA, 1_000).then(
        (a) => ({ account: k % 2 ? B : A, a }),
        (e: unknown) => {
          if (e instanceof ApiError) return { account: k % 2 ? B : A, code: e.code };
          throw e;
        },
      ),
    );
    const answers = await Promise.all(admissions);
    const admitted = (acct: string) => answers.filter((x) => x.account === acct && "a" in x);
    const codes = (acct: string) =>
      new Set(
        answers.filter((x) => x.account === acct && "code" in x).map((x) => (x as { code: string }).code),
      );
    expect(admitted(A)).to.have.length(3);
    expect(admitted(B)).to.have.length(4);
    expect([...codes(A)]).to.deep.equal(["spend_cap_reached"]);
    expect([...codes(B)]).to.deep.equal(["too_many_concurrent_executions"]);
    expect(await count(i1.layer, `billing_reservations WHERE account_id = '${A}'`)).to.equal(3);
    expect(await count(i1.layer, `billing_reservations WHERE account_id = '${B}'`)).to.equal(4);
    expect(await count(i1.layer, "execution_leases")).to.equal(7);
    for (const i of [i1, i2]) expect(reserveBatcherOf(i.billing.db).sizes.largest).to.be.greaterThan(1);
    for (const x of answers)
      if ("a" in x) {
        x.a.releaseLease();
        await x.a.unreserve();
      }
  });

  it("a lease refused inside a batch leaves no reservation row: 30 concurrent runs, 3 slots, 3 rows", async () => {
    const ctx = await instance(3, 1000);
    await ctx.billing.onAccountCreated(A);
    const { answers, batches, release } = await admitConcurrently([ctx], 30);
    expect(answers.filter((a) => a === "admitted")).to.have.length(3);
    for (const a of answers) if (a !== "admitted") expect(a.code).to.equal("too_many_concurrent_executions");
    expect(batches[0].largest).to.be.greaterThan(1);
    // Before any flush: the refused leases' reservations were deleted in their batch's transaction.
    expect(await count(ctx.layer, "billing_reservations")).to.equal(3);
    expect(await count(ctx.layer, "execution_leases")).to.equal(3);
    await release();
  });

  /**
   * `sigil_reserve_batch` called directly, in a transaction rolled back afterwards: its rows, and how
   * many times it called the one-item functions (pg_stat_xact_user_functions counts this transaction's).
   */
  async function batchDirect(layer: DataLayer, items: DirectItem[], setup: string[] = []) {
    return sessionOf(layer)(async (s) => {
      await s.exec("BEGIN");
      try {
        await s.exec("SET LOCAL track_functions = 'all'");
        for (const st of setup) await s.exec(st);
        const rows = (await s.exec(
          `SELECT * FROM sigil_reserve_batch($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
             $6::bigint[], $7::bigint[], $8::bigint[], '{}'::text[], '{}'::bigint[], $9::text[], $10::text[],
             $11::int[], $12::bigint[], '{}'::text[])`,
          [
            items.map((_, k) => `r${k}`),
            items.map((i) => i.account),
            items.map((i) => i.key),
            items.map((i) => i.cents),
            items.map((i) => i.now + 60_000),
            items.map((i) => i.now),
            items.map(() => 0),
            items.map(() => 0),
            items.map((i, k) => (i.leaseCap === undefined ? null : `l${k}`)),
            items.map((i) => (i.leaseCap === undefined ? null : i.account)),
            items.map((i) => i.leaseCap ?? null),
            items.map((i) => (i.leaseCap === undefined ? null : 60_000)),
          ],
        )) as Array<Record<string, unknown>>;
        // The admission's asynchronous commit outlives the function (its own SET clause restores only plan_cache_mode).
        const [{ synchronous_commit: syncCommit }] = (await s.exec("SHOW synchronous_commit")) as Array<{
          synchronous_commit: string;
        }>;
        const calls = (await s.exec(
          `SELECT funcname, calls FROM pg_stat_xact_user_functions
            WHERE funcname IN ('sigil_reserve_item', 'sigil_lease')`,
        )) as Array<{ funcname: string; calls: number }>;
        const reservations = (await s.exec(
          "SELECT reservation_id FROM billing_reservations WHERE reservation_id LIKE 'r%' ORDER BY reservation_id",
        )) as Array<{ reservation_id: string }>;
        const answers = rows.map((r) =>
          Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === null ? null : Number(v)])),
        );
        return {
          answers,
          perItemCalls: calls.reduce((n, c) => n + Number(c.calls), 0),
          syncCommit,
          reservations: reservations.map((r) => r.reservation_id),
        };
      } finally {
        await s.exec("ROLLBACK");
      }
    });
  }

  it("a batch reads its accounts' standing once, not once per item (migration 25), with the answers of items sent one by one", async () => {
    const { layer } = await instance(100, 0);
    const now = Date.now();
    const setup = [
      `INSERT INTO accounts (account_id, balance_cents, created_at) VALUES ('${A}', 20, 0), ('44', 7, 0)`,
      `INSERT INTO key_spend (key_address, account_id, spent_cents, cap_cents) VALUES ('0xk2', '${A}', 1, 5)`,
      // A live reservation standing already, and a lease.
      `INSERT INTO billing_reservations VALUES ('old', '${A}', '0xk1', 3, ${now + 60_000}, ${now})`,
      `INSERT INTO execution_leases VALUES ('old', '${A}', ${now + 60_000})`,
    ];
    const items: DirectItem[] = Array.from({ length: 24 }, (_, k) => ({
      account: k % 3 === 2 ? "44" : A,
      key: k % 3 === 1 ? "0xk2" : k % 3 === 2 ? "0xk3" : "0xk1",
      cents: 1 + (k % 4),
      now,
      leaseCap: k % 5 === 4 ? undefined : 6,
    }));
    const batch = await batchDirect(layer, items, setup);
    expect(batch.perItemCalls, "one-item function calls in the batch").to.equal(0);
    expect(batch.syncCommit, "the batch commits asynchronously").to.equal("off");
    // The same items sent alone, in order, in one transaction: `sigil_reserve` (its own standing read
    // per item), then its lease where it fitted, the reservation deleted where the lease was refused.
    const oneByOne = await sessionOf(layer)(async (s) => {
      await s.exec("BEGIN");
      try {
        for (const st of setup) await s.exec(st);
        const answers: Array<Record<string, number | null>> = [];
        for (const [k, i] of items.entries()) {
          const [r] = (await s.exec("SELECT * FROM sigil_reserve($1, $2, $3, $4, $5, $6, 0, 0, '{}', '{}')", [
            `r${k}`,
            i.account,
            i.key,
            i.cents,
            i.now + 60_000,
            i.now,
          ])) as Array<Record<string, unknown>>;
          const answer: Record<string, number | null> = { item: k + 1 };
          for (const [name, v] of Object.entries(r)) answer[name] = v === null ? null : Number(v);
          answer.lease_running = null;
          answer.lease_admitted = null;
          if (answer.admitted === 1 && i.leaseCap !== undefined) {
            const [l] = (await s.exec("SELECT * FROM sigil_lease($1, $2, $3, 60000, '{}', true)", [
              i.account,
              `l${k}`,
              i.leaseCap,
            ])) as Array<{ n: number; admitted: number }>;
            answer.lease_running = Number(l.n);
            answer.lease_admitted = Number(l.admitted);
            if (answer.lease_admitted !== 1)
              await s.exec("DELETE FROM billing_reservations WHERE reservation_id = $1", [`r${k}`]);
          }
          answers.push(answer);
        }
        const rows = (await s.exec(
          "SELECT reservation_id FROM billing_reservations WHERE reservation_id LIKE 'r%' ORDER BY reservation_id",
        )) as Array<{ reservation_id: string }>;
        return { answers, reservations: rows.map((r) => r.reservation_id) };
      } finally {
        await s.exec("ROLLBACK");
      }
    });
    expect(batch.answers).to.deep.equal(oneByOne.answers);
    expect(batch.reservations).to.deep.equal(oneByOne.reservations);
    // The mix did exercise every rule: admitted, the key's cap, the balance, a refused lease.
    const a = batch.answers;
    expect(a.some((r) => r.admitted === 1 && r.lease_admitted !== 0)).to.equal(true);
    expect(a.some((r) => r.admitted === 0 && r.cap_cents !== null)).to.equal(true);
    expect(a.some((r) => r.admitted === 0 && r.cap_cents === null)).to.equal(true);
    expect(a.some((r) => r.admitted === 1 && r.lease_admitted === 0)).to.equal(true);
  });

  it("a reservation expiring between two items' clocks counts for the earlier item only", async () => {
    const { layer } = await instance(100, 0);
    const now = Date.now();
    const setup = [
      `INSERT INTO accounts (account_id, balance_cents, created_at) VALUES ('${A}', 10, 0)`,
      // Live at the first item's clock, expired at the second's.
      `INSERT INTO billing_reservations VALUES ('old', '${A}', '0xk1', 5, ${now + 5}, ${now})`,
    ];
    const { answers } = await batchDirect(
      layer,
      [
        { account: A, key: "0xk1", cents: 4, now },
        { account: A, key: "0xk1", cents: 4, now: now + 10 },
      ],
      setup,
    );
    expect(answers.map((r) => [r.admitted, r.reserved_account_cents])).to.deep.equal([
      [1, 5], // the old row and nothing else
      [1, 4], // the first item's row; the old one expired at this item's clock
    ]);
  });

  it("a batch whose statement fails answers each of its requests with that error and applies nothing", async () => {
    const ctx = await instance(100, 1000);
    await ctx.billing.onAccountCreated(A);
    // A real failure of the statement: the function it calls is gone for a moment.
    await ctx.layer.exec("ALTER FUNCTION sigil_reserve_batch RENAME TO sigil_reserve_batch_away");
    const errors: unknown[] = [];
    const before = { ...reserveBatcherOf(ctx.billing.db).sizes };
    const admissions = Array.from({ length: 12 }, () => admitRun(ctx, owner, 1_000));
    for (const a of await Promise.allSettled(admissions)) {
      expect(a.status).to.equal("rejected");
      if (a.status === "rejected") errors.push(a.reason);
    }
    const sizes = reserveBatcherOf(ctx.billing.db).sizes;
    expect(sizes.items - before.items).to.equal(12);
    expect(sizes.batches - before.batches).to.be.lessThan(12);
    for (const e of errors) expect((e as { code?: string }).code).to.equal("42883"); // undefined_function
    expect(await count(ctx.layer, "billing_reservations")).to.equal(0);
    expect(await count(ctx.layer, "execution_leases")).to.equal(0);
    // Back in place, the same instance admits again (no state was left half-taken).
    await ctx.layer.exec("ALTER FUNCTION sigil_reserve_batch_away RENAME TO sigil_reserve_batch");
    const again = await admitConcurrently([ctx], 5);
    expect(again.answers.filter((a) => a === "admitted")).to.have.length(5);
    await again.release();
  });
});
