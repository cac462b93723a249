/**
 * Executions are scheduled fairly between accounts (docs/actions.md, "Scheduling between accounts"):
 * the relayer hands the executor each run's account, so one account's runs, up to its limit of
 * concurrent executions, cannot keep another account's run waiting behind them.
 */
import { expect } from "chai";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

describe("relayer: fair execution between accounts", function () {
  this.timeout(180_000);
  let s: Stack;

  before(async () => {
    s = await startStack({ executor: { poolSize: 2 } });
  });
  after(async () => {
    await s?.close();
  });

  it("another account's execution is answered before a flood of long executions from one account", async () => {
    const code = "async function main(p) { if (p && p.wait) await sleep(p.wait); return 1; }";
    const flooder = await setupAccount(s, code);
    const other = await setupAccount(s, code);
    const answered: string[] = [];
    const flood = Array.from({ length: 6 }, (_, i) =>
      s
        .api("POST", "/core/v1/svc_action", {
          key: flooder.accountKey,
          body: { cid: flooder.cid, js_params: { wait: 1500 } },
        })
        .then((r) => {
          expect(r.status).to.equal(200);
          answered.push(`flood-${i + 1}`);
        }),
    );
    // The flood has both workers and four runs waiting.
    await new Promise((r) => setTimeout(r, 300));
    const r = await s.api("POST", "/core/v1/svc_action", { key: other.accountKey, body: { cid: other.cid } });
    expect(r.status).to.equal(200);
    expect(r.body.response).to.equal(1);
    answered.push("other");
    await Promise.all(flood);
    // First come, first served, it would be answered after at least four of the flood's runs.
    expect(answered.indexOf("other")).to.be.at.most(2);
  });
});
