import type { Command } from "commander";
import { contextOf } from "../context";
import { fields } from "../output";

export function registerAccount(program: Command): void {
  const account = program.command("account").description("create an account, show it");

  account
    .command("create")
    .description("create an account; prints its account key ONCE (keep it: it cannot be shown again)")
    .option("--name <name>", "account name")
    .option("--description <text>", "account description")
    .option("--email <email>", "contact email")
    .action(async (opts: { name?: string; description?: string; email?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const body: Record<string, string> = {};
      if (opts.name !== undefined) body.account_name = opts.name;
      if (opts.description !== undefined) body.account_description = opts.description;
      if (opts.email !== undefined) body.email = opts.email;
      const r = await out.progress(
        "creating the account on chain",
        client.request<Record<string, unknown>>("POST", "/core/v1/new_account", { body, auth: false }),
      );
      out.result(r, () =>
        [
          fields([
            ["account id", r.account_id],
            ["owner", r.owner_address],
          ]),
          "",
          "Account key (shown this once; store it somewhere safe):",
          "",
          `  ${String(r.api_key)}`,
          "",
          "Use it for the next commands:",
          "",
          `  export SIGIL_API_KEY=${String(r.api_key)}`,
        ].join("\n"),
      );
    });

  account
    .command("info")
    .description("show the account of the API key")
    .action(async (_opts: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<Record<string, unknown>>("GET", "/core/v1/account");
      out.result(r, () => fields(Object.entries(r).map(([k, v]) => [k.replace(/_/g, " "), v])));
    });
}
