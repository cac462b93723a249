/**
 * Path-A fees (relayer/chain/fees.ts) on a real anvil chain: many writes in a row keep the price where
 * it was (the former "twice eth_gasPrice" doubled it at every refresh on a chain where our own tips are
 * the fee history), the tip is the node's suggestion capped by the operator, a rising base fee does not
 * strand a transaction, and a chain without EIP-1559 gets legacy transactions at eth_gasPrice.
 */
import { expect } from "chai";
import fc from "fast-check";
import { NonceManager, Wallet, parseEther, type JsonRpcProvider } from "ethers";
import { registryInterface } from "../../relayer/chain/abi";
import { bumpLegacy, chooseFees, FeeOracle, LEGACY_BUMP_PERCENT } from "../../relayer/chain/fees";
import { makeProvider } from "../../relayer/chain/rpc";
import { Sender } from "../../relayer/chain/sender";
import { Enclave } from "../../enclave";
import { DEV_KEY, startChain, type TestChain } from "../helpers/anvil";
import { startStack, testProvider, type Stack } from "../helpers/stack";

const GWEI = 1_000_000_000n;

interface MinedTx {
  from: string;
  type: number;
  maxPriorityFeePerGas: bigint | null;
  maxFeePerGas: bigint | null;
  /** What the transaction paid per gas: base fee + effective tip. */
  effectiveGasPrice: bigint;
  baseFee: bigint;
}

/** Every transaction of `senders` in blocks `from`..latest, in order. */
async function minedFrom(provider: JsonRpcProvider, from: number, senders: string[]): Promise<MinedTx[]> {
  const wanted = new Set(senders.map((a) => a.toLowerCase()));
  const latest = Number(await provider.send("eth_blockNumber", []));
  const out: MinedTx[] = [];
  for (let n = from; n <= latest; n++) {
    const block = await provider.send("eth_getBlockByNumber", ["0x" + n.toString(16), true]);
    for (const tx of block.transactions) {
      if (!wanted.has(tx.from.toLowerCase())) continue;
      out.push({
        from: tx.from,
        type: Number(tx.type),
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas ? BigInt(tx.maxPriorityFeePerGas) : null,
        maxFeePerGas: tx.maxFeePerGas ? BigInt(tx.maxFeePerGas) : null,
        effectiveGasPrice: BigInt(tx.gasPrice),
        baseFee: BigInt(block.baseFeePerGas ?? 0),
      });
    }
  }
  return out;
}

