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

/** The interactive time limit of `sigil run` (the service's own limit is 30 s unless its operator set another). */
export const DEFAULT_RUN_TIMEOUT_MS = 5_000;

/**
 * `--timeout`: milliseconds, or a number with ms/s ("1500", "1500ms", "10s"); "max" for the service's own
 * limit (no timeout_ms sent).
 */
export function parseTimeout(v: string): number | null {
  const t = v.trim();
  if (t === "max") return null;
  const m = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(t);
  const ms = m ? Math.round(Number(m[1]) * (m[2] === "s" ? 1000 : 1)) : NaN;
  if (!Number.isSafeInteger(ms) || ms < 1)
    throw new UsageError(
      `--timeout: ${JSON.stringify(v)} is not a time limit; give milliseconds, seconds with s (e.g. 10s), or max.`,
    );
  return ms;
}

/**
 * `--pkp` is also what the action gets as `pkpId` (as the dashboard's runner does), unless the params
 * name one themselves. Params that are not a JSON object are passed as they are.
 */
export function withPkpId(params: unknown, pkp: string | undefined): unknown {
  if (pkp === undefined) return params;
  if (params === undefined) return { pkpId: pkp };
  if (params !== null && typeof params === "object" && !Array.isArray(params) && !("pkpId" in params))
    return { ...(params as Record<string, unknown>), pkpId: pkp };
  return params;
}

interface RunAnswer {
  response?: unknown;
  logs?: string | string[];
  has_error?: boolean;
  error?: { code: string; message: string };
  execution_ms?: number;
  charged_cents?: number;
}

const cents = (n: number) => `${n} cent${n === 1 ? "" : "s"}`;

export function registerRun(program: Command): void {
  program
    .command("run [file]")
    .description(
      "execute an action (from a file, or --cid) with a PKP; prints its response and logs. With the account key any code runs with any PKP of the account; a usage key runs what its groups list",
    )
    .option("--cid <cid>", "run the action stored under this CID instead of a file")
    .option(
      "--pkp <pkpId>",
      "the PKP the action may use; also passed as pkpId in the params unless they name one",
    )
    .option("--params <json>", "JSON object passed to the action as jsParams")
    .option("--params-file <file>", "read jsParams from a JSON file")
    .option(
      "--timeout <duration>",
      `stop the run after this long: ms, or seconds with s (e.g. 10s); max for the service's limit (default ${DEFAULT_RUN_TIMEOUT_MS / 1000}s, so a runaway loop costs a few cents)`,
    )
    .action(async (file: string | undefined, o: RunFlags & { timeout?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      if ((file === undefined) === (o.cid === undefined))
        throw new UsageError("run: give either a file or --cid (exactly one).");
      const timeoutMs = o.timeout === undefined ? DEFAULT_RUN_TIMEOUT_MS : parseTimeout(o.timeout);
      const body: Record<string, unknown> =
        file !== undefined ? { code: readCodeFile(file) } : { cid: o.cid };
      if (o.pkp !== undefined) body.pkp_id = o.pkp;
      const params = withPkpId(parseParams(o), o.pkp);
      if (params !== undefined) body.js_params = params;
      if (timeoutMs !== null) body.timeout_ms = timeoutMs;
      // The worst case before it runs: the time limit, in started seconds, at the service's price.
      const prices = await client
        .request<{ prices?: { execution_cents_per_second?: number } | null }>("GET", "/core/v1/config")
        .then((c) => c.prices ?? null)
        .catch(() => null);
      const perSecond = prices?.execution_cents_per_second;
      if (timeoutMs !== null && typeof perSecond === "number")
        out.note(
          `time limit ${timeoutMs / 1000} s: this run costs at most ${cents(Math.ceil(timeoutMs / 1000) * perSecond)}`,
        );
      const r = await out.progress(
        "running the action",
        client.request<RunAnswer>("POST", "/core/v1/svc_action", { body }),
        // Answered, but the action threw or hit its time limit: that is a failure, not a ✓.
        (v) => v.has_error === true,
      );
      out.result(r, () => {
        const logs = Array.isArray(r.logs) ? r.logs.join("\n") : (r.logs ?? "");
        const parts = [];
        if (logs.trim() !== "") parts.push(`logs:\n${logs.replace(/\n$/, "")}`);
        if (r.has_error) parts.push(`error: ${r.error?.code ?? "action_error"}: ${r.error?.message ?? ""}`);
        if (r.error?.code === "timeout")
          parts.push(
            timeoutMs === null
              ? "The run hit the service's time limit."
              : `The run hit its time limit (${timeoutMs / 1000} s); give a longer one with --timeout 20s (or max).`,
          );
        if (!r.has_error || r.response !== undefined)
          parts.push(typeof r.response === "string" ? r.response : JSON.stringify(r.response, null, 2));
        return parts.join("\n");
      });
      if (typeof r.charged_cents === "number")
        out.note(`charged ${cents(r.charged_cents)} (${r.execution_ms ?? "?"} ms)`);
      // The service ran it, but the action itself threw or timed out: scripts must be able to tell.
      if (r.has_error) process.exitCode = 2;
    });
}
