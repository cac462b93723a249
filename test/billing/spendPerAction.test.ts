/**
 * Spend per action: every execution charge records the CID of the code that ran (a pinned CID as
 * given; inline code under the CID the service computed for it), and GET /billing/history shows it as
 * `action_cid`. Real stack, real SES workers, real ledger.
 */
import { expect } from "chai";
import { setupAccount } from "../helpers/stack";
import { startBilledStack, type BilledStack } from "./support";

interface Item {
  operation: string;
  reference: string;
  action_cid: string | null;
}

describe("billing: spend per action (action_cid on execution charges)", function () {
  this.timeout(120_000);
  let b: BilledStack;
  let account: Awaited<ReturnType<typeof setupAccount>>;

  before(async () => {
    b = await startBilledStack({ signupCreditCents: 100 });
    account = await setupAccount(b.s);
  });
  after(async () => {
    await b?.close();
  });

  const history = async (): Promise<Item[]> => {
    const r = await b.s.api("GET", "/core/v1/billing/history?page_number=0&page_size=100", {
      key: account.accountKey,
    });
    expect(r.status).to.equal(200);
    return r.body.items as Item[];
  };
  const run = (body: Record<string, unknown>) =>
    b.s.api("POST", "/core/v1/svc_action", { key: account.accountKey, body });

  it("a run of a pinned CID is charged with that CID as action_cid", async () => {
    const r = await run({ cid: account.cid });
    expect(r.status).to.equal(200);
    const charge = (await history()).find((i) => i.reference === `exec:${r.headers.get("x-request-id")}`);
    expect(charge).to.deep.include({ operation: "execution", action_cid: account.cid });
  });

  it("a run of inline code is charged under the CID the service computed for it: the same code pinned or inline counts as one action", async () => {
    const r = await run({ code: account.code });
    expect(r.status).to.equal(200);
    expect(r.body.cid).to.equal(account.cid);
    const charge = (await history()).find((i) => i.reference === `exec:${r.headers.get("x-request-id")}`);
    expect(charge).to.deep.include({ operation: "execution", action_cid: account.cid });
  });

  it("credits, writes and pins name no action", async () => {
    const others = (await history()).filter((i) => i.operation !== "execution");
    expect(others.map((i) => i.operation)).to.include.members(["signup_credit", "pin"]);
    expect(others.map((i) => i.action_cid)).to.deep.equal(others.map(() => null));
  });
});
