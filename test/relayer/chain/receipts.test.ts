/**
 * relayer/chain/send/receipts.ts: reading a node's receipt, and waiting for one on a real anvil.
 */
import { expect } from "chai";
import { parseEther, Wallet } from "ethers";
import { makeProvider } from "../../../relayer/chain/rpc";
import { toReceipt, waitForReceipt } from "../../../relayer/chain/send/receipts";
import { ApiError } from "../../../relayer/errors";
import { DEV_KEY, startChain, type TestChain } from "../../helpers/anvil";

describe("relayer/chain/send/receipts", function () {
  this.timeout(60_000);
  let chain: TestChain;
  let rpc: ReturnType<typeof makeProvider>;

  before(async () => {
    chain = await startChain();
    rpc = makeProvider(chain.rpcUrl, 31337, 2_000);
  });
  after(async () => {
    rpc?.close();
    await chain?.stop();
  });

  it("reads status, block, gas used and the index in the block; a malformed index is null", () => {
    const raw = { transactionHash: "0xaa", status: "0x1", blockNumber: "0x10", logs: [], gasUsed: "0x5208" };
    expect(toReceipt("0xaa", { ...raw, transactionIndex: "0x2" })).to.deep.equal({
      status: 1,
      result: { txHash: "0xaa", blockNumber: 16, logs: [], gasUsed: 21_000n },
      transactionIndex: 2,
    });
    expect(toReceipt("0xaa", { ...raw, transactionIndex: "two" }).transactionIndex).to.equal(null);
  });

  it("waits for a transaction mined later (polling), and returns its receipt", async () => {
    await rpc.provider.send("evm_setAutomine", [false]);
    try {
      const tx = await new Wallet(DEV_KEY, rpc.provider).sendTransaction({
        to: Wallet.createRandom().address,
        value: parseEther("1"),
      });
      const waiting = waitForReceipt(
        { provider: rpc.provider, receiptTimeoutMs: 10_000, rpcTimeoutMs: 2_000 },
        tx.hash,
      );
      await new Promise((r) => setTimeout(r, 50));
      await rpc.provider.send("evm_mine", []);
      const receipt = await waiting;
      expect([receipt.status, receipt.result.txHash, receipt.result.gasUsed]).to.deep.equal([
        1,
        tx.hash,
        21_000n,
      ]);
    } finally {
      await rpc.provider.send("evm_setAutomine", [true]);
    }
  });

  it("a transaction never mined within receiptTimeoutMs is 503 chain_unavailable naming its hash", async () => {
    const hash = "0x" + "ab".repeat(32);
    let caught: unknown;
    try {
      await waitForReceipt({ provider: rpc.provider, receiptTimeoutMs: 100, rpcTimeoutMs: 2_000 }, hash);
    } catch (err) {
      caught = err;
    }
    const e = caught as ApiError;
    expect([e.status, e.code, e.details]).to.deep.equal([503, "chain_unavailable", { tx_hash: hash }]);
  });
});
