/**
 * Enclave micro-benchmarks. Each cost is printed as a ratio to ONE secp256k1 signature (noble, the
 * same library the enclave signs with) measured in the same run, so the numbers compare across
 * machines. Run: npm run bench:enclave
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { secp256k1 } from "@noble/curves/secp256k1";
import { Wallet } from "ethers";
import { computeCid, Enclave } from "../enclave";

interface Result {
  name: string;
  usPerOp: number;
  ratio: number;
}

const ROUNDS = 7;

/** Mean microseconds per call over `ms` of wall time. */
async function timeFor(fn: (i: number) => unknown, ms: number): Promise<number> {
  let n = 0;
  const t0 = performance.now();
  let elapsed = 0;
  while (elapsed < ms) {
    const r = fn(n++);
    if (r instanceof Promise) await r;
    elapsed = performance.now() - t0;
  }
  return (elapsed * 1000) / n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * The machine may be shared (CI, other processes), so each operation is timed in ROUNDS short rounds,
 * each right after a baseline round, and the reported ratio is the median of the per-round ratios.
 */
async function compare(
  name: string,
  fn: (i: number) => unknown,
  baseline: (i: number) => unknown,
  ms = 80,
): Promise<Result> {
  for (let i = 0; i < 3; i++) await fn(i);
  const ratios: number[] = [];
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const b = await timeFor(baseline, ms);
    const t = await timeFor(fn, ms);
    times.push(t);
    ratios.push(t / b);
  }
  return { name, usPerOp: median(times), ratio: median(ratios) };
}

async function main(): Promise<void> {
  const enclave = Enclave.fromRootKey(randomBytes(32));
  const priv = secp256k1.utils.randomPrivateKey();
  const digests = Array.from({ length: 256 }, () => randomBytes(32));
  const sign = (i: number) => secp256k1.sign(digests[i % 256], priv);

  // Cold parses: every call sees a key it has never seen (3,000 distinct keys; the cache holds 10,000).
  const coldKeys = Array.from({ length: 3_000 }, () => enclave.generateUsageKey().apiKey);
  const fresh = Enclave.fromRootKey(randomBytes(32));
  let cold = 0;
  const hot = enclave.generateUsageKey().apiKey;
  const pkpIds = Array.from({ length: 50_000 }, () => "0x" + randomBytes(32).toString("hex"));
  let pkpCursor = 0;
  const pkp = pkpIds[0];
  const digestHex = digests.map((d) => "0x" + d.toString("hex"));
  const kb = randomBytes(1024);
  const mb = randomBytes(1024 * 1024);
  const envelope = enclave.pkpEncrypt(pkp, kb);
  // A path-A transaction: forwarder calldata of ~1 KB (a small batch), legacy and EIP-1559 fees.
  const gasSigner = enclave.gasSigner(0, null);
  const ethersWallet = new Wallet("0x" + randomBytes(32).toString("hex"));
  const gasTx = (i: number) => ({
    chainId: 31337,
    nonce: i,
    to: "0x" + "22".repeat(20),
    gasLimit: 500_000n,
    value: 0n,
    data: "0x" + kb.toString("hex"),
  });
  const legacyTx = (i: number) => ({ ...gasTx(i), type: 0, gasPrice: 2_000_000_000n });
  const eip1559Tx = (i: number) => ({
    ...gasTx(i),
    type: 2,
    maxPriorityFeePerGas: 1_000_000_000n,
    maxFeePerGas: 3_000_000_000n,
  });

  const ops: Array<[string, (i: number) => unknown, number?]> = [
    ["secp256k1 signature (baseline)", sign],
    [
      "parse API key, cold (EC multiplication + keccak)",
      () => fresh.parseApiKey(coldKeys[cold++ % coldKeys.length]),
      30,
    ],
    ["parse API key, cached (LRU hit)", () => enclave.parseApiKey(hot)],
    [
      "derive a PKP private key (HKDF + mapHashToField)",
      () => enclave.pkpPrivateKey(pkpIds[pkpCursor++ % pkpIds.length]),
    ],
    [
      "derive a PKP address, uncached (key + EC multiplication)",
      () => fresh.pkpAddress(pkpIds[pkpCursor++ % pkpIds.length]),
    ],
    ["PKP sign a digest (derive + sign)", (i) => enclave.pkpSignDigest(pkp, digestHex[i % 256])],
    [
      "PKP public keys on every chain, uncached (Ed25519 + Taproot tweak)",
      () => fresh.pkpPublicKeys(pkpIds[pkpCursor++ % pkpIds.length]),
      30,
    ],
    ["PKP Ed25519 signature of 1 KB (derive + sign)", () => enclave.pkpSignEd25519(pkp, kb)],
    ["PKP BIP-340 Schnorr signature (derive + sign)", (i) => enclave.pkpSignSchnorr(pkp, digestHex[i % 256])],
    [
      "PKP Taproot key-path signature (derive + tweak + sign)",
      (i) => enclave.pkpSignSchnorr(pkp, digestHex[i % 256], { tweak: "taproot" }),
    ],
    ["PKP encrypt 1 KB (derive AES key + AES-256-GCM)", () => enclave.pkpEncrypt(pkp, kb)],
    ["PKP decrypt 1 KB", () => enclave.pkpDecrypt(pkp, envelope)],
    ["gas transaction, type 0, 1 KB data (lean path)", (i) => gasSigner.signTransaction(legacyTx(i))],
    ["gas transaction, type 2, 1 KB data (lean path)", (i) => gasSigner.signTransaction(eip1559Tx(i))],
    ["gas transaction, type 2, 1 KB data (ethers Wallet)", (i) => ethersWallet.signTransaction(eip1559Tx(i))],
    ["CIDv0 of 1 KB", () => computeCid(kb)],
    ["CIDv0 of 1 MB", () => computeCid(mb), 150],
    ["CIDv1 of 1 MB", () => computeCid(mb, { version: 1 }), 150],
  ];
  const results: Result[] = [];
  for (const [name, fn, ms] of ops) results.push(await compare(name, fn, sign, ms));
  const baseline = results[0];
  if (cold > coldKeys.length) console.warn(`note: ${cold - coldKeys.length} "cold" parses were cache hits`);

  const rows = results;
  const w = Math.max(...rows.map((r) => r.name.length));
  console.log(
    `\nEnclave benchmark (node ${process.version}); baseline = one secp256k1 signature = ${baseline.usPerOp.toFixed(1)} µs\n`,
  );
  console.log(`| ${"operation".padEnd(w)} | µs/op     | × signature |`);
  console.log(`| ${"-".repeat(w)} | --------- | ----------- |`);
  for (const r of rows) {
    console.log(
      `| ${r.name.padEnd(w)} | ${r.usPerOp.toFixed(1).padStart(9)} | ${r.ratio.toFixed(2).padStart(11)} |`,
    );
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
