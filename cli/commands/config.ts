import type { Command } from "commander";
import { contextOf } from "../context";
import { fields } from "../output";

export function registerConfig(program: Command): void {
  program
    .command("config")
    .description("where the CLI points, and the service's chain, contracts, limits and prices")
    .action(async (_o: unknown, cmd: Command) => {
      const { client, out, url, apiKeySource } = contextOf(cmd);
      const server = await client.request<Record<string, unknown>>("GET", "/core/v1/config", {
        auth: "optional",
      });
      // The key itself is never printed: only whether one is set and from where.
      const cli = { url, api_key: apiKeySource === "none" ? "not set" : `set (from ${apiKeySource})` };
      out.result({ cli, service: server }, () =>
        [
          fields([
            ["url", cli.url],
            ["api key", cli.api_key],
          ]),
          "",
          fields(flatten(server)),
        ].join("\n"),
      );
    });
}

/**
 * One aligned row per setting: a nested object ({"limits": {"max_page_size": 100, …}}) becomes rows
 * named "limits max page size", instead of one line of JSON that wraps across the terminal.
 */
function flatten(obj: Record<string, unknown>, prefix = ""): [string, unknown][] {
  return Object.entries(obj).flatMap(([k, v]): [string, unknown][] => {
    const name = prefix + k.replace(/_/g, " ");
    return v !== null && typeof v === "object" && !Array.isArray(v)
      ? flatten(v as Record<string, unknown>, `${name} `)
      : [[name, v]];
  });
}
