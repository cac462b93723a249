import type { Command } from "commander";
import { FLAG_SCOPES, GROUP_SCOPES_FOR_PEOPLE, type ScopeBody } from "../../vocabulary/scopes";
import { UsageError } from "../api";
import { collect, contextOf, groupIds } from "../context";
import { groupList, table } from "../output";

interface PermissionFlags {
  name?: string;
  description?: string;
  canCreateGroups?: boolean;
  canDeleteGroups?: boolean;
  canCreatePkps?: boolean;
  execute?: string[];
  manageActions?: string[];
  addPkp?: string[];
  removePkp?: string[];
  expiration?: string;
  spendCap?: string;
}

function withPermissionFlags(cmd: Command): Command {
  return cmd
    .option("--description <text>", "description")
    .option("--can-create-groups", "may create groups (group:create)")
    .option("--can-delete-groups", "may delete groups (group:delete)")
    .option("--can-create-pkps", "may create PKPs (pkp:create)")
    .option("--execute <groups>", "groups where it may run actions, e.g. 1,2, or all (execute)", collect)
    .option(
      "--manage-actions <groups>",
      "groups where it may add/remove action CIDs, e.g. 1,2, or all (group:manageActions)",
      collect,
    )
    .option("--add-pkp <groups>", "groups where it may add PKPs, e.g. 1,2, or all (group:addPkp)", collect)
    .option(
      "--remove-pkp <groups>",
      "groups where it may remove PKPs, e.g. 1,2, or all (group:removePkp)",
      collect,
    )
    .option("--expiration <time>", "expiry: ISO date/time or unix seconds (default: never)")
    .option(
      "--spend-cap <cents>",
      "the most this key may spend, in cents (billing; default: no cap); its runs are refused with spend_cap_reached past it",
    );
}

function parseSpendCap(v: string): number {
  if (!/^\d{1,12}$/.test(v.trim()))
    throw new UsageError(`--spend-cap: ${JSON.stringify(v)} is not a number of cents (e.g. --spend-cap 50).`);
  return Number(v.trim());
}

/** The request body of add/update: the full permission set (docs/background.md §4.1 rule 2: anything omitted is reset). */
function permissionBody(o: PermissionFlags): Record<string, unknown> {
  const ids = (v: string[] | undefined, flag: string) => groupIds(v, flag).map((s) => Number(s));
  // Typed by the scope vocabulary, so a misspelt field does not compile.
  const scopes: ScopeBody<number> = {
    can_create_groups: o.canCreateGroups === true,
    can_delete_groups: o.canDeleteGroups === true,
    can_create_pkps: o.canCreatePkps === true,
    manage_ipfs_ids_in_groups: ids(o.manageActions, "--manage-actions"),
    add_pkp_to_groups: ids(o.addPkp, "--add-pkp"),
    remove_pkp_from_groups: ids(o.removePkp, "--remove-pkp"),
    execute_in_groups: ids(o.execute, "--execute"),
  };
  const body: Record<string, unknown> = { name: o.name, ...scopes };
  if (o.description !== undefined) body.description = o.description;
  if (o.expiration !== undefined) body.expiration = parseExpiration(o.expiration);
  if (o.spendCap !== undefined) body.spend_cap_cents = parseSpendCap(o.spendCap);
  return body;
}

function parseExpiration(v: string): number {
  if (/^\d+$/.test(v)) return Number(v);
  const t = Date.parse(v);
  if (Number.isNaN(t))
    throw new UsageError(`--expiration: ${JSON.stringify(v)} is neither an ISO date nor unix seconds.`);
  return Math.floor(t / 1000);
}

/** What the new key may do, one line per granted permission ("execute  all groups"). */
function grants(k: Record<string, unknown>): string[] {
  const lines: string[] = [];
  for (const { label, listed } of GROUP_SCOPES_FOR_PEOPLE) {
    const v = k[listed];
    if (Array.isArray(v) && v.length) lines.push(`${label.padEnd(14)}${groupList(v)}`);
  }
  for (const { label, listed } of FLAG_SCOPES) if (k[listed]) lines.push(`${label.padEnd(14)}yes`);
  if (typeof k.spend_cap_cents === "number")
    lines.push(`${"spend cap".padEnd(14)}${k.spend_cap_cents} cents`);
  return lines;
}

/** Cents spent by the key, and its cap when it has one ("3/50"). */
function spent(k: Record<string, unknown>): string {
  if (typeof k.spent_cents !== "number")
    return k.balance === null || k.balance === undefined ? "-" : String(k.balance);
  return typeof k.spend_cap_cents === "number"
    ? `${k.spent_cents}/${k.spend_cap_cents}`
    : String(k.spent_cents);
}

/** A key is named by its value (uk_…, or a raw 0x private key) or by its id (its 0x address). */
export function keyReference(ref: string): Record<string, string> {
  if (/^0x[0-9a-fA-F]{40}$/.test(ref)) return { id: ref };
  if (/^(uk_[0-9a-fA-F]{64}|0x[0-9a-fA-F]{64})$/.test(ref)) return { usage_api_key: ref };
  throw new UsageError(
    `${ref.startsWith("ak_") ? "That is an account key; " : ""}give the usage key value (uk_…) or its id (0x address).`,
  );
}

