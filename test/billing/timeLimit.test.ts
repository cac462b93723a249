/**
 * Runaway actions cost what the caller chose: svc_action's `timeout_ms` (1..the operator's limit) stops
 * a run early, and a run stopped at its limit is charged ceil(limit / 1000) seconds, never the fraction
 * of a millisecond it overran by. Real stack, real SES workers, real ledger. The operator's limit is
 * set to 2,000 ms here so the runs stay short.
 */
import { expect } from "chai";
import { setupAccount } from "../helpers/stack";
import { balanceOf, startBilledStack, type BilledStack } from "./support";

// A whole number of seconds: a run stopped at it is measured a hair over it, which used to cost one
// more second than the limit.
const OPERATOR_LIMIT_MS = 2_000;
const BUSY_LOOP = "async function main() { for (;;) {} }";

describe("billing: an execution's time limit (timeout_ms) and what a stopped run costs", function () {
  this.timeout(120_000);
  let b: BilledStack;
  let account: Awaited<ReturnType<typeof setupAccount>>;

  before(async () => {
    b = await startBilledStack({
      relayer: { executor: { poolSize: 2, limits: { wallTimeMs: OPERATOR_LIMIT_MS } } },
    });
    account = await setupAccount(b.s, BUSY_LOOP);
  });
  after(async () => {
    await b?.close();
  });

  const run = (extra: Record<string, unknown>) =>
    b.s.api("POST", "/core/v1/svc_action", { key: account.accountKey, body: { cid: account.cid, ...extra } });

  it("a busy loop with timeout_ms 1500 is stopped with the timeout code and charged exactly 2 cents", async () => {
    const before = await balanceOf(b, account.accountKey);
    const r = await run({ timeout_ms: 1500 });
    expect(r.status).to.equal(200);
    expect(r.body.has_error).to.equal(true);
    expect(r.body.error.code).to.equal("timeout");
    expect(r.body.execution_ms).to.be.at.least(1500).and.below(OPERATOR_LIMIT_MS);
    expect(r.body.charged_cents).to.equal(2);
    expect(await balanceOf(b, account.accountKey)).to.equal(before - 2);
  });

  it("without timeout_ms a busy loop is stopped at the operator's limit and charged ceil(limit / 1000)", async () => {
    const before = await balanceOf(b, account.accountKey);
    const r = await run({});
    expect(r.body.error.code).to.equal("timeout");
    expect(r.body.execution_ms).to.be.at.least(OPERATOR_LIMIT_MS);
    expect(r.body.charged_cents).to.equal(2);
    expect(await balanceOf(b, account.accountKey)).to.equal(before - 2);
  });

  it("a run stopped at timeout_ms 1000 costs 1 cent, not 2, although it overran the limit", async () => {
    const r = await run({ timeout_ms: 1000 });
    expect(r.body.error.code).to.equal("timeout");
    expect(r.body.execution_ms).to.be.above(1000);
    expect(r.body.charged_cents).to.equal(1);
  });

  it("concurrent runs of one key are each charged once, under a reference of their own", async () => {
    const before = await balanceOf(b, account.accountKey);
    const runs = await Promise.all([1, 2, 3, 4].map(() => run({ timeout_ms: 1 })));
    expect(runs.map((r) => r.body.charged_cents)).to.deep.equal([1, 1, 1, 1]);
    expect(await balanceOf(b, account.accountKey)).to.equal(before - 4);
    const refs = (await b.billing.history(account.accountId.toString(), 0, 4)).items.map((i) => i.reference);
    expect(new Set(refs).size).to.equal(4);
    for (const ref of refs) expect(ref).to.match(/^exec:[0-9a-f-]{36}$/);
  });

  for (const [what, value] of [
    ["0", 0],
    ["negative", -1],
    ["not an integer", 1500.5],
    ["a string", "1500"],
    ["above the operator's limit", OPERATOR_LIMIT_MS + 1],
  ] as const) {
    it(`timeout_ms ${what} is refused with 400 invalid_request naming the field and the range; nothing is charged`, async () => {
      const before = await balanceOf(b, account.accountKey);
      const r = await run({ timeout_ms: value });
      expect(r.status).to.equal(400);
      expect(r.body.error.code).to.equal("invalid_request");
      expect(r.body.error.details).to.deep.equal({ field: "timeout_ms", min: 1, max: OPERATOR_LIMIT_MS });
      expect(r.body.error.message).to.equal(
        `\`timeout_ms\` must be an integer number of milliseconds from 1 to ${OPERATOR_LIMIT_MS} (this service's limit).`,
      );
      expect(await balanceOf(b, account.accountKey)).to.equal(before);
    });
  }
});
