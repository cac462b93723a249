/**
 * relayer/chain/send/nonces.ts against the real forwarder on anvil: the forwarder nonce cache, and a
 * gas wallet's pending transaction count.
 */
import { expect } from "chai";
import { Wallet } from "ethers";
import { makeProvider } from "../../../relayer/chain/rpc";
import { ForwarderNonces, pendingTransactionCount } from "../../../relayer/chain/send/nonces";
import { DEV_KEY } from "../../helpers/anvil";
import { startStack, type Stack } from "../../helpers/stack";

describe("relayer/chain/send/nonces", function () {
  this.timeout(120_000);
  let s: Stack;
  let rpc: ReturnType<typeof makeProvider>;

  before(async () => {
    s = await startStack({ gasWallets: 1 });
    rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
  });
  after(async () => {
    rpc?.close();
    await s?.close();
  });

  it("reads a principal's forwarder nonce from the chain once, then answers from the cache", async () => {
    const calls: string[] = [];
    const provider = rpc.provider;
    const counting = Object.create(provider, {
      send: { value: (m: string, p: unknown[]) => (calls.push(m), provider.send(m, p)) },
    });
    const nonces = new ForwarderNonces(counting, s.deployment.forwarder);
    const principal = Wallet.createRandom().address;
    expect(await nonces.get(principal)).to.equal(0n);
    expect(await nonces.get(principal.toLowerCase())).to.equal(0n);
    expect(calls).to.deep.equal(["eth_call"]);
  });

  it("after a landed request the next nonce is used + 1; forget() reads the chain again", async () => {
    const nonces = new ForwarderNonces(rpc.provider, s.deployment.forwarder);
    const principal = Wallet.createRandom().address;
    nonces.consumed(principal, 4n);
    expect(await nonces.get(principal)).to.equal(5n);
    nonces.forget(principal);
    expect(await nonces.get(principal)).to.equal(0n);
  });

  it("a wallet's pending count includes transactions not mined yet", async () => {
    const dev = new Wallet(DEV_KEY, rpc.provider);
    const mined = await pendingTransactionCount(rpc.provider, dev.address);
    await rpc.provider.send("evm_setAutomine", [false]);
    try {
      await dev.sendTransaction({ to: dev.address, value: 1n, nonce: mined });
      expect(await pendingTransactionCount(rpc.provider, dev.address)).to.equal(mined + 1);
      expect(await rpc.provider.getTransactionCount(dev.address, "latest")).to.equal(mined);
    } finally {
      await rpc.provider.send("evm_mine", []);
      await rpc.provider.send("evm_setAutomine", [true]);
    }
  });
});
