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
          fields(Object.entries(server).map(([k, v]) => [k.replace(/_/g, " "), v])),
        ].join("\n"),
      );
    });
}
