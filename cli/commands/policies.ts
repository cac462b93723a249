import * as fs from "node:fs";
import type { Command } from "commander";
import { UsageError } from "../api";
import { contextOf, groupId } from "../context";

/** A JSON file (a policy document, an operation), read and parsed; a usage error names what is wrong. */
function readJsonFile(file: string, what: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    throw new UsageError(
      `Cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}.`,
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`${file} is not JSON (expected ${what}).`);
  }
}

/** What a decision says, for people: "allowed by usage-payouts", or the refusal with the failing value. */
function decisionLine(d: Record<string, unknown>): string {
  if (d.allowed === true) return `allowed: rule ${String(d.rule)}`;
  const failed = d.field === undefined ? "" : ` (${String(d.field)} = ${String(d.value)})`;
  return `denied: rule ${String(d.rule)}: ${String(d.reason)}${failed}`;
}

export function registerPolicies(program: Command): void {
  const policies = program
    .command("policies")
    .description("signing policies: what a group's PKPs may sign (docs/policies.md)");

  policies
    .command("upload <file>")
    .description("check a policy document (JSON) against the schema and pin it; prints its CID")
    .action(async (file: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ cid: string }>("POST", "/core/v1/policies", {
        body: { policy: readJsonFile(file, "a policy document") },
      });
      out.result(r, () => r.cid);
    });

  policies
    .command("get <cid>")
    .description("print the policy document stored under a CID")
    .action(async (cid: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ policy: unknown }>(
        "GET",
        `/core/v1/policies/${encodeURIComponent(cid)}`,
      );
      out.result(r, () => JSON.stringify(r.policy, null, 2));
    });

  policies
    .command("evaluate <policy> <operation-file>")
    .description(
      "dry run: a policy (a JSON file, or the CID of an uploaded one) against an operation (a JSON file); nothing is signed",
    )
    .option("--at <time>", "evaluate as of this time (ISO 8601, UTC rules)")
    .action(async (policy: string, operationFile: string, o: { at?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const source = fs.existsSync(policy)
        ? { policy: readJsonFile(policy, "a policy document") }
        : { cid: policy };
      const r = await client.request<Record<string, unknown>>("POST", "/core/v1/policies/evaluate", {
        body: {
          ...source,
          operation: readJsonFile(operationFile, "an operation"),
          ...(o.at ? { at: o.at } : {}),
        },
      });
      out.result(r, () => decisionLine(r));
    });

  policies
    .command("set <group> <cid>")
    .description("set a group's signing policy (owner, or a key with manageActions on the group)")
    .action(async (group: string, cid: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ tx_hash: string }>(
        "POST",
        `/core/v1/groups/${groupId(group)}/policy`,
        {
          body: { cid },
        },
      );
      out.result(r, () => `group ${groupId(group)}: policy ${cid} (tx ${r.tx_hash})`);
    });

  policies
    .command("clear <group>")
    .description("clear a group's signing policy: its PKPs sign whatever authorized code asks again")
    .action(async (group: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ tx_hash: string }>(
        "POST",
        `/core/v1/groups/${groupId(group)}/policy`,
        {
          body: { cid: null },
        },
      );
      out.result(r, () => `group ${groupId(group)}: no policy (tx ${r.tx_hash})`);
    });
}
