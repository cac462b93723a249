/**
 * relayer/chain/send/balanceMonitor.ts against a real anvil: balances read on refresh, the low-balance
 * warning logged once per crossing (not per reading), and the default threshold following the fee.
 */
import * as crypto from "node:crypto";
import { expect } from "chai";
import { parseEther, toQuantity } from "ethers";
import { Enclave } from "../../../enclave";
import { DEFAULT_MAX_PRIORITY_FEE_WEI, FeeOracle } from "../../../relayer/chain/fees";
import { makeProvider } from "../../../relayer/chain/rpc";
import {
  BalanceMonitor,
  GAS_PER_WRITE,
  LOW_BALANCE_WRITES,
} from "../../../relayer/chain/send/balanceMonitor";
import { WalletPool } from "../../../relayer/chain/send/walletPool";
import { startChain, type TestChain } from "../../helpers/anvil";

type Line = { level: "warn" | "info"; fields: Record<string, unknown>; msg: string };

describe("relayer/chain/send/balanceMonitor", function () {
  this.timeout(60_000);
  let chain: TestChain;
  let rpc: ReturnType<typeof makeProvider>;
  let pool: WalletPool;
  let fees: FeeOracle;
  const enclave = Enclave.fromRootKey(crypto.randomBytes(32).toString("hex"));
  const setBalance = (address: string, eth: string) =>
    rpc.provider.send("anvil_setBalance", [address, toQuantity(parseEther(eth))]);

  function monitor(lines: Line[], lowBalanceWei?: bigint): BalanceMonitor {
    return new BalanceMonitor({
      provider: rpc.provider,
      pool,
      fees,
      lowBalanceWei,
      instanceId: "mon",
      logger: {
        warn: ((fields: Record<string, unknown>, msg: string) =>
          lines.push({ level: "warn", fields, msg })) as never,
        info: ((fields: Record<string, unknown>, msg: string) =>
          lines.push({ level: "info", fields, msg })) as never,
      },
    });
  }

  before(async () => {
    chain = await startChain();
    rpc = makeProvider(chain.rpcUrl, 31337, 2_000);
    fees = new FeeOracle({ provider: rpc.provider, maxPriorityFeePerGas: DEFAULT_MAX_PRIORITY_FEE_WEI });
    pool = new WalletPool();
    await pool.add([0, 1].map((i) => enclave.gasSigner(i, rpc.provider, "mon")));
  });
  after(async () => {
    rpc?.close();
    await chain?.stop();
  });

  it("warns once when a wallet crosses below the threshold, again only after it was funded and fell again", async () => {
    const [a, b] = pool.addresses();
    await setBalance(a, "5");
    await setBalance(b, "5");
    const lines: Line[] = [];
    const m = monitor(lines, parseEther("1"));
    await m.refresh();
    expect(lines).to.deep.equal([]);
    await setBalance(a, "0.5");
    await m.refresh();
    await m.refresh();
    expect(lines).to.deep.equal([
      {
        level: "warn",
        fields: {
          gas_wallet: a,
          balance_wei: parseEther("0.5").toString(),
          threshold_wei: parseEther("1").toString(),
          instance_id: "mon",
        },
        msg: "gas wallet balance low: fund it, or writes will fail with 503 gas_wallet_unfunded",
      },
    ]);
    await setBalance(a, "2");
    await m.refresh();
    await setBalance(a, "0.1");
    await m.refresh();
    expect(lines.map((l) => [l.level, l.fields.gas_wallet])).to.deep.equal([
      ["warn", a],
      ["info", a],
      ["warn", a],
    ]);
  });

  it("reports each wallet's balance and low flag, and allLow only when every wallet is low", async () => {
    const [a, b] = pool.addresses();
    await setBalance(a, "0.1");
    await setBalance(b, "3");
    const m = monitor([], parseEther("1"));
    await m.refresh();
    expect(m.statuses()).to.deep.equal([
      { address: a, balanceWei: parseEther("0.1"), low: true, dry: false },
      { address: b, balanceWei: parseEther("3"), low: false, dry: false },
    ]);
    expect(m.allLow()).to.equal(false);
    await setBalance(b, "0.2");
    await m.refresh();
    expect(m.allLow()).to.equal(true);
  });

  it("by default the threshold is LOW_BALANCE_WRITES writes of GAS_PER_WRITE gas at the current max fee", async () => {
    const m = monitor([]);
    expect(m.thresholdWei()).to.equal(null);
    await m.refresh();
    fees.invalidate();
    const now = await fees.current();
    const price = now.type === 2 ? now.maxFeePerGas : now.gasPrice;
    expect(m.thresholdWei()).to.equal(LOW_BALANCE_WRITES * GAS_PER_WRITE * price);
  });

  it("a wallet that went dry is used again once a reading shows it was funded", async () => {
    const [a] = pool.addresses();
    const w = pool.all()[0];
    await setBalance(a, "0");
    const m = monitor([], parseEther("1"));
    pool.markDry(w);
    await m.refresh();
    expect(w.dry).to.equal(true);
    await setBalance(a, "0.01");
    await m.refresh();
    expect(w.dry).to.equal(false);
  });
});
