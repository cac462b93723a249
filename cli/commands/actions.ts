import * as fs from "node:fs";
import type { Command } from "commander";
import { UsageError } from "../api";
import { contextOf } from "../context";
import { table } from "../output";

export function readCodeFile(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (e) {
    throw new UsageError(
      `Cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}.`,
    );
  }
}

export function registerActions(program: Command): void {
  const actions = program.command("actions").description("actions: JavaScript identified by its IPFS CID");

  actions
    .command("pin <file>")
    .description("store an action's code in the service's content store; prints its CID")
    .action(async (file: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ cid: string }>("POST", "/core/v1/actions", {
        body: { code: readCodeFile(file) },
      });
      out.result(r, () => r.cid);
    });

  actions
    .command("cid <file>")
    .description("compute an action's CID without storing it")
    .action(async (file: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ cid: string }>("POST", "/core/v1/actions/cid", {
        body: { code: readCodeFile(file) },
      });
      out.result(r, () => r.cid);
    });

  actions
    .command("get <cid>")
    .description("print the code stored under a CID")
    .action(async (cid: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<Record<string, unknown>>(
        "GET",
        `/core/v1/actions/${encodeURIComponent(cid)}`,
      );
      out.result(r, () => String(r.code ?? ""));
    });

  actions
    .command("pinned")
    .description("list the account's pinned actions, newest first")
    .option("--page <n>", "page number, from 0", "0")
    .option("--page-size <n>", "items per page (1..100)", "100")
    .action(async (o: { page: string; pageSize: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ items: Record<string, unknown>[]; total: number }>(
        "GET",
        "/core/v1/actions/pinned",
        { query: { page_number: o.page, page_size: o.pageSize } },
      );
      out.result(r, () =>
        table(
          ["cid", "bytes", "pinned at"],
          (r.items ?? []).map((p) => [String(p.cid), String(p.bytes), String(p.pinned_at)]),
        ),
      );
    });
}
