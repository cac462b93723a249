/**
 * A chain-event trigger end to end, through the API on a real stack: created with the event's
 * signature and a topic filter on the embedded chain, it runs its action once for a matching Transfer
 * (with the decoded arguments in js_params.trigger), not at all for a Transfer to someone else, and a
 * first block beyond the chain's head is refused at creation by the chain-event source's own rules.
 */
import { expect } from "chai";
import { getAddress, zeroPadValue } from "ethers";
import { startStack, type Stack } from "../helpers/stack";
import { eventually } from "../../testkit/eventually";
import { accountWithKey, createTrigger, waitForRun } from "./helpers";
import { TRANSFER, deployToken, type TokenChain } from "./chainEventsKit";

const ECHO = "async function main(p) { return { args: p.trigger.args, firing: p.trigger.firing_id }; }";
const MINE = getAddress("0x00000000000000000000000000000000000a11ce");
const OTHER = getAddress("0x000000000000000000000000000000000000b0b0");

describe("triggers: a chain event through the API", function () {
  this.timeout(120_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof accountWithKey>>;
  let token: TokenChain;

  before(async () => {
    s = await startStack({ triggers: { pollMs: 50 } });
    a = await accountWithKey(s, ECHO);
    token = await deployToken(s.chain.rpcUrl);
  });
  after(async () => {
    token?.close();
    await s?.close();
  });

  const runsOf = async (id: string) =>
    (await s.api("GET", `/core/v1/triggers/${id}/runs`, { key: a.accountKey })).body.items as Array<{
      id: string;
      firing_id: string;
    }>;

  it("runs once for a Transfer to the filtered address, with its decoded arguments", async () => {
    const t = await createTrigger(s, a, {
      kind: "chain_event",
      chain_event: {
        chain_id: 31337,
        address: token.address,
        event: TRANSFER,
        topics: [null, zeroPadValue(MINE, 32)],
      },
    });
    const toOther = await token.mint(OTHER, 1n);
    const toMe = await token.mint(MINE, 5n);
    const runs = await eventually(
      async () => {
        const r = await runsOf(t.id);
        return r.length > 0 ? r : undefined;
      },
      { what: "the Transfer's run", timeoutMs: 30_000 },
    );
    const run = await waitForRun(s, a.accountKey, t.id, runs[0].id);
    expect(run.status, JSON.stringify(run)).to.equal("succeeded");
    expect(run.response.args).to.include({ to: MINE, value: "5" });
    expect(run.firing_id).to.equal(
      `chain:31337:${toMe.txHash}:1`.replace(/:1$/, `:${run.firing_id.split(":").pop()}`),
    );
    // The Transfer to someone else, a block earlier, fired nothing; nothing fires twice.
    await token.mine(3);
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await runsOf(t.id)).map((r) => r.firing_id)).to.deep.equal([run.firing_id]);
    expect(toOther.block).to.be.lessThan(toMe.block);
  });

  it("refuses a from_block beyond the chain's head with invalid_chain_event naming it", async () => {
    const head = await token.head();
    const r = await s.api("POST", "/core/v1/triggers", {
      key: a.accountKey,
      body: {
        name: "future",
        kind: "chain_event",
        cid: a.cid,
        run_as: { key_address: a.keyAddress },
        chain_event: { chain_id: 31337, address: token.address, event: TRANSFER, from_block: head + 100 },
      },
    });
    expect([r.status, r.body.error?.code, r.body.error?.details?.field]).to.deep.equal([
      400,
      "invalid_chain_event",
      "chain_event.from_block",
    ]);
  });
});
