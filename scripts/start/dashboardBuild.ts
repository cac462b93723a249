/**
 * The dashboard's build, run when it is missing or older than its sources (npm start, the browser
 * tests), so that `npm install && npm start` stays the whole set-up. A failed build does not stop the
 * API: the relayer then answers `/` with how to build it.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
export const DASHBOARD_DIR = path.join(ROOT, "dashboard");
const BUILT = path.join(DASHBOARD_DIR, "dist", "index.html");
/** What the bundle is made of: the dashboard's own sources and the SDK it imports. */
const SOURCES = [path.join(DASHBOARD_DIR, "src"), path.join(ROOT, "sdk"), DASHBOARD_DIR];

function newestMtime(target: string, depth: number): number {
  const stat = fs.statSync(target, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  if (depth === 0) return 0;
  let newest = 0;
  for (const entry of fs.readdirSync(target)) {
    if (entry === "dist" || entry === "node_modules") continue;
    newest = Math.max(newest, newestMtime(path.join(target, entry), depth - 1));
  }
  return newest;
}

export function dashboardBuildIsStale(): boolean {
  const built = fs.statSync(BUILT, { throwIfNoEntry: false });
  if (!built) return true;
  const sources = Math.max(...SOURCES.map((s, i) => newestMtime(s, i === 2 ? 1 : 8)));
  return sources > built.mtimeMs;
}

/** Runs `vite build` for the dashboard; true when it succeeded. Output goes to stderr. */
export function buildDashboard(): boolean {
  // vite exports no bin path; its package.json is exported, and bin/vite.js sits next to it.
  const vite = path.join(path.dirname(require.resolve("vite/package.json")), "bin", "vite.js");
  const r = spawnSync(
    process.execPath,
    [vite, "build", "--config", path.join(DASHBOARD_DIR, "vite.config.mts")],
    {
      cwd: ROOT,
      stdio: ["ignore", process.stderr, process.stderr],
    },
  );
  return r.status === 0;
}

/** Builds when stale; says so on stderr. */
export function ensureDashboardBuilt(log: (m: string) => void): boolean {
  if (!dashboardBuildIsStale()) return true;
  log("building the dashboard (its build is missing or older than its sources)");
  const ok = buildDashboard();
  if (!ok)
    log("the dashboard build failed (see above); the API runs without it: `npm run build:dashboard` retries");
  return ok;
}
