/**
 * The signing-policy cost in the executor alone (no HTTP, no relayer): the one-signature action at 50
 * concurrent callers, its PKP handed to the worker, under the bench's five-rule policy (a frozen
 * document with its CID, as the relayer hands it over) and without one, in pairs of alternated order.
 * Prints the CPU per run of the whole process and of the main thread alone (threadCpu.ts) under the
 * policy as a share of that without, and the ratio of the rates (docs/policies.md, "What it costs").
 *
 *   npm run bench:policy-executor   (POLICY_PAIRS, POLICY_RUNS, POLICY_CLIENTS; 12 pairs of 2,000 by default)
 */
import * as os from "node:os";
import { ethers } from "ethers";
import { ActionExecutor, deepFreeze, Enclave, type GroupPolicy, type Policy } from "../enclave";
import { FIVE_RULE_POLICY } from "./benchStack";
import { cpuByThreadKind, cpuDelta, labelWorkerThreads, mainThreadCpuUs } from "./threadCpu";

const CID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
/** Concurrent callers (POLICY_CLIENTS; 50 by default). With one, every run pays its own wake-ups. */
const CLIENTS = Number(process.env.POLICY_CLIENTS ?? 50);

async function main(): Promise<void> {
  // Before the executor starts its threads: the CPU of each kind of thread is then printed apart.
  labelWorkerThreads();
  const keys = Enclave.fromRootKey("0x" + "5a".repeat(32));
  const pkp = ethers.zeroPadValue(ethers.toBeHex(101), 32);
  const ex = new ActionExecutor({ keys, poolSize: 2 });
  await ex.ready();
  const policy = deepFreeze(structuredClone(FIVE_RULE_POLICY) as Policy);
  const grants: readonly GroupPolicy[] = deepFreeze([{ group: "2", policy, cid: "QmFiveRulePolicy" }]);
  const code = `async function main(p) { return await Actions.signMessage({ pkpId: p.pkpId, message: p.m }); }`;
  type Form = "plain" | "policy";
  const batch = async (form: Form, n: number) => {
    let left = n;
    const caller = async () => {
      while (left-- > 0) {
        const r = await ex.run({
          code,
          cid: CID,
          jsParams: { pkpId: pkp, m: "bench" },
          authorizePkp: async (ref: string) => ref,
          runPkp: { ref: pkp, scope: 1 },
          policiesFor: () => (form === "plain" ? null : grants),
        });
        if (r.has_error) throw new Error(`the bench's run failed: ${JSON.stringify(r.error)}`);
        if (form === "policy" && r.policy_decisions?.length !== 1) throw new Error("no policy decision");
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, caller));
  };
  await batch("plain", 1_000);
  await batch("policy", 1_000);
  const runs = Number(process.env.POLICY_RUNS ?? 2_000);
  const pairs = Number(process.env.POLICY_PAIRS ?? 12);
  const cpu = { plain: 0, policy: 0 };
  const main = { plain: 0, policy: 0 };
  const ms = { plain: 0, policy: 0 };
  const byKind = { plain: new Map<string, number>(), policy: new Map<string, number>() };
  // Each pair's difference per kind of thread (µs per run): their median, which a pair disturbed by
  // the machine's other work cannot move the way it moves the totals.
  const pairDiffs = new Map<string, number[]>();
  for (let k = 0; k < pairs; k++) {
    const pair = { plain: new Map<string, number>(), policy: new Map<string, number>() };
    for (const form of k % 2 === 0 ? (["plain", "policy"] as const) : (["policy", "plain"] as const)) {
      const k0 = cpuByThreadKind();
      const c0 = process.cpuUsage();
      const m0 = mainThreadCpuUs();
      const t0 = performance.now();
      await batch(form, runs);
      ms[form] += performance.now() - t0;
      const c = process.cpuUsage(c0);
      cpu[form] += c.user + c.system;
      const m1 = mainThreadCpuUs();
      main[form] += m0 === null || m1 === null ? NaN : m1 - m0;
      for (const [kind, ns] of cpuDelta(k0, cpuByThreadKind())) {
        byKind[form].set(kind, (byKind[form].get(kind) ?? 0) + ns);
        pair[form].set(kind, ns);
      }
    }
    for (const kind of new Set([...pair.plain.keys(), ...pair.policy.keys()])) {
      const d = ((pair.policy.get(kind) ?? 0) - (pair.plain.get(kind) ?? 0)) / 1000 / runs;
      pairDiffs.set(kind, [...(pairDiffs.get(kind) ?? []), d]);
    }
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const per = (us: number) => (us / (pairs * runs)).toFixed(1);
  const pct = (a: number, b: number) => ((a / b) * 100).toFixed(1) + "%";
  console.log(
    `executor, one signature at ${CLIENTS} callers, five-rule policy / none (${pairs} pairs of ${runs}, order alternated):\n` +
      `  CPU per run, process: ${per(cpu.plain)} µs without, ${per(cpu.policy)} µs under it (${pct(cpu.policy, cpu.plain)})\n` +
      `  CPU per run, main thread: ${per(main.plain)} µs without, ${per(main.policy)} µs under it (${pct(main.policy, main.plain)})\n` +
      `  rate: ${pct(ms.plain, ms.policy)} of the rate without`,
  );
  // Per kind of thread (Linux): where the policy's CPU goes.
  const kinds = [...new Set([...byKind.plain.keys(), ...byKind.policy.keys()])].sort();
  for (const kind of kinds) {
    const a = (byKind.plain.get(kind) ?? 0) / 1000;
    const b = (byKind.policy.get(kind) ?? 0) / 1000;
    console.log(
      `  ${kind.padEnd(20)} ${per(a).padStart(7)} µs without, ${per(b).padStart(7)} µs under it (${((b - a) / (pairs * runs)).toFixed(1)} µs more; median pair ${median(pairDiffs.get(kind) ?? [0]).toFixed(1)})`,
    );
  }
  console.log(
    `  load average: ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
  );
  await ex.close();
}

if (require.main === module)
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
