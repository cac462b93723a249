/**
 * Reservations of runs in flight, at the Billing interface, on each engine: a settled run is charged
 * exactly its time and gives the rest back; a run that never ran gives everything back; two instances
 * on one database admit exactly what the cap allows; and a reservation of an instance that died
 * (a real process, SIGKILLed) stops counting at its deadline plus the slack.
 */
import { expect } from "chai";
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { postgresStatementCount } from "../../relayer/db/engine";
import { ApiError } from "../../relayer/errors";
import { describeOnEngines, freshDatabaseUrl } from "../helpers/postgres";
import { principalFor, tempDir } from "./harness";

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("expected an ApiError");
}

describeOnEngines("billing: reservations of runs in flight", function (engine) {
  this.timeout(120_000);
  let tmp: ReturnType<typeof tempDir>;
  let databaseUrl: string | undefined;
  const billings: Billing[] = [];
  const children = new Set<ChildProcess>();
  const A = "21";
  const owner = principalFor(A);
  const usage = principalFor(A, "usage", "0x" + "ab".repeat(20));

  async function open(
    opts: { signupCreditCents?: number; reservationSlackMs?: number; chargeFlushMs?: number } = {},
  ): Promise<Billing> {
    const b = await createBilling({
      dbPath: join(tmp.dir, "billing.sqlite"),
      databaseUrl,
      processor: new SimulatedProcessor(),
      ...opts,
    });
    billings.push(b);
    return b;
  }
  const rows = async (b: Billing) =>
    Number(
      ((await b.db.exec("SELECT COUNT(*) AS n FROM billing_reservations")) as Array<{ n: number }>)[0].n,
    );

  beforeEach(async () => {
    tmp = tempDir();
    databaseUrl = engine === "postgres" ? await freshDatabaseUrl() : undefined;
  });
  afterEach(async () => {
    for (const c of children) c.kill("SIGKILL");
    children.clear();
    for (const b of billings.splice(0)) await b.close();
    tmp.cleanup();
  });

  it("a run is charged once, without asking the ledger: settling it again charges nothing", async () => {
    const b = await open({ signupCreditCents: 100, chargeFlushMs: 600_000 }); // flushed when told
    await b.onAccountCreated(A);
    const r = await b.reserveExecution(owner, 3_000);
    const before = postgresStatementCount();
    expect(await b.settleExecution(r, 1_000, "req-once")).to.deep.equal({ charged_cents: 1, applied: true });
    // PostgreSQL: only the shrink of the run's row to its charge (sent off the answer's path), no
    // read of the ledger for a reference that is a fresh request id.
    if (engine === "postgres") {
      await new Promise((r) => setTimeout(r, 300)); // the shrink is sent after the answer
      expect(postgresStatementCount() - before).to.equal(1);
    }
    await b.flushCharges();
    expect(await b.settleExecution(r, 1_000, "req-once")).to.deep.equal({ charged_cents: 0, applied: false });
    expect(await b.settleExecution(r, 1_000, "req-other")).to.deep.equal({
      charged_cents: 0,
      applied: false,
    });
    await b.flushCharges();
    expect((await b.balance(A)).balance_cents).to.equal(99);
  });

  it("a settled run's row shrinks to its charge in the next admission's round trip, not one of its own", async () => {
    const b = await open({ signupCreditCents: 100, chargeFlushMs: 600_000 }); // flushed when told
    await b.onAccountCreated(A);
    const first = await b.reserveExecution(owner, 30_000);
    const before = postgresStatementCount();
    await b.settleExecution(first, 1_000, "req-ride-1");
    const second = await b.reserveExecution(owner, 30_000);
    // PostgreSQL: the admission is the only statement sent, and it carried the shrink (the row holds
    // the charge, not the 30-cent worst case); SQLite: the same, inside its transaction.
    if (engine === "postgres") expect(postgresStatementCount() - before).to.equal(1);
    const cents = async (id: string) =>
      Number(
        (
          (await b.db.exec(
            engine === "postgres"
              ? "SELECT cents FROM billing_reservations WHERE reservation_id = $1"
              : "SELECT cents FROM billing_reservations WHERE reservation_id = ?",
            [id],
          )) as Array<{ cents: number }>
        )[0].cents,
      );
    expect(await cents(first.id)).to.equal(1);
    expect(await cents(second.id)).to.equal(30);
    await b.settleExecution(second, 2_500, "req-ride-2");
    await b.flushCharges();
    expect((await b.balance(A)).balance_cents).to.equal(96);
    expect(await rows(b)).to.equal(0);
  });

  it("a settled run is charged exactly its time and the rest of its reservation is released", async () => {
    const b = await open({ signupCreditCents: 100 });
    await b.onAccountCreated(A);
    const r = await b.reserveExecution(owner, 30_000);
    expect(await b.reservedCents(A)).to.equal(30);
    expect((await b.balance(A)).balance_cents).to.equal(100);
    expect(await b.settleExecution(r, 1_500, "req-settle")).to.deep.equal({
      charged_cents: 2,
      applied: true,
    });
    await b.flushCharges();
    expect(await b.reservedCents(A)).to.equal(0);
    expect((await b.balance(A)).balance_cents).to.equal(98);
    const [charge] = (await b.history(A, 0, 1)).items;
    expect(charge).to.include({ type: "debit", amount_cents: 2, reference: "exec:req-settle" });
    expect(await b.audit(A)).to.deep.equal({ balance_cents: 98, ledger_sum_cents: 98 });
    expect(await rows(b)).to.equal(0);
  });

  it("a reserved run that never ran is charged nothing and its whole reservation is released", async () => {
    const b = await open({ signupCreditCents: 100 });
    await b.onAccountCreated(A);
    const r = await b.reserveExecution(owner, 5_000);
    expect(await b.reservedCents(A)).to.equal(5);
    await b.releaseExecution(r);
    await b.flushCharges();
    expect(await b.reservedCents(A)).to.equal(0);
    expect((await b.balance(A)).balance_cents).to.equal(100);
    expect(await rows(b)).to.equal(0);
  });

  // Two instances share PostgreSQL; on SQLite, instances are processes sharing the file (its write lock
  // decides), and two connections to one file in one process would block each other's event loop.
  it("20 concurrent 1-second runs against a 5-cent cap (through two instances on PostgreSQL): exactly 5 are admitted", async () => {
    const b1 = await open({ signupCreditCents: 1000 });
    const b2 = engine === "postgres" ? await open() : b1;
    await b1.onAccountCreated(A);
    await b1.setKeySpendCap(A, usage.keyAddress, 5);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? b2 : b1).reserveExecution(usage, 1_000)),
    );
    const admitted = outcomes.flatMap((o, i) => (o.status === "fulfilled" ? [{ r: o.value, i }] : []));
    expect(admitted).to.have.length(5);
    const codes = outcomes.flatMap((o) => (o.status === "rejected" ? [(o.reason as ApiError).code] : []));
    expect(codes).to.deep.equal(Array.from({ length: 15 }, () => "spend_cap_reached"));
    for (const { r, i } of admitted) await (i % 2 ? b2 : b1).settleExecution(r, 999, `req-${i}`);
    await b1.flushCharges();
    await b2.flushCharges();
    expect(await b1.keySpend(usage.keyAddress)).to.deep.equal({ spent_cents: 5, cap_cents: 5 });
  });

  it("a crashed instance's reservation counts until its run's deadline plus the slack, then stops", async () => {
    const SLACK_MS = 1_000;
    const RUN_MS = 1_000;
    const b = await open({ signupCreditCents: 1, reservationSlackMs: SLACK_MS });
    await b.onAccountCreated(A);
    const child = spawn(
      process.execPath,
      ["-r", "ts-node/register/transpile-only", join(__dirname, "fixtures", "reservingInstance.ts")],
      {
        env: {
          ...process.env,
          BILLING_DB: join(tmp.dir, "billing.sqlite"),
          BILLING_DATABASE_URL: databaseUrl ?? "",
          ACCOUNT: A,
          RUN_LIMIT_MS: String(RUN_MS),
          SLACK_MS: String(SLACK_MS),
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    children.add(child);
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<NodeJS.Signals | null>((res) => child.once("exit", (_c, sig) => res(sig)));
    await new Promise<void>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        if (/^RESERVED \S+ \d+$/m.test(out)) resolve();
      });
      void exited.then(() => reject(new Error(`the reserving instance exited early: ${stderr}`)));
    });
    child.kill("SIGKILL");
    const killedAt = Date.now();
    expect(await exited).to.equal("SIGKILL");

    const first = await refusal(b.reserveExecution(owner, 1_000));
    expect([first.status, first.code, first.details]).to.deep.equal([
      402,
      "insufficient_credits",
      { balance_cents: 1, price_cents: 1, reserved_cents: 1, time_limit_ms: 1_000 },
    ]);
    let admittedAt = 0;
    while (!admittedAt) {
      try {
        await b.reserveExecution(owner, 1_000);
        admittedAt = Date.now();
      } catch (e) {
        if (!(e instanceof ApiError) || e.code !== "insufficient_credits") throw e;
        expect(Date.now() - killedAt, "still counted long after its expiry").to.be.below(
          RUN_MS + SLACK_MS + 2_000,
        );
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    // The crashed instance's row was swept by the admission that no longer counted it.
    expect(await rows(b)).to.equal(1);
  });
});
