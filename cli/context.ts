/**
 * What every command needs, built from the global options at the moment the command runs: the client
 * (URL and API key from flags or the environment) and the output.
 */
import type { Command } from "commander";
import { cliClient, UsageError, type CliClient } from "./api";
import { Output } from "./output";

export const DEFAULT_URL = "http://127.0.0.1:8000";

export interface GlobalOptions {
  url?: string;
  apiKey?: string;
  json?: boolean;
  quiet?: boolean;
}

export interface Context {
  client: CliClient;
  out: Output;
  /** Where the API key came from, for `sigil config` (never the value). */
  apiKeySource: "--api-key" | "SIGIL_API_KEY" | "none";
  url: string;
}

export function contextOf(cmd: Command): Context {
  const g = cmd.optsWithGlobals<GlobalOptions>();
  const url = g.url ?? (process.env.SIGIL_URL?.trim() || DEFAULT_URL);
  try {
    new URL(url);
  } catch {
    throw new UsageError(`--url / SIGIL_URL must be a URL such as ${DEFAULT_URL}.`);
  }
  const fromEnv = process.env.SIGIL_API_KEY?.trim() || undefined;
  const apiKey = g.apiKey ?? fromEnv;
  return {
    client: cliClient(url, apiKey),
    out: new Output({ json: g.json === true, quiet: g.quiet === true }),
    apiKeySource: g.apiKey !== undefined ? "--api-key" : fromEnv !== undefined ? "SIGIL_API_KEY" : "none",
    url,
  };
}

/**
 * Parses "1,2,3" (or repeated flags) into u64 decimal strings; "all" or "*" means every group (the API's
 * wildcard 0). A bare 0 is refused: the wildcard must be asked for by name.
 */
export function groupIds(values: string[] | undefined, flag: string): string[] {
  const out: string[] = [];
  for (const v of values ?? [])
    for (const part of v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean)) {
      if (part === "*" || part === "all") out.push("0");
      // 0 is the API's wildcard; a number typed by mistake must not silently grant every group.
      else if (/^0+$/.test(part))
        throw new UsageError(
          `${flag}: 0 would mean every group; ask for that by name (${flag} all, or ${flag} '*'), or give a group id.`,
        );
      else if (/^\d+$/.test(part) && BigInt(part) < 2n ** 64n) out.push(part);
      else
        throw new UsageError(
          `${flag}: ${JSON.stringify(part)} is not a group id (a number, or all for every group).`,
        );
    }
  return out;
}

/** Collects a repeatable option into an array. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** The one place an ID argument is checked to be a positive integer (groups). */
export function groupId(v: string): string {
  if (!/^\d+$/.test(v) || v === "0")
    throw new UsageError(`${JSON.stringify(v)} is not a group id (a positive integer).`);
  return v;
}
