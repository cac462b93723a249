import * as fs from "node:fs";
import type { Command } from "commander";
import { UsageError } from "../api";
import { contextOf } from "../context";
import { readCodeFile } from "./actions";

interface RunFlags {
  cid?: string;
  pkp?: string;
  params?: string;
  paramsFile?: string;
}

function parseParams(o: RunFlags): unknown {
  if (o.params !== undefined && o.paramsFile !== undefined)
    throw new UsageError("Give --params or --params-file, not both.");
  const text = o.params ?? (o.paramsFile !== undefined ? readParamsFile(o.paramsFile) : undefined);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UsageError(
      `--params must be JSON (${(e as Error).message}), e.g. --params '{"message":"hello"}'.`,
    );
  }
}

function readParamsFile(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (e) {
    throw new UsageError(
      `Cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}.`,
    );
  }
}

export function registerRun(program: Command): void {
  program
    .command("run [file]")
    .description("execute an action (from a file, or --cid) with a PKP; prints its response and logs")
    .option("--cid <cid>", "run the action stored under this CID instead of a file")
    .option("--pkp <pkpId>", "the PKP the action may use")
    .option("--params <json>", "JSON object passed to the action as jsParams")
    .option("--params-file <file>", "read jsParams from a JSON file")
    .action(async (file: string | undefined, o: RunFlags, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      if ((file === undefined) === (o.cid === undefined))
        throw new UsageError("run: give either a file or --cid (exactly one).");
      const body: Record<string, unknown> =
        file !== undefined ? { code: readCodeFile(file) } : { cid: o.cid };
      if (o.pkp !== undefined) body.pkp_id = o.pkp;
      const params = parseParams(o);
      if (params !== undefined) body.js_params = params;
      const r = await out.progress(
        "running the action",
        client.request<{
          response?: unknown;
          logs?: string | string[];
          has_error?: boolean;
          error?: { code: string; message: string };
        }>("POST", "/core/v1/svc_action", { body }),
      );
      out.result(r, () => {
        const logs = Array.isArray(r.logs) ? r.logs.join("\n") : (r.logs ?? "");
        const parts = [];
        if (logs.trim() !== "") parts.push(`logs:\n${logs.replace(/\n$/, "")}`);
        if (r.has_error) parts.push(`error: ${r.error?.code ?? "action_error"}: ${r.error?.message ?? ""}`);
        parts.push(typeof r.response === "string" ? r.response : JSON.stringify(r.response, null, 2));
        return parts.join("\n");
      });
      // The service ran it, but the action itself threw: scripts must be able to tell.
      if (r.has_error) process.exitCode = 2;
    });
}
