/**
 * Per-instance gas wallets, end to end: the enclave derives each instance's own wallets (unnamed =
 * exactly the wallets of before instance ids), a relayer sends only from its own, skips a wallet that
 * cannot pay, and reports balances and the low-balance state in /metrics and GET /health.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import fc from "fast-check";
import { parseEther, toQuantity } from "ethers";
import { Enclave, isEnclaveError } from "../../enclave";
import { registryInterface } from "../../relayer/chain/abi";
import { makeProvider } from "../../relayer/chain/rpc";
import { Sender } from "../../relayer/chain/sender";
import { ApiError } from "../../relayer/errors";
import { banner } from "../../scripts/start/banner";
import { ConfigError, loadConfig } from "../../scripts/start/config";
import { instanceGasAddresses } from "../../scripts/start/funding";
import { OPERATOR_HEADERS, startStack, type Stack } from "../helpers/stack";

const VECTORS = JSON.parse(
  fs.readFileSync(path.join(__dirname, "../fixtures/enclave/derivation-vectors.json"), "utf8"),
) as { root: string; gas: { index: number; address: string }[] };

describe("gas wallets: derivation per instance", () => {
  const enclave = Enclave.fromRootKey(VECTORS.root);
  const instanceId = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,31}$/);

  it("no instance id gives exactly the addresses pinned before instance ids existed (funded data folders keep them)", () => {
    expect(VECTORS.gas.map((g) => enclave.gasAddress(g.index))).to.deep.equal(
      VECTORS.gas.map((g) => g.address),
    );
    expect(VECTORS.gas.map((g) => enclave.gasAddress(g.index, undefined))).to.deep.equal(
      VECTORS.gas.map((g) => g.address),
    );
  });

  it("a signer's address is the derived address, for named and unnamed instances", async () => {
    expect(await enclave.gasSigner(2, null, "eu-1").getAddress()).to.equal(enclave.gasAddress(2, "eu-1"));
    expect(await enclave.gasSigner(2, null).getAddress()).to.equal(enclave.gasAddress(2));
  });

  it("start-up funding targets the instance's own wallets", () => {
    expect(instanceGasAddresses(enclave, 2, "b")).to.deep.equal([
      enclave.gasAddress(0, "b"),
      enclave.gasAddress(1, "b"),
    ]);
    expect(instanceGasAddresses(enclave, 1, undefined)).to.deep.equal([VECTORS.gas[0].address]);
  });

  it("property: two different (instance, index) pairs never share an address, nor with an unnamed wallet", () => {
    fc.assert(
      fc.property(
        fc.option(instanceId, { nil: undefined }),
        fc.nat(7),
        fc.option(instanceId, { nil: undefined }),
        fc.nat(7),
        (idA, i, idB, j) => {
          fc.pre(idA !== idB || i !== j);
          return enclave.gasAddress(i, idA) !== enclave.gasAddress(j, idB);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("property: an id that is a prefix of another, with any index, still derives another address", () => {
    fc.assert(
      fc.property(
        instanceId,
        fc.stringMatching(/^[a-z0-9]{1,4}$/),
        fc.nat(3),
        fc.nat(3),
        (id, tail, i, j) => {
          fc.pre(id.length + tail.length <= 32);
          return enclave.gasAddress(i, id) !== enclave.gasAddress(j, id + tail);
        },
      ),
      { numRuns: 200 },
    );
  });

  for (const bad of ["", "UPPER", "-lead", "a".repeat(33), "sp ace", 7]) {
    it(`instance id ${JSON.stringify(bad)} is refused with invalid_instance_id`, () => {
      let caught: unknown;
      try {
        enclave.gasAddress(0, bad as string);
      } catch (err) {
        caught = err;
      }
      expect(isEnclaveError(caught) && caught.code).to.equal("invalid_instance_id");
    });
  }
});

describe("gas wallets: configuration and the start banner", () => {
  const env = { SIGIL_DATA_DIR: "/tmp/sigil-gas-wallets-test" };

  it("SIGIL_GAS_LOW_BALANCE_WEI is read as wei", () => {
    const c = loadConfig({ ...env, SIGIL_GAS_LOW_BALANCE_WEI: "500000000000000000" }, "/tmp");
    expect(c.gasLowBalanceWei).to.equal(parseEther("0.5"));
    expect(loadConfig(env, "/tmp").gasLowBalanceWei).to.equal(undefined);
  });

  it("a SIGIL_GAS_LOW_BALANCE_WEI that is not a whole number is a configuration problem saying what it is", () => {
    let caught: unknown;
    try {
      loadConfig({ ...env, SIGIL_GAS_LOW_BALANCE_WEI: "0.5" }, "/tmp");
    } catch (err) {
      caught = err;
    }
    expect((caught as ConfigError).problems).to.deep.equal([
      'SIGIL_GAS_LOW_BALANCE_WEI="0.5" is not valid: the gas wallet balance below which a warning is logged, in wei (a whole number, e.g. 500000000000000000 for 0.5 ETH).',
    ]);
  });

  it("the banner lists the instance's gas wallets, naming the instance", () => {
    const config = loadConfig({ ...env, SIGIL_INSTANCE_ID: "blue" }, "/tmp");
    const wallets = ["0x" + "1".repeat(40), "0x" + "2".repeat(40)];
    const out = banner(config, {
      url: "http://127.0.0.1:8000",
      chainId: 31337,
      rpcUrl: "http://127.0.0.1:8545",
      embeddedChain: true,
      deployment: { registry: wallets[0], forwarder: wallets[1], deployBlock: 1 },
      freshDeployment: true,
      paymentProcessor: "simulated",
      gasWallets: wallets,
    });
    expect(out).to.contain(`  gas wallets  ${wallets[0]} (instance blue)\n               ${wallets[1]}\n`);
  });
});

describe("gas wallets: a relayer instance with an id", function () {
  this.timeout(120_000);
  let s: Stack;

  before(async () => {
    // Threshold above the 100 ETH each wallet is funded with: every wallet is low from the first reading.
    s = await startStack({ instanceId: "blue", gasWallets: 2, gasLowBalanceWei: parseEther("1000") });
  });
  after(async () => {
    await s?.close();
  });

  async function health() {
    // The first balance reading starts with the relayer; wait for it.
    for (let i = 0; i < 100; i++) {
      const r = await s.api("GET", "/health", { headers: OPERATOR_HEADERS });
      if (r.body.gas_wallet_balances.wallets.every((w: { balance_wei: unknown }) => w.balance_wei !== null))
        return r;
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error("no balance reading within 5 s");
  }

  it("sends from its own wallets and lists them in the operator view", async () => {
    const own = [0, 1].map((i) => s.enclave.gasAddress(i, "blue"));
    const r = await s.api("POST", "/core/v1/new_account", { body: {} });
    expect(r.status).to.equal(201);
    const tx = await s.provider.getTransaction(r.body.tx_hash ?? (await latestTxHash(s)));
    expect(own).to.include(tx!.from);
    expect((await s.api("GET", "/health", { headers: OPERATOR_HEADERS })).body.gas_wallets).to.deep.equal(
      own,
    );
  });

  it("GET /health shows each wallet's balance, and degraded (still 200) with gas_wallets_low when all are low", async () => {
    const r = await health();
    expect(r.status).to.equal(200);
    expect(r.body.status).to.equal("degraded");
    expect(r.body.degraded_reasons).to.deep.equal(["gas_wallets_low"]);
    expect(r.body.gas_wallet_balances.low_balance_threshold_wei).to.equal(parseEther("1000").toString());
    for (const w of r.body.gas_wallet_balances.wallets) {
      expect(BigInt(w.balance_wei) <= parseEther("100")).to.equal(true);
      expect([w.low, w.unfunded]).to.deep.equal([true, false]);
    }
  });

  it("/metrics has each wallet's balance, low flag and the threshold", async () => {
    await health();
    const text = (await s.api("GET", "/metrics")).body as string;
    // By index (the order of /health's gas_wallets); the addresses are for the operator's scrape only.
    for (const i of ["0", "1"]) {
      expect(text).to.match(new RegExp(`sigil_gas_wallet_balance_wei\\{wallet="${i}"\\} \\d`));
      expect(text).to.contain(`sigil_gas_wallet_low{wallet="${i}"} 1`);
      expect(text).to.contain(`sigil_gas_wallet_unfunded{wallet="${i}"} 0`);
    }
    expect(text).to.contain(`sigil_gas_wallet_low_balance_threshold_wei ${Number(parseEther("1000"))}`);
  });

  it("a scrape reports the periodic reading: it does not read the chain itself", async () => {
    await health();
    const a = s.enclave.gasAddress(0, "blue");
    await s.provider.send("anvil_setBalance", [a, toQuantity(parseEther("7"))]);
    const text = (await s.api("GET", "/metrics")).body as string;
    expect(text).to.contain(`sigil_gas_wallet_balance_wei{wallet="0"} `);
    expect(text).not.to.contain(`sigil_gas_wallet_balance_wei{wallet="0"} ${Number(parseEther("7"))}`);
  });
});

describe("gas wallets: a wallet that runs dry", function () {
  this.timeout(120_000);
  let s: Stack;
  let rpc: ReturnType<typeof makeProvider>;
  let accountKey: string;
  const ID = "dry";

  before(async () => {
    s = await startStack({ gasWallets: 1 });
    rpc = makeProvider(s.chain.rpcUrl, 31337, 2_000);
    accountKey = (await s.api("POST", "/core/v1/new_account", { body: {} })).body.api_key;
  });
  after(async () => {
    rpc?.close();
    await s?.close();
  });

  const setBalance = (address: string, wei: bigint) =>
    rpc.provider.send("anvil_setBalance", [address, toQuantity(wei)]);

  /** Transactions offered to the node, refused ones included. */
  let sendAttempts = 0;
  function sender(wallets: number): Sender {
    const provider = rpc.provider;
    const counting = Object.create(provider, {
      send: {
        value: (m: string, p: unknown[]) => {
          if (m.startsWith("eth_sendRawTransaction")) sendAttempts++;
          return provider.send(m, p);
        },
      },
    });
    return new Sender({
      provider: counting,
      signer: s.enclave,
      gasSigners: Array.from({ length: wallets }, (_, i) => s.enclave.gasSigner(i, rpc.provider, ID)),
      chainId: 31337,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      receiptTimeoutMs: 10_000,
      rpcTimeoutMs: 2_000,
      lowBalanceWei: parseEther("1"),
    });
  }
  const write = (sd: Sender, name: string) =>
    sd.write({
      apiKey: accountKey,
      principal: s.enclave.principalAddress(accountKey),
      kind: "account",
      data: registryInterface.encodeFunctionData("createPkp", [name, ""]),
    });

  it("is skipped for new transactions: its write goes to another wallet, and later writes avoid it", async () => {
    const [dry, funded] = [0, 1].map((i) => s.enclave.gasAddress(i, ID));
    await setBalance(dry, 0n);
    await setBalance(funded, parseEther("10"));
    const sd = sender(2);
    await sd.init();
    const senders: string[] = [];
    sendAttempts = 0;
    for (let i = 0; i < 4; i++) {
      const landed = await write(sd, `dry-${i}`);
      senders.push((await rpc.provider.getTransaction(landed.txHash))!.from);
    }
    expect(senders).to.deep.equal([funded, funded, funded, funded]);
    // One refused offer (the first write's, retried on the funded wallet), then never the empty wallet.
    expect(sendAttempts).to.equal(5);
    expect(sd.balances.statuses().map((w) => w.dry)).to.deep.equal([true, false]);
  });

  it("is used again once a balance reading shows it was funded", async () => {
    const [dry] = [0].map((i) => s.enclave.gasAddress(i, ID));
    await setBalance(dry, 0n);
    const sd = sender(2);
    await sd.init();
    await write(sd, "mark-dry-1");
    await write(sd, "mark-dry-2"); // round robin reaches the empty wallet at least once in two writes
    expect(sd.balances.statuses()[0].dry).to.equal(true);
    await sd.balances.refresh(); // baseline reading: still empty
    await setBalance(dry, parseEther("10"));
    await sd.balances.refresh();
    expect(sd.balances.statuses()[0]).to.deep.include({
      dry: false,
      balanceWei: parseEther("10"),
      low: false,
    });
  });

  it("when every wallet is dry the write is 503 gas_wallet_unfunded naming the wallet", async () => {
    const only = s.enclave.gasAddress(5, ID);
    await setBalance(only, 0n);
    const sd = new Sender({
      provider: rpc.provider,
      signer: s.enclave,
      gasSigners: [s.enclave.gasSigner(5, rpc.provider, ID)],
      chainId: 31337,
      registry: s.deployment.registry,
      forwarder: s.deployment.forwarder,
      receiptTimeoutMs: 10_000,
      rpcTimeoutMs: 2_000,
    });
    await sd.init();
    let caught: unknown;
    try {
      await write(sd, "nothing-to-pay");
    } catch (err) {
      caught = err;
    }
    const e = caught as ApiError;
    expect([e.status, e.code, e.details]).to.deep.equal([503, "gas_wallet_unfunded", { gas_wallet: only }]);
  });
});

async function latestTxHash(s: Stack): Promise<string> {
  const block = await s.provider.getBlock("latest");
  return block!.transactions[0];
}
