/**
 * A fresh clone has no TypeChain factories yet, and deploying needs them: compile once, on the first
 * start of a checkout (`npm start`, `npm run start:cluster`).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "../..");

export function ensureCompiled(): void {
  if (fs.existsSync(path.join(ROOT, "typechain-types", "index.ts"))) return;
  process.stderr.write("• compiling the contracts (first start of this checkout, about a minute)…\n");
  const r = spawnSync(process.execPath, [require.resolve("hardhat/internal/cli/cli"), "compile", "--quiet"], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (r.status !== 0) {
    process.stderr.write("Compiling the contracts failed (see above). Run `npm run build` to retry.\n");
    process.exit(1);
  }
}
