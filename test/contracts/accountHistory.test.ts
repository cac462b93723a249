/**
 * The replay every reader uses (relayer/permissions/accountHistory.ts): an account's events fetched with
 * eth_getLogs and applied in chain order. The node here is Hardhat's; `limited` puts in front of it the
 * block-range cap hosted nodes impose, to show the replay asks for the whole span first and halves a
 * refused one.
 */
import { expect } from "chai";
import { loadFixture, mine } from "@nomicfoundation/hardhat-network-helpers";
import { ethers } from "hardhat";
import { accountEvents } from "../../relayer/permissions/accountHistory";
import { CID_HELLO, readAccount, twoAccountsFixture } from "./fixtures";

/** The chain's node, refusing eth_getLogs over more than `cap` blocks; records every range asked for. */
function limited(cap: number) {
  const ranges: [number, number][] = [];
  return {
    ranges,
    async send(method: string, params: unknown[]): Promise<unknown> {
      if (method === "eth_getLogs") {
        const { fromBlock, toBlock } = params[0] as { fromBlock: string; toBlock: string };
        const span: [number, number] = [Number(fromBlock), Number(toBlock)];
        ranges.push(span);
        if (span[1] - span[0] + 1 > cap) throw new Error(`query exceeds max block range ${cap}`);
      }
      return ethers.provider.send(method, params);
    },
  };
}

describe("account history (events replayed from the logs)", function () {
  it("rebuilds names, members and CID strings in the order they happened", async function () {
    const { registry, ownerA, pkpA1 } = await loadFixture(twoAccountsFixture);
    await registry.connect(ownerA).createGroup("late", "made last", [pkpA1], [CID_HELLO]);
    const account = await readAccount(registry, 1n);
    expect(
      [...account.groups.values()].map((g) => [g.name, [...g.pkps], [...g.actions.values()]]),
    ).to.deep.equal([
      ["target", [], []],
      ["other", [], []],
      ["late", [pkpA1.toLowerCase()], [CID_HELLO]],
    ]);
  });

  it("asks for the whole span once when the node accepts it", async function () {
    const { registry } = await loadFixture(twoAccountsFixture);
    await mine(20_000);
    const node = limited(1_000_000);
    const head = await ethers.provider.getBlockNumber();
    const events = await accountEvents(node, await registry.getAddress(), 1n, 0, head);
    expect([node.ranges, events.map((e) => e.ev.name)]).to.deep.equal([
      [[0, head]],
      ["AccountCreated", "GroupCreated", "GroupCreated", "PkpCreated", "PkpCreated"],
    ]);
  });

  it("halves a refused span until the node accepts it, keeping chain order", async function () {
    const { registry, ownerA } = await loadFixture(twoAccountsFixture);
    await mine(20_000);
    await registry.connect(ownerA).createGroup("after the gap", "", [], []);
    const node = limited(6_000);
    const head = await ethers.provider.getBlockNumber();
    const events = await accountEvents(node, await registry.getAddress(), 1n, 0, head, { maxRange: 5_000 });
    expect(events.map((e) => e.ev.name)).to.deep.equal([
      "AccountCreated",
      "GroupCreated",
      "GroupCreated",
      "PkpCreated",
      "PkpCreated",
      "GroupCreated",
    ]);
    // Every accepted range is within the cap; refused ones were split, not skipped.
    const accepted = node.ranges.filter(([a, b]) => b - a + 1 <= 6_000);
    expect(accepted.reduce((n, [a, b]) => n + (b - a + 1), 0)).to.equal(head + 1);
  });

  it("gives up with the node's error once a refused span is down to maxRange", async function () {
    const { registry } = await loadFixture(twoAccountsFixture);
    await mine(20_000);
    const head = await ethers.provider.getBlockNumber();
    const error = await accountEvents(limited(1_000), await registry.getAddress(), 1n, 0, head, {
      maxRange: 5_000,
    }).then(
      () => null,
      (err: Error) => err.message,
    );
    expect(error).to.equal("query exceeds max block range 1000");
  });
});
