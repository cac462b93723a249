/**
 * `npm run -s lines`: the relayer's size, counted as `wc -l` counts it (newlines in every `.ts` and `.js`
 * file under `relayer/`), and the part of it that serves what the relayer did before three features
 * came (signing policies, the audit log, triggers): the whole less those features' own files. The
 * second figure is the one to compare with sizes measured before the features existed; the method is
 * in docs/development.md ("The relayer's size").
 *
 * The features also added lines to shared files (their migrations, error codes, configuration, routes'
 * wiring): those stay in the second figure, which is therefore an upper bound of the older behaviour.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

const REPO = path.resolve(__dirname, "..");
const COUNTED = /\.(ts|js)$/;

/** A feature's own files: a path ending in "/" is a whole folder, any other names one file. */
export interface Feature {
  name: string;
  files: string[];
}

export const FEATURES: Feature[] = [
  {
    // relayer/policy.ts is not here: it is the authorization policy (who may write, run, manage),
    // which predates signing policies. pinning.ts is shared with action code and stays counted too.
    name: "signing policies",
    files: [
      "relayer/policyDocuments.ts",
      "relayer/policyWindows.ts",
      "relayer/runPolicies.ts",
      "relayer/routes/policies.ts",
    ],
  },
  { name: "audit log", files: ["relayer/audit/", "relayer/routes/audit.ts"] },
  {
    // chains.ts is the operator's list of chains that chain-event triggers read (SIGIL_CHAINS).
    name: "triggers",
    files: [
      "relayer/triggers/",
      "relayer/routes/triggers.ts",
      "relayer/routes/hooks.ts",
      "relayer/chains.ts",
    ],
  },
];

/** Every counted file under `dir` (repository-relative, "/"-separated), with its line count. */
export function lineCounts(dir = "relayer"): Map<string, number> {
  const counts = new Map<string, number>();
  const entries = readdirSync(path.join(REPO, dir), { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile() || !COUNTED.test(entry.name)) continue;
    const file = path.relative(REPO, path.join(entry.parentPath, entry.name)).split(path.sep).join("/");
    const text = readFileSync(path.join(REPO, file), "utf8");
    counts.set(file, text.split("\n").length - 1);
  }
  return counts;
}

export const belongsTo = (file: string, feature: Feature): boolean =>
  feature.files.some((f) => (f.endsWith("/") ? file.startsWith(f) : file === f));

export interface Sizes {
  total: number;
  /** The total less every feature's own files. */
  core: number;
  features: { name: string; lines: number; files: number }[];
}

export function relayerSizes(counts = lineCounts()): Sizes {
  const files = [...counts.keys()];
  const features = FEATURES.map((feature) => {
    const own = files.filter((f) => belongsTo(f, feature));
    return { name: feature.name, lines: own.reduce((n, f) => n + counts.get(f)!, 0), files: own.length };
  });
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  return { total, core: total - features.reduce((n, f) => n + f.lines, 0), features };
}

if (require.main === module) {
  const sizes = relayerSizes();
  const n = (x: number) => x.toLocaleString("en-US").padStart(7);
  console.log(`${n(sizes.total)}  relayer, every .ts and .js file`);
  for (const f of sizes.features) console.log(`${n(f.lines)}  ${f.name} (${f.files} files)`);
  console.log(`${n(sizes.core)}  relayer less those features' own files`);
}
