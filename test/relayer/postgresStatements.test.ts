/**
 * What a request costs PostgreSQL, counted (relayer/db/engine.ts counts every statement this process
 * sends): a budget per bearer execution and per path-A write, so a change that adds round trips to the
 * hot path fails here. The list behind the numbers is in docs/performance.md, "PostgreSQL per request".
 * Once without billing and once with it (its write-behind flush pushed out of the window: it is one
 * transaction per 50 ms shared by every charge, counted by `npm run bench:pgtrips`); webhook delivery
 * polling is pushed out of the window so that only the requests' statements are counted.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Billing, SimulatedProcessor, createBilling } from "../../relayer/billing";
import { postgresStatementCount } from "../../relayer/db";
import { describeOnPostgres, freshDatabaseUrl } from "../helpers/postgres";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

/**
 * Per execution: the per-IP, key and account buckets together (the key is one the cache holds), the
 * write mark, the lease, the audit-log entry; and the release of its lease after the answer (sent on
 * its own when no admission of this instance follows within RELEASE_FLUSH_MS, as with one client
 * here; under load it rides along with the next).
 */
const EXECUTION_BUDGET = 5;
/** Per path-A write: the per-IP and account buckets together, the write mark, raising the mark, the audit-log entry. */
const WRITE_BUDGET = 4;
/**
 * Per execution with billing: the above, with the lease riding in the reservation's round trip (the
 * admission, with the shrinks of this instance's settled rows riding along too) and, when no admission
 * followed within SHRINK_RIDE_MS, the settled row's shrink on its own.
 */
const BILLED_EXECUTION_BUDGET = 6;

describeOnPostgres("relayer: PostgreSQL statements per request", function () {
  this.timeout(120_000);
  for (const billed of [false, true]) describeStatements(billed);
});

function describeStatements(billed: boolean) {
  describe(billed ? "with billing" : "without billing", function () {
    let s: Stack;
    let billing: Billing | undefined;
    let billingDir: string | undefined;
    let a: Awaited<ReturnType<typeof setupAccount>>;
    let usageKey: string;

    let database: string;

    before(async function () {
      const databaseUrl = await freshDatabaseUrl();
      database = new URL(databaseUrl).pathname.slice(1);
      if (billed) {
        billingDir = mkdtempSync(join(tmpdir(), "sigil-pgstatements-"));
        billing = await createBilling({
          dbPath: join(billingDir, "billing.sqlite"),
          databaseUrl,
          processor: new SimulatedProcessor(),
          signupCreditCents: 1_000_000,
          chargeFlushMs: 600_000,
        });
      }
      s = await startStack({
        databaseUrl,
        billing,
        webhooks: { deliveryPollMs: 600_000 },
        // The webhooks' chain scanner keeps its cursor in the database once per poll; the permission
        // cache needs no poll here (it applies this instance's own writes from their receipts).
        pollIntervalMs: 600_000,
        // The audit log's chaining runs behind the answers, a batch of entries per transaction (counted
        // in docs/performance.md); pushed out of the window like the webhooks' polling.
        audit: { chainAfterMs: 600_000, sweepMs: 600_000 },
      });
      a = await setupAccount(s, "async function main() { return 'hello world'; }");
      usageKey = (
        await s.api("POST", "/core/v1/add_usage_api_key", {
          key: a.accountKey,
          body: { name: "u", execute_in_groups: [a.groupId] },
        })
      ).body.usage_api_key;
      // Warm: the first requests of a key create its bucket rows.
      for (let i = 0; i < 3; i++)
        await s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid: a.cid } });
    });
    after(async () => {
      await s?.close();
      await billing?.close();
      if (billingDir) rmSync(billingDir, { recursive: true, force: true });
    });

    /**
     * Statements per request to this stack's database (the process-wide count also holds other suites'
     * leftover timers), the least of three measurements: on a loaded machine a timer of the stack itself
     * (a rate-limit sweep, a late lease release) can land inside one window; a change that adds a
     * statement to every request shows in all three.
     */
    async function perRequest(n: number, send: () => Promise<{ status: number }>, status: number) {
      let least = Infinity;
      for (let attempt = 0; attempt < 3; attempt++) {
        await new Promise((r) => setTimeout(r, 100)); // releases of earlier requests flushed
        const before = postgresStatementCount(database);
        for (let i = 0; i < n; i++) expect((await send()).status).to.equal(status);
        least = Math.min(least, (postgresStatementCount(database) - before) / n);
      }
      return least;
    }

    const budget = billed ? BILLED_EXECUTION_BUDGET : EXECUTION_BUDGET;
    it(`a bearer execution sends at most ${budget} statements`, async function () {
      const cost = await perRequest(
        20,
        () => s.api("POST", "/core/v1/svc_action", { key: usageKey, body: { cid: a.cid } }),
        200,
      );
      expect(cost).to.be.at.most(budget);
    });

    it(`a path-A write sends at most ${WRITE_BUDGET} statements`, async function () {
      const cost = await perRequest(
        5,
        () => s.api("POST", "/core/v1/pkps/create", { key: a.accountKey, body: {} }),
        201,
      );
      expect(cost).to.be.at.most(WRITE_BUDGET);
    });
  });
}
