/**
 * relayer/chain/send/queue.ts: how queued forward requests become one transaction (pure: no chain).
 */
import { expect } from "chai";
import { Wallet } from "ethers";
import { encodeExecute, encodeExecuteBatch, type SignedForwardRequest } from "../../../relayer/chain/batch";
import {
  BatchQueue,
  HOLD_MAX_MS,
  MAX_BATCH_GAS,
  batchItemGas,
  settleFromReceipt,
  transactionFor,
} from "../../../relayer/chain/send/queue";
import type { Outcome, Pending } from "../../../relayer/chain/send/types";

const FROM = Wallet.createRandom().address;
const TO = Wallet.createRandom().address;

function request(gas: bigint): SignedForwardRequest {
  return {
    from: FROM,
    to: TO,
    value: 0n,
    gas,
    deadline: 2_000_000_000,
    data: "0x1234",
    signature: "0x" + "11".repeat(65),
  };
}

function pending(gas = 100_000n, settled: Array<Outcome | { error: unknown }> = []): Pending {
  return { queuedAt: performance.now(), signed: request(gas), nonce: 0n, settle: (o) => settled.push(o) };
}

describe("relayer/chain/send/queue", () => {
  it("takes at most maxBatch of the oldest requests, in order", () => {
    const q = new BatchQueue(3);
    const items = Array.from({ length: 5 }, () => pending());
    for (const p of items) {
      q.startPreparing();
      q.donePreparing(p);
    }
    expect(q.takeBatch()).to.deep.equal(items.slice(0, 3));
    expect(q.takeBatch()).to.deep.equal(items.slice(3));
    expect(q.length).to.equal(0);
  });

  it("stops a batch before MAX_BATCH_GAS, but always takes the first request", () => {
    const q = new BatchQueue(16);
    const big = MAX_BATCH_GAS / 2n;
    const items = [pending(big), pending(big), pending(MAX_BATCH_GAS * 2n)];
    for (const p of items) {
      q.startPreparing();
      q.donePreparing(p);
    }
    expect(q.takeBatch()).to.have.length(1);
    expect(q.takeBatch()).to.have.length(1);
    expect(q.takeBatch()).to.have.length(1);
  });

  it("holds a partial batch while another write is being prepared, and wakes within HOLD_MAX_MS", async () => {
    const q = new BatchQueue(16);
    q.startPreparing();
    q.donePreparing(pending());
    q.startPreparing(); // a second write is still simulating
    let woke = 0;
    expect(q.shouldHold(() => woke++)).to.equal(true);
    await new Promise((r) => setTimeout(r, HOLD_MAX_MS + 20));
    expect(woke).to.equal(1);
    expect(q.shouldHold(() => woke++)).to.equal(false); // held long enough
  });

  it("does not hold when nothing is being prepared, nor a full batch", () => {
    const lone = new BatchQueue(2);
    lone.startPreparing();
    lone.donePreparing(pending());
    expect(lone.shouldHold(() => undefined)).to.equal(false);
    const full = new BatchQueue(1);
    full.startPreparing();
    full.donePreparing(pending());
    full.startPreparing();
    expect(full.shouldHold(() => undefined)).to.equal(false);
  });

  it("one request is forwarder.execute; several are executeBatch refunding the gas wallet, with their gas summed", () => {
    const one = [pending(100_000n)];
    const single = transactionFor(one, FROM);
    expect(single.data).to.equal(encodeExecute(one[0].signed));
    expect(single.gasLimit).to.equal(
      (100_000n * 64n) / 63n + 150_000n + BigInt((single.data.length - 2) / 2) * 16n,
    );
    const refund = Wallet.createRandom().address;
    const two = [pending(100_000n), pending(200_000n)];
    const batch = transactionFor(two, refund);
    expect(batch.data).to.equal(
      encodeExecuteBatch(
        two.map((p) => p.signed),
        refund,
      ),
    );
    expect(batch.gasLimit).to.equal(60_000n + batchItemGas(two[0].signed) + batchItemGas(two[1].signed));
  });

  it("a reverted transaction settles every request as skipped (no forwarder nonce used)", () => {
    const settled: Array<Outcome | { error: unknown }> = [];
    const batch = [pending(1n, settled), pending(1n, settled)];
    const result = { txHash: "0xab", blockNumber: 5, logs: [], gasUsed: 1n };
    settleFromReceipt(batch, { status: 0, result, transactionIndex: 0 }, TO);
    expect(settled).to.deep.equal([
      { kind: "skipped", txHash: "0xab" },
      { kind: "skipped", txHash: "0xab" },
    ]);
  });

  it("a mined single request settles ok with the whole receipt", () => {
    const settled: Array<Outcome | { error: unknown }> = [];
    const result = { txHash: "0xcd", blockNumber: 5, logs: [], gasUsed: 1n };
    settleFromReceipt([pending(1n, settled)], { status: 1, result, transactionIndex: 0 }, TO);
    expect(settled).to.deep.equal([{ kind: "ok", result }]);
  });
});
