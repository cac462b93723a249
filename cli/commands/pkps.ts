import type { Command } from "commander";
import { contextOf } from "../context";
import { fields, table } from "../output";

export function registerPkps(program: Command): void {
  const pkps = program.command("pkps").description("PKPs: keys derived in the enclave, never stored");

  pkps
    .command("create")
    .description("create a PKP in the account's registry")
    .option("--name <name>", "label")
    .option("--description <text>", "description")
    .action(async (o: { name?: string; description?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await out.progress(
        "creating the PKP on chain",
        // Typed SDK call: with a usage key it is a signed forward request (the key is never sent).
        client.sigil().createPkp({ ...o }),
      );
      out.result(r, () =>
        fields([
          ["pkp id", r.pkp_id],
          ["address", r.address],
          ["public key", r.public_key],
          ["solana address", r.solana_address],
          ["taproot address", r.taproot_address],
          ["ed25519 public key", r.ed25519_public_key],
          ["schnorr public key", r.schnorr_public_key],
        ]),
      );
    });

  pkps
    .command("list")
    .description("list the account's PKPs")
    .option("--page <n>", "page number, from 0", "0")
    .option("--page-size <n>", "items per page (1..100)", "100")
    .action(async (o: { page: string; pageSize: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ items: Record<string, unknown>[] }>("GET", "/core/v1/pkps", {
        query: { page_number: o.page, page_size: o.pageSize },
      });
      out.result(r, () =>
        table(
          ["pkp id", "address", "solana address", "taproot address", "name"],
          (r.items ?? []).map((p) => [
            String(p.pkp_id ?? p.id),
            String(p.address ?? ""),
            String(p.solana_address ?? ""),
            String(p.taproot_address ?? ""),
            String(p.name ?? ""),
          ]),
        ),
      );
    });

  pkps
    .command("show <pkpId>")
    .description("public keys and addresses of a PKP: EVM, Solana, Taproot (no key needed)")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<Record<string, unknown>>(
        "GET",
        `/core/v1/pkps/${encodeURIComponent(id)}`,
        { auth: false },
      );
      out.result(r, () => fields(Object.entries(r).map(([k, v]) => [k.replace(/_/g, " "), v])));
    });
}
