import * as fs from "node:fs";
import type { Command } from "commander";
import { UsageError } from "../api";
import { contextOf } from "../context";

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
}