/** `--overlap`: seconds, or a number with a unit s/m/h/d ("90s", "15m", "12h", "7d"). */
export function parseOverlap(v: string): number {
  const m = /^(\d+)([smhd]?)$/.exec(v.trim());
  if (!m)
    throw new UsageError(
      `--overlap: ${JSON.stringify(v)} is not a duration; give seconds or a number with s, m, h or d (e.g. 15m, 7d).`,
    );
  return Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as "" | "s" | "m" | "h" | "d"];
}

export function registerKeys(program: Command): void {
  const keys = program.command("keys").description("usage keys: scoped, rotatable keys (account key only)");

  withPermissionFlags(
    keys
      .command("add")
      .description("create a usage key; prints its value ONCE")
      .requiredOption("--name <name>", "label"),
  ).action(async (o: PermissionFlags, cmd: Command) => {
    const { client, out } = contextOf(cmd);
    const r = await out.progress(
      "registering the usage key on chain",
      client.request<Record<string, unknown>>("POST", "/core/v1/add_usage_api_key", {
        body: permissionBody(o),
      }),
    );
    out.result(r, () =>
      [
        `usage key id  ${String(r.id ?? r.address ?? "")}`.trimEnd(),
        ...grants(r),
        "",
        "Usage key (shown this once; give it to the service that will use it):",
        "",
        `  ${String(r.usage_api_key)}`,
      ].join("\n"),
    );
  });

  keys
    .command("list")
    .description("list usage keys (values are never shown)")
    .option("--page <n>", "page number, from 0", "0")
    .option("--page-size <n>", "items per page (1..100)", "100")
    .option("--all", "also list expired and revoked keys, with their state")
    .action(async (o: { page: string; pageSize: string; all?: boolean }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ items: Record<string, unknown>[]; total?: number }>(
        "GET",
        "/core/v1/list_api_keys",
        {
          query: { page_number: o.page, page_size: o.pageSize, ...(o.all ? { include: "all" } : {}) },
        },
      );
      const headers = ["id", "name", ...GROUP_SCOPES_FOR_PEOPLE.map((s) => s.label), "create", "spent"];
      out.result(r, () =>
        table(
          o.all ? [...headers, "state"] : headers,
          (r.items ?? []).map((k) => [
            String(k.id),
            String(k.name ?? ""),
            ...GROUP_SCOPES_FOR_PEOPLE.map((s) => groupList(k[s.listed])),
            [
              k.can_create_groups && "groups",
              k.can_delete_groups && "delete-groups",
              k.can_create_pkps && "pkps",
            ]
              .filter(Boolean)
              .join(",") || "-",
            spent(k),
            ...(o.all ? [String(k.state ?? "active")] : []),
          ]),
        ),
      );
    });

  withPermissionFlags(
    keys
      .command("update <key>")
      .description(
        "replace a usage key's name and ALL its permissions (omitted flags are reset); <key> is its value or id",
      )
      .requiredOption("--name <name>", "label"),
  )
    .option("--metadata-only", "change only name and description, keep the permissions")
    .action(async (ref: string, o: PermissionFlags & { metadataOnly?: boolean }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const target = keyReference(ref);
      const body = o.metadataOnly
        ? { ...target, name: o.name, ...(o.description !== undefined ? { description: o.description } : {}) }
        : { ...target, ...permissionBody(o) };
      const r = await out.progress(
        "updating the usage key on chain",
        client.request(
          "POST",
          o.metadataOnly ? "/core/v1/update_usage_api_key_metadata" : "/core/v1/update_usage_api_key",
          { body },
        ),
      );
      out.result(r, () => "updated");
    });

  keys
    .command("rotate <key>")
    .description(
      "replace a usage key (its value or id) by a new one with the same permissions, name and spend cap; prints the new value ONCE; the old key keeps working for --overlap, then is refused",
    )
    .requiredOption(
      "--overlap <duration>",
      "how long the old key keeps working: seconds, or 15m, 12h, 7d (max 30d; 0 = stop now)",
    )
    .option("--expiration <time>", "the new key's expiry: ISO date/time or unix seconds (default: never)")
    .action(async (ref: string, o: { overlap: string; expiration?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const body = {
        ...keyReference(ref),
        overlap_seconds: parseOverlap(o.overlap),
        ...(o.expiration !== undefined ? { expiration: parseExpiration(o.expiration) } : {}),
      };
      const r = await out.progress("rotating the usage key on chain", client.sigil().rotateUsageApiKey(body));
      out.result(r, () =>
        [
          `usage key id  ${r.id}`,
          `replaces      ${r.previous_key.id}, refused from ${new Date(r.previous_key.expiration * 1000).toISOString()}`,
          ...grants(r),
          "",
          "New usage key (shown this once; deploy it before the old one stops working):",
          "",
          `  ${String(r.usage_api_key)}`,
        ].join("\n"),
      );
    });

  keys
    .command("remove <key>")
    .description("revoke a usage key now (its value or id)")
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await out.progress(
        "revoking the usage key on chain",
        client.request("POST", "/core/v1/remove_usage_api_key", { body: keyReference(ref) }),
      );
      out.result(r, () => "removed");
    });
}
