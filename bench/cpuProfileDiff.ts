/**
 * Two V8 CPU profiles of the same work (`.cpuprofile`, e.g. bench/auditProfile.ts with CPU_PROFILE, the
 * audit log off then on), compared function by function: each function's samples in either profile, the
 * difference, per 1,000 requests when their counts are given (the profiles of runs of different
 * length), largest differences first. Samples, not the time between them: on a loaded machine that time
 * includes the time the thread waited for a CPU, while a sample is taken only when the thread runs.
 *
 *   npx ts-node --transpile-only bench/cpuProfileDiff.ts off.cpuprofile on.cpuprofile [nOff nOn] [rows]
 */
import * as fs from "node:fs";
import * as path from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
}

/** Samples by function (name, file and line) where it was running itself (self, not its callees). */
export function selfSamplesByFunction(profile: Profile): Map<string, number> {
  const nameOf = new Map<number, string>();
  for (const n of profile.nodes) {
    const f = n.callFrame;
    const where = f.url ? `${path.basename(f.url)}:${f.lineNumber + 1}` : "";
    nameOf.set(n.id, `${f.functionName || "(anonymous)"} ${where}`.trim());
  }
  const out = new Map<string, number>();
  for (const id of profile.samples) {
    const name = nameOf.get(id) ?? "?";
    out.set(name, (out.get(name) ?? 0) + 1);
  }
  return out;
}

function main(): void {
  const [a, b, nA, nB, rowsArg] = process.argv.slice(2);
  const read = (f: string) => selfSamplesByFunction(JSON.parse(fs.readFileSync(f, "utf8")) as Profile);
  const before = read(a);
  const after = read(b);
  const scaleA = nA ? 1000 / Number(nA) : 1;
  const scaleB = nB ? 1000 / Number(nB) : 1;
  const unit = nA ? "samples per 1,000 requests" : "samples";
  const names = new Set([...before.keys(), ...after.keys()]);
  const rows = [...names]
    .map((k) => {
      const x = (before.get(k) ?? 0) * scaleA;
      const y = (after.get(k) ?? 0) * scaleB;
      return { k, x, y, d: y - x };
    })
    .sort((p, q) => Math.abs(q.d) - Math.abs(p.d));
  const total = (m: Map<string, number>, s: number) => [...m.values()].reduce((t, v) => t + v, 0) * s;
  console.log(`| function | ${path.basename(a)} | ${path.basename(b)} | difference |  (${unit})`);
  console.log("|---|---:|---:|---:|");
  console.log(
    `| **all** | ${total(before, scaleA).toFixed(1)} | ${total(after, scaleB).toFixed(1)} | ${(total(after, scaleB) - total(before, scaleA)).toFixed(1)} |`,
  );
  for (const r of rows.slice(0, Number(rowsArg ?? 40)))
    console.log(
      `| ${r.k} | ${r.x.toFixed(1)} | ${r.y.toFixed(1)} | ${r.d >= 0 ? "+" : ""}${r.d.toFixed(1)} |`,
    );
}

if (require.main === module) main();
