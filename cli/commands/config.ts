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
 * named "limits max page size", and each object of a list ({"chains": [{"chain_id": 1, …}]}) one row
 * "chains 1" of its fields, instead of one line of JSON that wraps across the terminal.
 */
function flatten(obj: Record<string, unknown>, prefix = ""): [string, unknown][] {
  const words = (k: string) => k.replace(/_/g, " ");
  return Object.entries(obj).flatMap(([k, v]): [string, unknown][] => {
    const name = prefix + words(k);
    if (Array.isArray(v))
      return v.map((item, i): [string, unknown] => [
        `${name} ${i + 1}`,
        item !== null && typeof item === "object"
          ? Object.entries(item as Record<string, unknown>)
              .map(([ik, iv]) => `${words(ik)} ${String(iv)}`)
              .join(", ")
          : item,
      ]);
    return v !== null && typeof v === "object"
      ? flatten(v as Record<string, unknown>, `${name} `)
      : [[name, v]];
  });
}
