/**
 * `npm run migrate:registry [--dry-run]`: the process around scripts/migrate/command.ts. Exit codes: 0 done
 * (or already current, or a dry run), 1 refused or failed (the message says why; a re-run resumes), 130
 * interrupted (SIGINT/SIGTERM: the chain is stopped cleanly first; a re-run resumes).
 */
import { ConfigError, loadConfig } from "../start/config";
import { MigrationRefused, runMigration } from "./command";

const USAGE = `Usage: npm run migrate:registry [-- --dry-run]

Moves the data folder (SIGIL_DATA_DIR, same configuration as npm start) from a layout-2 registry onto a
new registry that keeps every account, group, usage key and PKP key. Stop npm start first. Resumable:
run it again after an interruption. --dry-run prints what it would do and writes nothing.
`;

/** Set on SIGINT/SIGTERM: the signal handler stops the chain and exits; main's outcome no longer counts. */
let interrupting = false;

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(USAGE);
    return 0;
  }
  const unknown = args.filter((a) => a !== "--dry-run");
  if (unknown.length) {
    process.stderr.write(`Unknown argument ${unknown[0]}.\n${USAGE}`);
    return 1;
  }
  let cleanup: (() => Promise<void>) | undefined;
  const interrupted = (signal: string) => {
    if (interrupting) return;
    interrupting = true;
    process.stderr.write(`\n${signal}: stopping (run npm run migrate:registry again to resume)…\n`);
    void (cleanup?.() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.on("SIGINT", () => interrupted("SIGINT"));
  process.on("SIGTERM", () => interrupted("SIGTERM"));
  try {
    const config = loadConfig(process.env, process.cwd());
    await runMigration(config, args.includes("--dry-run"), {
      out: (text) => process.stdout.write(text),
      err: process.stderr,
      onCleanup: (fn) => (cleanup = fn),
    });
    return 0;
  } catch (e) {
    // Stopping the chain makes the migration's pending calls fail: that is the interruption, not an error.
    if (interrupting) return new Promise<number>(() => {});
    if (e instanceof ConfigError || e instanceof MigrationRefused) {
      process.stderr.write(`${e.message}\n`);
      return 1;
    }
    const err = e as Error & { code?: string };
    if (err.code?.startsWith("anvil_")) {
      process.stderr.write(`${err.message}\n`);
      return 1;
    }
    process.stderr.write(
      `The migration stopped: ${err.stack ?? String(e)}\nRun npm run migrate:registry again to resume.\n`,
    );
    return 1;
  }
}

void main().then((code) => {
  if (!interrupting) process.exit(code);
});