describe("relayer: path-A fees", function () {
  this.timeout(300_000);

  describe("fee choice (pure)", function () {
    it("type 2 pays exactly the tip over the base fee, never above the cap, and survives a doubled base fee", () => {
      const q = fc.bigInt({ min: 0n, max: 10n ** 15n });
      fc.assert(
        fc.property(q, fc.option(q), fc.option(q), q, (baseFee, suggestedTip, gasPrice, cap) => {
          const f = chooseFees({ baseFee, suggestedTip, gasPrice, maxPriorityFeePerGas: cap });
          if (f.type !== 2) throw new Error("expected type 2");
          expect(f.maxPriorityFeePerGas <= cap).to.equal(true);
          expect(f.maxPriorityFeePerGas >= 0n).to.equal(true);
          expect(f.maxFeePerGas).to.equal(2n * baseFee + f.maxPriorityFeePerGas);
          const expectedTip =
            suggestedTip ?? (gasPrice !== null && gasPrice > baseFee ? gasPrice - baseFee : 0n);
          expect(f.maxPriorityFeePerGas).to.equal(expectedTip < cap ? expectedTip : cap);
        }),
      );
    });

    it("a chain without a base fee pays exactly eth_gasPrice in a legacy transaction", () => {
      expect(
        chooseFees({ baseFee: null, suggestedTip: null, gasPrice: 7n * GWEI, maxPriorityFeePerGas: GWEI }),
      ).to.deep.equal({ type: 0, gasPrice: 7n * GWEI });
    });

    it("an underpriced legacy retry is bumped by a bounded step, and type 2 is left alone", () => {
      fc.assert(
        fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), fc.integer({ min: 0, max: 3 }), (p, k) => {
          const bumped = bumpLegacy({ type: 0, gasPrice: p }, k);
          if (bumped.type !== 0) throw new Error("expected type 0");
          const factor = (100n + LEGACY_BUMP_PERCENT) ** BigInt(k);
          expect(bumped.gasPrice >= p).to.equal(true);
          expect(bumped.gasPrice <= (p * factor) / 100n ** BigInt(k) + 2n * BigInt(k)).to.equal(true);
        }),
      );
      const t2 = { type: 2 as const, maxFeePerGas: 3n, maxPriorityFeePerGas: 1n };
      expect(bumpLegacy(t2, 3)).to.equal(t2);
    });
  });

  describe("300 path-A writes through the relayer", function () {
    let s: Stack;
    let txs: MinedTx[];

    before(async () => {
      s = await startStack();
      const start = Number(await s.provider.send("eth_blockNumber", [])) + 1;
      const keys: string[] = [];
      for (let i = 0; i < 3; i++)
        keys.push(
          (await s.api("POST", "/core/v1/new_account", { body: { account_name: `f${i}` } })).body.api_key,
        );
      // At least 300 writes and at least five fee refreshes (3 s each): the old price doubled per refresh.
      const began = Date.now();
      let written = 0;
      await Promise.all(
        keys.map(async (key, k) => {
          for (let i = 0; written < 300 || Date.now() - began < 16_000; i++) {
            const r = await s.api("POST", "/core/v1/pkps/create", { key, body: { name: `p${k}-${i}` } });
            expect(r.status, JSON.stringify(r.body)).to.equal(201);
            written++;
          }
        }),
      );
      txs = await minedFrom(
        s.provider,
        start,
        [0, 1, 2, 3].map((i) => s.enclave.gasAddress(i)),
      );
      expect(txs.length).to.be.greaterThan(20);
    });
    after(async () => {
      await s?.close();
    });

    it("the last transactions' effective gas price is at most twice the first's plus the base-fee rise", () => {
      const first = txs[0];
      const rise = (t: MinedTx) => (t.baseFee > first.baseFee ? t.baseFee - first.baseFee : 0n);
      for (const t of txs.slice(-20))
        expect(
          t.effectiveGasPrice <= 2n * first.effectiveGasPrice + rise(t),
          `last ${t.effectiveGasPrice} wei, first ${first.effectiveGasPrice} wei`,
        ).to.equal(true);
    });

    it("every transaction is type 2 and pays exactly its tip over the base fee, never above the default cap", () => {
      for (const t of txs) {
        expect(t.type).to.equal(2);
        expect(t.effectiveGasPrice - t.baseFee).to.equal(t.maxPriorityFeePerGas);
        expect(t.maxPriorityFeePerGas! <= 2n * GWEI).to.equal(true);
      }
    });
  });

  describe("a sender on its own (base fee changes, tip cap)", function () {
    let s: Stack;
    let close: () => void;
    let rpc: JsonRpcProvider;
    let accountKey: string;
    const WALLET = 10; // a gas wallet the relayer under test does not use

    before(async () => {
      s = await startStack();
      const p = makeProvider(s.chain.rpcUrl, 31337, 2_000);
      rpc = p.provider;
      close = p.close;
      const funder = new NonceManager(new Wallet(DEV_KEY, s.provider));
      await (
        await funder.sendTransaction({ to: s.enclave.gasAddress(WALLET), value: parseEther("100") })
      ).wait();
      accountKey = (await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key;
    });
    after(async () => {
      close?.();
      await s?.close();
    });

    /** A fresh sender: its own fee cache. */
    async function newSender(maxPriorityFeePerGas?: bigint): Promise<Sender> {
      const sender = new Sender({
        provider: rpc,
        signer: s.enclave,
        gasSigners: [s.enclave.gasSigner(WALLET, rpc)],
        chainId: 31337,
        registry: s.deployment.registry,
        forwarder: s.deployment.forwarder,
        receiptTimeoutMs: 10_000,
        rpcTimeoutMs: 2_000,
        maxPriorityFeePerGas,
      });
      await sender.init();
      return sender;
    }
    let n = 0;
    const write = (sender: Sender) =>
      sender.write({
        apiKey: accountKey,
        principal: s.enclave.principalAddress(accountKey),
        kind: "account",
        data: registryInterface.encodeFunctionData("createPkp", [`b${n++}`, ""]),
      });
    const txOf = async (hash: string) => {
      const tx = await s.provider.send("eth_getTransactionByHash", [hash]);
      const block = await s.provider.send("eth_getBlockByNumber", [tx.blockNumber, false]);
      return {
        maxFeePerGas: BigInt(tx.maxFeePerGas),
        maxPriorityFeePerGas: BigInt(tx.maxPriorityFeePerGas),
        effectiveGasPrice: BigInt(tx.gasPrice),
        baseFee: BigInt(block.baseFeePerGas),
      };
    };
    const setNextBaseFee = (wei: bigint) =>
      s.provider.send("anvil_setNextBlockBaseFeePerGas", ["0x" + wei.toString(16)]);

    it("the tip is the node's suggestion clamped to the operator's cap", async () => {
      const r = await write(await newSender(12_345n));
      const tx = await txOf(r.txHash);
      expect(tx.maxPriorityFeePerGas).to.equal(12_345n);
      expect(tx.effectiveGasPrice - tx.baseFee).to.equal(12_345n);
    });

    it("a base fee that nearly doubles after the fees were read does not strand the transaction", async () => {
      const sender = await newSender();
      await setNextBaseFee(10n * GWEI);
      await s.provider.send("evm_mine", []);
      const first = await txOf((await write(sender)).txHash);
      // Within the cache's 3 s: the second write reuses the fees read for the first.
      await setNextBaseFee(19n * GWEI);
      const second = await txOf((await write(sender)).txHash);
      expect(second.baseFee).to.equal(19n * GWEI);
      expect(second.maxFeePerGas).to.equal(first.maxFeePerGas);
      expect(second.effectiveGasPrice).to.equal(19n * GWEI + second.maxPriorityFeePerGas);
    });

    it("a base fee above the fee cap is answered by re-reading the fees, and the write lands", async () => {
      const sender = await newSender();
      const first = await txOf((await write(sender)).txHash);
      const high = first.maxFeePerGas * 10n;
      await setNextBaseFee(high);
      const second = await txOf((await write(sender)).txHash);
      expect(second.baseFee).to.equal(high);
      expect(second.maxFeePerGas).to.equal(2n * high + second.maxPriorityFeePerGas);
    });
  });

  describe("a chain without EIP-1559 (anvil --hardfork berlin)", function () {
    let chain: TestChain;
    let provider: JsonRpcProvider;

    before(async () => {
      chain = await startChain({ args: ["--hardfork", "berlin"] });
      provider = testProvider(chain.rpcUrl);
    });
    after(async () => {
      provider?.destroy();
      await chain?.stop();
    });

    it("fees are legacy at exactly eth_gasPrice, and a gas wallet's transaction with them lands", async () => {
      const fees = await new FeeOracle({ provider, maxPriorityFeePerGas: 2n * GWEI }).current();
      expect(fees).to.deep.equal({ type: 0, gasPrice: BigInt(await provider.send("eth_gasPrice", [])) });
      const enclave = Enclave.fromRootKey("0x" + "3c".repeat(32));
      const gas = enclave.gasSigner(0, provider);
      const funder = new Wallet(DEV_KEY, provider);
      await (
        await funder.sendTransaction({ to: enclave.gasAddress(0), value: parseEther("1"), type: 0 })
      ).wait();
      const signed = await gas.signTransaction({
        ...fees,
        chainId: 31337,
        nonce: 0,
        to: funder.address,
        gasLimit: 21_000n,
        value: 1n,
        data: "0x",
      });
      const hash = await provider.send("eth_sendRawTransaction", [signed]);
      const receipt = await provider.waitForTransaction(hash);
      expect([receipt?.status, receipt?.gasPrice]).to.deep.equal([1, fees.type === 0 ? fees.gasPrice : -1n]);
    });
  });
});
