/**
 * `npm run bench:send`: `Actions.sendTransaction` against a baseline measured in the same run, on a
 * local anvil (automine), as ratios (numbers alone are machine-dependent).
 *
 * Baseline: 50 value transfers from a dev key, each signed locally with ethers and broadcast with one
 * `eth_sendRawTransaction` (nonces assigned up front, all in flight at once): the chain's own cost of
 * taking 50 transactions, with no fee reading, simulation, lock or sandbox.
 * Measured: 50 value transfers from one PKP, 10 at once in each of 5 concurrent runs (the test's
 * workload), each filled, simulated, policy-checked (a policy applies), signed and broadcast by the
 * service; without and with `wait: true`.
 * The ratio is what one PKP's sends cost over bare broadcasts: the nonce lock sends one PKP's
 * transactions one at a time (docs/actions.md, "EVM send"), so it is mostly round trips.
 */
import { JsonRpcProvider, Wallet, getAddress, parseEther, ethers } from "ethers";
import { ActionExecutor, Enclave, type GroupPolicy } from "../enclave";
import { DEV_KEYS, startChain } from "../testkit/anvil";

const CID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
const PKP = ethers.zeroPadValue("0x65", 32);
const TO = getAddress("0x000000000000000000000000000000000000bEEF".toLowerCase());
const N = 50;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const CODE = `async function main(p) {
  const sends = [];
  for (let i = 0; i < 10; i++)
    sends.push(Actions.sendTransaction({ pkpId: p.pkpId, chainId: 31337, tx: { to: p.to, value: 1 }, wait: p.wait }));
  return (await Promise.all(sends)).length;
}`;

const ANY_TRANSFER: GroupPolicy[] = [
  {
    group: "1",
    policy: {
      version: 1,
      rules: [{ name: "local", effect: "allow", operation: "transaction", chainIds: [31337] }],
    },
  },
];

async function main(): Promise<void> {
  const chain = await startChain();
  const provider = new JsonRpcProvider(chain.rpcUrl, 31337, { staticNetwork: true, cacheTimeout: -1 });
  const keys = Enclave.fromRootKey("0x" + "5a".repeat(32));
  const executor = new ActionExecutor({
    keys,
    poolSize: 2,
    chains: [{ chainId: 31337, rpcUrl: chain.rpcUrl }],
  });
  try {
    await provider.send("anvil_setBalance", [keys.pkpAddress(PKP), "0x" + parseEther("1000").toString(16)]);
    await executor.ready();
    const dev = new Wallet(DEV_KEYS[1], provider);
    const fee = await provider.getFeeData();

    // The dev key's nonces, counted here (the bench's only sender from it).
    let devNonce = await provider.getTransactionCount(dev.address, "pending");
    const baseline = async (): Promise<number> => {
      const first = devNonce;
      devNonce += N;
      const signed = await Promise.all(
        Array.from({ length: N }, (_, i) =>
          dev.signTransaction({
            to: TO,
            value: 1,
            nonce: first + i,
            chainId: 31337,
            gasLimit: 21000,
            maxFeePerGas: fee.maxFeePerGas,
            maxPriorityFeePerGas: fee.maxPriorityFeePerGas,
          }),
        ),
      );
      const t = performance.now();
      // In nonce order, all in flight: the node takes a nonce only after its predecessor.
      await Promise.all(signed.map((raw) => provider.send("eth_sendRawTransaction", [raw])));
      return performance.now() - t;
    };
    const measured = async (wait: boolean): Promise<number> => {
      const t = performance.now();
      const runs = await Promise.all(
        Array.from({ length: 5 }, () =>
          executor.run({
            code: CODE,
            cid: CID,
            jsParams: { pkpId: PKP, to: TO, wait },
            authorizePkp: async (id) => id,
            policiesFor: () => ANY_TRANSFER,
          }),
        ),
      );
      for (const r of runs) if (r.has_error) throw new Error(JSON.stringify(r.error));
      return performance.now() - t;
    };

    await measured(false); // warm-up: the nonce counter, the workers' first runs
    const rows: { name: string; ms: number[] }[] = [
      { name: "baseline: 50 bare broadcasts", ms: [] },
      { name: "sendTransaction ×50 (5 runs × 10)", ms: [] },
      { name: "sendTransaction ×50, wait: true", ms: [] },
    ];
    for (let i = 0; i < ROUNDS; i++) {
      rows[0].ms.push(await baseline());
      rows[1].ms.push(await measured(false));
      rows[2].ms.push(await measured(true));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const base = median(rows[0].ms);
    console.log(`sendTransaction on anvil, median of ${ROUNDS} rounds`);
    for (const r of rows) {
      const m = median(r.ms);
      console.log(
        `  ${r.name.padEnd(36)} ${m.toFixed(0).padStart(6)} ms  ${(m / N).toFixed(2).padStart(6)} ms/send  ×${(m / base).toFixed(1)} of baseline`,
      );
    }
  } finally {
    await executor.close();
    provider.destroy();
    await chain.stop();
  }
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
