/**
 * A run's admission (relayer/execution/admission.ts): its reservation and its execution lease, both
 * or neither, with the refusals of two separate steps (billing's first). On PostgreSQL the lease rides
 * in the reservation's round trip: one statement for both, still exact across two instances (two
 * billing pools and two relayer pools on one database, as two processes have).
 */
import { expect } from "chai";
import { join } from "node:path";
import { type Billing, type Prices, SimulatedProcessor, createBilling } from "../../relayer/billing";
import {
  type DataLayer,
  SharedConcurrencyCap,
  openDataLayer,
  postgresStatementCount,
} from "../../relayer/db";
import { ApiError } from "../../relayer/errors";
import { admitRun } from "../../relayer/execution/admission";
import { ConcurrencyCap, type ExecutionCap } from "../../relayer/rateLimit";
import { describeOnEngines, describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { principalFor, tempDir } from "./harness";

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "admitted";
  } catch (e) {
    if (e instanceof ApiError) return e.code;
    throw e;
  }
}

const A = "41";
const owner = principalFor(A);
const usage = principalFor(A, "usage", "0x" + "cd".repeat(20));
const count = async (db: DataLayer, table: string) =>
  Number(((await db.exec(`SELECT COUNT(*) AS n FROM ${table}`)) as Array<{ n: number }>)[0].n);

describeOnEngines("execution admission: the reservation and the lease, both or neither", function (engine) {
  this.timeout(60_000);
  let tmp: ReturnType<typeof tempDir>;
  let databaseUrl: string | undefined;
  const closers: Array<() => Promise<void>> = [];

  /** One instance: its billing and, on PostgreSQL, its own relayer pool holding the leases. */
  async function instance(cap: number, signupCreditCents = 1000, prices?: Partial<Prices>) {
    const billing: Billing = await createBilling({
      dbPath: join(tmp.dir, "billing.sqlite"),
      databaseUrl,
      processor: new SimulatedProcessor(),
      signupCreditCents,
      prices,
    });
    closers.push(() => billing.close());
    let executionCap: ExecutionCap = new ConcurrencyCap(cap);
    if (databaseUrl) {
      const layer = await openDataLayer({ databaseUrl, sqlitePath: "" });
      closers.push(() => layer.close());
      executionCap = new SharedConcurrencyCap(layer, cap);
    }
    return { billing, executionCap };
  }

  beforeEach(async () => {
    tmp = tempDir();
    databaseUrl = engine === "postgres" ? await freshDatabaseUrl() : undefined;
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    tmp.cleanup();
  });

  it("a refused reservation takes no lease: the one slot is still free for the next run", async () => {
    const ctx = await instance(1);
    await ctx.billing.onAccountCreated(A);
    await ctx.billing.setKeySpendCap(A, usage.keyAddress, 0);
    expect(await outcome(admitRun(ctx, usage, 1_000))).to.equal("spend_cap_reached");
    const admitted = await admitRun(ctx, owner, 1_000);
    expect(admitted.reservation?.worstCents).to.equal(1);
    admitted.releaseLease();
    await admitted.unreserve();
  });

  it("a refused lease releases the reservation: only the admitted run's worst case stays reserved", async () => {
    const ctx = await instance(1);
    await ctx.billing.onAccountCreated(A);
    const first = await admitRun(ctx, owner, 3_000);
    const refused = await admitRun(ctx, owner, 5_000).catch((e: unknown) => e);
    expect((refused as ApiError).code).to.equal("too_many_concurrent_executions");
    expect((refused as ApiError).message).to.equal(`Account ${A} already runs 1 executions (the maximum).`);
    expect(await ctx.billing.reservedCents(A)).to.equal(3);
    await ctx.billing.flushCharges();
    expect(await count(ctx.billing.db, "billing_reservations")).to.equal(1);
    first.releaseLease();
    await first.unreserve();
    expect(await ctx.billing.reservedCents(A)).to.equal(0);
  });

  it("a free run reserves nothing and still takes its lease (on its own: nothing to ride with)", async () => {
    const ctx = await instance(1, 0, { execution_cents_per_second: 0 });
    const first = await admitRun(ctx, owner, 1_000);
    expect(first.reservation?.id).to.equal("free");
    expect(await outcome(admitRun(ctx, owner, 1_000))).to.equal("too_many_concurrent_executions");
    first.releaseLease();
  });
});

describeOnPostgres("execution admission on PostgreSQL: one round trip, exact across instances", function () {
  this.timeout(60_000);
  let tmp: ReturnType<typeof tempDir>;
  let databaseUrl: string;
  const closers: Array<() => Promise<void>> = [];

  async function instance(cap: number) {
    const billing = await createBilling({
      dbPath: join(tmp.dir, "billing.sqlite"),
      databaseUrl,
      processor: new SimulatedProcessor(),
      signupCreditCents: 1000,
    });
    closers.push(() => billing.close());
    const layer = await openDataLayer({ databaseUrl, sqlitePath: "" });
    closers.push(() => layer.close());
    return { billing, executionCap: new SharedConcurrencyCap(layer, cap), layer };
  }

  beforeEach(async () => {
    tmp = tempDir();
    databaseUrl = await freshDatabaseUrl();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    tmp.cleanup();
  });

  it("the reservation and the lease are one statement, and the lease's release rides along with the next", async () => {
    const ctx = await instance(1);
    await ctx.billing.onAccountCreated(A);
    const first = await admitRun(ctx, owner, 1_000);
    first.releaseLease(); // the slot is free at once for this instance: the next admission deletes it
    const before = postgresStatementCount();
    const second = await admitRun(ctx, owner, 1_000);
    expect(postgresStatementCount() - before).to.equal(1);
    expect(await count(ctx.layer, "execution_leases")).to.equal(1);
    second.releaseLease();
    await first.unreserve();
    await second.unreserve();
  });

  it("a refused lease leaves no reservation row in the database, even before any flush", async () => {
    const ctx = await instance(1);
    await ctx.billing.onAccountCreated(A);
    const first = await admitRun(ctx, owner, 1_000);
    expect(await outcome(admitRun(ctx, owner, 1_000))).to.equal("too_many_concurrent_executions");
    expect(await count(ctx.layer, "billing_reservations")).to.equal(1);
    first.releaseLease();
    await first.unreserve();
  });

  it("90 concurrent runs over two instances, 7 slots and a 10-cent key cap: exactly 7 admitted, 7 rows reserved", async () => {
    const [i1, i2] = [await instance(7), await instance(7)];
    await i1.billing.onAccountCreated(A);
    await i1.billing.setKeySpendCap(A, usage.keyAddress, 10);
    // Every pooled connection open first, so that the admissions really run side by side.
    await Promise.all(
      [i1, i2].flatMap((i) => Array.from({ length: 10 }, () => i.layer.exec("SELECT pg_sleep(0.05)"))),
    );
    const admissions = Array.from({ length: 90 }, (_, n) => admitRun(n % 2 ? i2 : i1, usage, 1_000));
    const answers = await Promise.all(admissions.map(outcome));
    expect(answers.filter((a) => a === "admitted")).to.have.length(7);
    const refusals = new Set(answers.filter((a) => a !== "admitted"));
    for (const code of refusals)
      expect(["too_many_concurrent_executions", "spend_cap_reached"]).to.include(code);
    expect(await count(i1.layer, "execution_leases")).to.equal(7);
    expect(await count(i1.layer, "billing_reservations WHERE expires_ms > 0")).to.equal(7);
    for (const a of await Promise.allSettled(admissions))
      if (a.status === "fulfilled") {
        a.value.releaseLease();
        await a.value.unreserve();
      }
  });
});
