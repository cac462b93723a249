/**
 * relayer/chain/send/broadcast.ts against a real anvil: a wallet's transactions leave in nonce order, a
 * nonce moved behind its back is re-read, and a wallet that cannot pay is a typed 503 naming it.
 */
import * as crypto from "node:crypto";
import { expect } from "chai";
import { parseEther, toQuantity, Wallet } from "ethers";
import { Enclave } from "../../../enclave";
import { DEFAULT_MAX_PRIORITY_FEE_WEI, FeeOracle } from "../../../relayer/chain/fees";
import { makeProvider } from "../../../relayer/chain/rpc";
import { Broadcaster } from "../../../relayer/chain/send/broadcast";
import { WalletPool } from "../../../relayer/chain/send/walletPool";
import { ApiError } from "../../../relayer/errors";
import { startChain, type TestChain } from "../../helpers/anvil";

describe("relayer/chain/send/broadcast", function () {
  this.timeout(60_000);
  let chain: TestChain;
  let rpc: ReturnType<typeof makeProvider>;
  let broadcaster: Broadcaster;
  let pool: WalletPool;
  const enclave = Enclave.fromRootKey(crypto.randomBytes(32).toString("hex"));
  const target = Wallet.createRandom().address;

  before(async () => {
    chain = await startChain();
    rpc = makeProvider(chain.rpcUrl, 31337, 2_000);
    const fees = new FeeOracle({
      provider: rpc.provider,
      maxPriorityFeePerGas: DEFAULT_MAX_PRIORITY_FEE_WEI,
    });
    broadcaster = new Broadcaster({ provider: rpc.provider, chainId: 31337, forwarder: target, fees });
    pool = new WalletPool();
    await pool.add([0, 1].map((i) => enclave.gasSigner(i, rpc.provider, "bcast")));
    await rpc.provider.send("anvil_setBalance", [pool.all()[0].address, toQuantity(parseEther("10"))]);
  });
  after(async () => {
    rpc?.close();
    await chain?.stop();
  });

  it("sends in nonce order, reading the first nonce from the chain", async () => {
    const w = pool.all()[0];
    const a = await broadcaster.broadcast(w, "0x", 30_000n);
    const b = await broadcaster.broadcast(w, "0x", 30_000n);
    const [ta, tb] = await Promise.all([a, b].map((s) => rpc.provider.getTransaction(s.hash)));
    expect([ta!.nonce, tb!.nonce, w.nonce]).to.deep.equal([0, 1, 2]);
    expect(a.receipt?.status).to.equal(1); // anvil answers eth_sendRawTransactionSync with the receipt
  });

  it("re-reads a nonce that moved outside the broadcaster, and the transaction lands", async () => {
    const w = pool.all()[0];
    const outside = enclave.gasSigner(0, rpc.provider, "bcast");
    await (await outside.sendTransaction({ to: target, value: 1n, nonce: w.nonce! })).wait();
    const sent = await broadcaster.broadcast(w, "0x", 30_000n);
    expect((await rpc.provider.getTransaction(sent.hash))!.nonce).to.equal(3);
    expect(w.nonce).to.equal(4);
  });

  it("a wallet without funds is 503 gas_wallet_unfunded naming it, and its nonce is re-read next time", async () => {
    const w = pool.all()[1];
    let caught: unknown;
    try {
      await broadcaster.broadcast(w, "0x", 30_000n);
    } catch (err) {
      caught = err;
    }
    expect(caught).to.be.instanceOf(ApiError);
    const e = caught as ApiError;
    expect([e.status, e.code, e.details]).to.deep.equal([
      503,
      "gas_wallet_unfunded",
      { gas_wallet: w.address },
    ]);
    expect(w.nonce).to.equal(null);
  });
});
