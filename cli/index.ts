/**
 * `npx sigil …`: the command-line client of a running Sigil (npm start). An HTTP client of the
 * /core/v1 API and nothing more: it holds no keys of its own and never prints an API key except the
 * one time a key is created.
 *
 * Exit codes: 0 ok; 1 usage error (bad flags or arguments); 2 the API answered with an error (its code
 * is printed), or the action itself failed; 3 the service could not be reached; 4 an attestation was
 * refused (`sigil attestation verify`, the failed check named) or an audit export does not verify
 * (`sigil audit verify`, the first broken sequence named).
 */
import { Command, CommanderError } from "commander";
import { SigilError } from "sigil/sdk";
import { connectionMessage, isConnectionError, UsageError } from "./api";
import { registerAccount } from "./commands/account";
import { registerAttestation } from "./commands/attestation";
import { registerAudit } from "./commands/audit";
import { registerActions } from "./commands/actions";
import { registerBilling } from "./commands/billing";
import { registerConfig } from "./commands/config";
import { registerGroups } from "./commands/groups";
import { registerKeys } from "./commands/keys";
import { registerPkps } from "./commands/pkps";
import { registerPolicies } from "./commands/policies";
import { registerRun } from "./commands/run";
import { registerWebhooks } from "./commands/webhooks";
import { registerTriggers } from "./commands/triggers";
import { DEFAULT_URL } from "./context";

const VERSION: string = (require("../package.json") as { version: string }).version;

export const EXIT = { ok: 0, usage: 1, api: 2, connection: 3 } as const;

export function buildProgram(): Command {
  const program = new Command("sigil")
    .description("Command-line client of Sigil, the programmable key-management service")
    // `sigil --version` is the first thing people try; it names this checkout's version.
    .version(VERSION, "-V, --version", "print the CLI's version")
    .option("--url <url>", `the Sigil API (env SIGIL_URL, default ${DEFAULT_URL})`)
    .option(
      "--api-key <key>",
      "account or usage key (env SIGIL_API_KEY; the flag is visible in `ps`, prefer the variable)",
    )
    .option("--json", "machine-readable JSON on stdout")
    .option("-q, --quiet", "no progress output on stderr")
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();
  registerAccount(program);
  registerKeys(program);
  registerPkps(program);
  registerGroups(program);
  registerActions(program);
  registerPolicies(program);
  registerRun(program);
  registerBilling(program);
  registerWebhooks(program);
  registerTriggers(program);
  registerConfig(program);
  registerAttestation(program);
  registerAudit(program);
  // Subcommands inherit exitOverride only if set on each; do it once for the whole tree.
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
  for (const c of all(program)) c.exitOverride();
  return program;
}

/** Runs the CLI; returns the exit code instead of exiting (the tests call this). */
export async function runCli(argv: string[]): Promise<number> {
  const program = buildProgram();
  const json = argv.includes("--json");
  try {
    await program.parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : EXIT.ok;
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help and --version "fail" with exit code 0; real parse errors were already printed by commander.
      return e.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (e instanceof UsageError) {
      process.stderr.write(`error: ${e.message}\n`);
      return EXIT.usage;
    }
    if (isConnectionError(e)) {
      process.stderr.write(`error: ${connectionMessage(urlOf(argv), e)}\n`);
      return EXIT.connection;
    }
    if (e instanceof SigilError) {
      const status = e.status ?? 0;
      if (json)
        process.stdout.write(
          JSON.stringify(
            {
              error: {
                status,
                code: e.code,
                message: e.shortMessage,
                details: e.details,
                fix: e.fix,
                docs_url: e.docsUrl,
              },
              request_id: e.requestId,
            },
            null,
            2,
          ) + "\n",
        );
      process.stderr.write(`error ${status} ${e.code}: ${e.shortMessage}\n`);
      if (e.details !== undefined && !json) process.stderr.write(`details: ${JSON.stringify(e.details)}\n`);
      // What to do about it, under the message (the service's error catalogue).
      if (e.fix) process.stderr.write(`fix: ${e.fix}\n`);
      if (e.docsUrl && !json) process.stderr.write(`docs: ${e.docsUrl}\n`);
      return EXIT.api;
    }
    throw e;
  }
}

/** The service URL this invocation used (for messages): --url, else SIGIL_URL, else the default. */
function urlOf(argv: string[]): string {
  const i = argv.findIndex((a) => a === "--url" || a.startsWith("--url="));
  if (i >= 0) return argv[i].includes("=") ? argv[i].slice(6) : (argv[i + 1] ?? "");
  return process.env.SIGIL_URL?.trim() || DEFAULT_URL;
}

/** The process entry point (bin/sigil.js, or `ts-node cli/index.ts`). */
export function main(): void {
  runCli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`sigil crashed (a bug; please report it): ${(e as Error).stack ?? String(e)}\n`);
      process.exit(70);
    },
  );
}

if (require.main === module) main();
