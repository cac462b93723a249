/**
 * PostgreSQL unreachable: the work a charge is for is refused before it starts (503
 * database_unavailable), and a charge made after the work while the database is down is kept and
 * committed once it is back, never dropped.
 */
import { expect } from "chai";
import { Client } from "pg";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { ApiError } from "../../relayer/errors";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { principalFor } from "./harness";

describeOnPostgres("billing on PostgreSQL: the database goes away", function () {
  this.timeout(60_000);
  let url: string;
  let billing: Billing;
  const name = () => new URL(url).pathname.slice(1);

  /** Refuses new connections to the database and ends the open ones (as a failover or outage would). */
  async function cutOff(): Promise<void> {
    const admin = new Client({ connectionString: url.replace(/\/[^/]+$/, "/postgres") });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE ${name()} WITH ALLOW_CONNECTIONS false`);
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [
        name(),
      ]);
    } finally {
      await admin.end();
    }
  }
  async function restore(): Promise<void> {
    const admin = new Client({ connectionString: url.replace(/\/[^/]+$/, "/postgres") });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE ${name()} WITH ALLOW_CONNECTIONS true`);
    } finally {
      await admin.end();
    }
  }

  beforeEach(async function () {
    url = await freshDatabaseUrl();
    billing = await createBilling({
      dbPath: "",
      databaseUrl: url,
      processor: new SimulatedProcessor(),
      signupCreditCents: 100,
      chargeFlushMs: 20,
    });
    await billing.onAccountCreated("5");
  });
  afterEach(async function () {
    await restore();
    await billing.close();
  });

  it("assertCanAfford answers 503 database_unavailable with Retry-After: the work does not start", async function () {
    await cutOff();
    let refused: unknown;
    await billing.assertCanAfford(principalFor("5"), "execution").catch((e: unknown) => (refused = e));
    expect(refused).to.be.instanceOf(ApiError);
    expect([
      (refused as ApiError).status,
      (refused as ApiError).code,
      (refused as ApiError).retryAfter,
    ]).to.deep.equal([503, "database_unavailable", 1]);
  });

  it("a charge made while the database is down is kept and committed once, when it is back", async function () {
    const p = principalFor("5");
    await billing.assertCanAfford(p, "execution");
    await cutOff();
    // The work ran; its charge cannot be refused after the fact.
    expect(await billing.chargeExecution(p, 1500, "during-outage")).to.deep.equal({
      charged_cents: 2,
      applied: true,
    });
    await new Promise((r) => setTimeout(r, 200)); // several failed flushes
    await restore();
    const deadline = Date.now() + 10_000;
    let audit = await billing.audit("5").catch(() => null);
    while ((audit === null || audit.balance_cents !== 98) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      audit = await billing.audit("5").catch(() => null);
    }
    expect(audit).to.deep.equal({ balance_cents: 98, ledger_sum_cents: 98 });
    expect(
      (await billing.history("5", 0, 10)).items.filter((i) => i.reference === "exec:during-outage"),
    ).to.have.length(1);
  });
});
