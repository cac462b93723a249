import type { Command } from "commander";
import { UsageError } from "../api";
import { collect, contextOf, groupId } from "../context";
import type { CliClient } from "../api";
import { fields, list, table, type Output } from "../output";

interface MemberFlags {
  pkp?: string[];
  action?: string[];
}

const splitAll = (v: string[] | undefined) =>
  (v ?? []).flatMap((s) =>
    s
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  );

/**
 * CIDs among `cids` that are not pinned on this service. A run of such an action fetches it from the IPFS
 * gateways, or fails with action_not_found: usually a typo, or code pinned on another Sigil. Undefined
 * when the key may not list the pins (then nothing is said).
 */
async function notPinnedHere(client: CliClient, cids: string[]): Promise<string[] | undefined> {
  if (cids.length === 0) return [];
  const pinned = new Set<string>();
  try {
    for (let page = 0; ; page++) {
      const r = await client.request<{ items: { cid: string }[]; total: number }>(
        "GET",
        "/core/v1/actions/pinned",
        { query: { page_number: String(page), page_size: "100" } },
      );
      for (const p of r.items) pinned.add(p.cid);
      if (r.items.length < 100 || pinned.size >= r.total) break;
    }
  } catch {
    return undefined;
  }
  return cids.filter((c) => !pinned.has(c));
}

async function warnNotPinned(client: CliClient, out: Output, cids: string[]): Promise<void> {
  for (const cid of (await notPinnedHere(client, cids)) ?? [])
    out.error(
      `warning: action ${cid} is not pinned on this service: a run will fetch it from the IPFS gateways, or fail with action_not_found. Pin the code with npx sigil actions pin <file>.`,
    );
}

export function registerGroups(program: Command): void {
  const groups = program.command("groups").description("groups: a set of PKPs and a set of action CIDs");

  groups
    .command("create")
    .description("create a group, optionally with PKPs and actions")
    .requiredOption("--name <name>", "label")
    .option("--description <text>", "description")
    .option("--pkp <pkpId>", "a PKP to include (repeatable)", collect)
    .option("--action <cid>", "an action CID to include (repeatable)", collect)
    .action(async (o: MemberFlags & { name: string; description?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      await warnNotPinned(client, out, splitAll(o.action));
      const r = await out.progress(
        "creating the group on chain",
        // Typed SDK calls: with a usage key, writes are signed forward requests (the key is never sent).
        client.sigil().createGroup({
          name: o.name,
          pkps: splitAll(o.pkp),
          actions: splitAll(o.action),
          ...(o.description !== undefined ? { description: o.description } : {}),
        }),
      );
      out.result(r, () => `group id  ${String(r.group_id)}`);
    });

  groups
    .command("list")
    .description("list the account's groups")
    .option("--page <n>", "page number, from 0", "0")
    .option("--page-size <n>", "items per page (1..100)", "100")
    .action(async (o: { page: string; pageSize: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ items: Record<string, unknown>[] }>("GET", "/core/v1/groups", {
        query: { page_number: o.page, page_size: o.pageSize },
      });
      out.result(r, () =>
        table(
          ["group id", "name", "pkps", "actions"],
          (r.items ?? []).map((g) => [
            String(g.group_id ?? g.id),
            String(g.name ?? ""),
            String(Array.isArray(g.pkps) ? g.pkps.length : (g.pkp_count ?? "")),
            String(Array.isArray(g.actions) ? g.actions.length : (g.action_count ?? "")),
          ]),
        ),
      );
    });

  groups
    .command("show <groupId>")
    .description("a group's PKPs and action CIDs")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<Record<string, unknown>>("GET", `/core/v1/groups/${groupId(id)}`);
      out.result(r, () =>
        fields([
          ["group id", String(r.group_id ?? r.id)],
          ["name", r.name],
          ["description", r.description || undefined],
          ["pkps", list(r.pkps)],
          ["actions", list(r.actions)],
        ]),
      );
    });

  for (const verb of ["add", "remove"] as const)
    groups
      .command(`${verb} <groupId>`)
      .description(`${verb} PKPs and/or action CIDs ${verb === "add" ? "to" : "from"} a group`)
      .option("--pkp <pkpId>", "a PKP (repeatable)", collect)
      .option("--action <cid>", "an action CID (repeatable)", collect)
      .action(async (id: string, o: MemberFlags, cmd: Command) => {
        const { client, out } = contextOf(cmd);
        const g = groupId(id);
        const pkps = splitAll(o.pkp);
        const actions = splitAll(o.action);
        if (pkps.length === 0 && actions.length === 0)
          throw new UsageError(`groups ${verb}: give at least one --pkp or --action.`);
        if (verb === "add") await warnNotPinned(client, out, actions);
        const results: Record<string, unknown> = {};
        const other = verb === "add" ? "remove" : "add";
        if (actions.length > 0)
          results.actions = await out.progress(
            `${verb === "add" ? "adding" : "removing"} ${actions.length} action(s) on chain`,
            client.sigil().updateGroupActions(Number(g), { [verb]: actions, [other]: [] }),
          );
        if (pkps.length > 0)
          results.pkps = await out.progress(
            `${verb === "add" ? "adding" : "removing"} ${pkps.length} PKP(s) on chain`,
            client.sigil().updateGroupPkps(Number(g), { [verb]: pkps, [other]: [] }),
          );
        out.result(results, () => `${verb === "add" ? "added to" : "removed from"} group ${g}`);
      });

  groups
    .command("delete <groupId>")
    .description("delete a group")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await out.progress(
        "deleting the group on chain",
        client.sigil().deleteGroup(Number(groupId(id))),
      );
      out.result(r, () => `deleted group ${id}`);
    });
}
