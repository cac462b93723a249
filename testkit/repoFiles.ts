import { readdirSync } from "node:fs";
import path from "node:path";

/**
 * Folders that hold no source of the repository's own: installed packages, build output, generated
 * types, coverage reports, git's store and a local data folder. Every test that reads "the repository's
 * files" (import cycles, the enclave boundary, self-containment) skips the same ones.
 */
export const NOT_SOURCE_DIRS: readonly string[] = [
  "node_modules",
  "typechain-types",
  "artifacts",
  "cache",
  "dist",
  "coverage",
  ".git",
  ".sigil",
];

/**
 * Every file under `root` whose name matches `pattern`, skipping `NOT_SOURCE_DIRS` and any folder named
 * in `alsoSkip`. Declaration files (`.d.ts`) are not source and are left out.
 */
export function repoFiles(root: string, pattern: RegExp, alsoSkip: readonly string[] = []): string[] {
  const skip = new Set([...NOT_SOURCE_DIRS, ...alsoSkip]);
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!skip.has(entry.name)) walk(path.join(dir, entry.name));
      } else if (pattern.test(entry.name) && !entry.name.endsWith(".d.ts")) {
        out.push(path.join(dir, entry.name));
      }
    }
  };
  walk(root);
  return out;
}
