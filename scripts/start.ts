/**
 * `npm start`: the embedded default. Validates the configuration, compiles the contracts if this checkout
 * has never been compiled, starts everything (scripts/start/service.ts), prints where it is and what to
 * try next, and on Ctrl-C (SIGINT) or SIGTERM stops cleanly, keeping every piece of state for the next start.
 *
 * Exit codes: 0 clean shutdown, 1 invalid configuration or failed start, 2 the embedded chain died.
 */
import { ConfigError, loadConfig, type SigilConfig } from "./start/config";
import { banner, devRootKeyWarning } from "./start/banner";
import { ensureDashboardBuilt } from "./start/dashboardBuild";
import { ensureCompiled } from "./start/contractsBuild";

async function main(): Promise<void> {
  let config: SigilConfig;
  try {
    config = loadConfig(process.env, process.cwd());
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`${e.message}\nSee docs/configuration.md for every variable.\n`);
      process.exit(1);
    }
    throw e;
  }
  ensureCompiled();
  ensureDashboardBuilt((m) => process.stderr.write(`• ${m}…\n`));
  // Loaded only now: it imports the TypeChain factories that ensureCompiled may just have generated.
  const { startSigil, apiPortInUseMessage } = require("./start/service") as typeof import("./start/service");

  const step = (m: string) => process.stderr.write(`• ${m}…\n`);
  const warn = (m: string) =>
    process.stderr.write(/DEV MODE generated/.test(m) ? devRootKeyWarning(m) : `! ${m}\n`);
  let sigil: Awaited<ReturnType<typeof startSigil>>;
  try {
    sigil = await startSigil(config, { step, warn });
  } catch (e) {
    const err = e as Error & { code?: string; details?: unknown };
    const details = typeof err.details === "string" ? ` (${err.details})` : "";
    if (err.code === "EADDRINUSE")
      process.stderr.write(`\nSigil could not start: ${apiPortInUseMessage(config.host, config.port)}\n`);
    else process.stderr.write(`\nSigil could not start: ${err.message}${details}\n`);
    if (err.code === "root_key_missing")
      process.stderr.write(
        "Provide the root key in SIGIL_ROOT_KEY (64 hex digits) or in <data dir>/root.key (mode 0600), or set SIGIL_DEV_MODE=true for a throwaway dev instance.\n",
      );
    process.exit(1);
  }
  process.stdout.write(banner(config, sigil));

  let shuttingDown = false;
  const shutdown = async (reason: string, code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    process.stderr.write(`\n• ${reason}: stopping the API, the ledger and the chain (state is kept)…\n`);
    const force = setTimeout(() => {
      process.stderr.write("! shutdown took longer than 20 s; exiting anyway\n");
      process.exit(code || 1);
    }, 20_000);
    force.unref();
    await sigil.close();
    process.stderr.write(`• stopped. Run npm start again to resume where you left off.\n`);
    process.exit(code);
  };
  process.on("SIGINT", () => void shutdown("SIGINT", 0));
  process.on("SIGTERM", () => void shutdown("SIGTERM", 0));
  // If whatever started us dies without passing a signal on (a shell wrapper killed on its own), we are
  // reparented: shut down rather than run on unsupervised.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void shutdown("parent process exited", 0);
  }, 1000).unref();
  void sigil.chainExited.then(() => {
    if (!shuttingDown) {
      process.stderr.write("! the embedded chain (anvil) exited unexpectedly\n");
      void shutdown("chain exited", 2);
    }
  });
}

main().catch((e: unknown) => {
  process.stderr.write(`Sigil crashed while starting: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
