/**
 * Groups: create, list, get (members as PKP ids and CIDs, never hashes), delete, and change members.
 * Every refusal is checked from the cache first (precise 403/404/409 without gas); the registry checks
 * again on chain.
 */
import type { Request, Response } from "express";
import { getAddress } from "ethers";
import { authOf, type AuthContext } from "../auth";
import { requireGroup, requireWriteScope } from "../policy";
import { registryInterface, Scope } from "../chain/abi";
import { registryRefusal } from "../chain/registryErrors";
import { cidHash, type AccountProjection } from "../permissions/projection";
import { firstEvent, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { isPkpAddress, paginate, parseGroupId, parsePage } from "../http/validate";
import { groupDetail, groupSummary } from "../present";
import { pkpAddressIndexOf } from "../permissions/pkpAddressIndex";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

/** A PKP reference of this account (`s.pkpRef`: an id, or an address), as its canonical id. */
export function resolvePkpRef(
  ctx: RelayerContext,
  account: AccountProjection,
  v: string,
  field: string,
): string {
  if (isPkpAddress(v)) {
    const want = getAddress(v.toLowerCase());
    const found = pkpAddressIndexOf(ctx.enclave).lookup(account.pkps, want);
    if (found !== null) return found;
    throw new ApiError("pkp_not_found", `No PKP of this account has address ${want}.`, {
      details: { field, address: want },
    });
  }
  const id = v;
  if (!account.pkps.has(id))
    throw new ApiError("pkp_not_found", `PKP ${id} does not exist in this account.`, {
      details: { field, pkp_id: id },
    });
  return id;
}

function noDuplicates(list: string[], field: string): void {
  const seen = new Set<string>();
  for (const x of list) {
    if (seen.has(x))
      throw new ApiError("invalid_request", `\`${field}\` lists ${x} twice.`, { details: { field } });
    seen.add(x);
  }
}

const createBody = s.obj({
  name: s.name,
  description: s.description,
  pkps: s.list(s.pkpRef),
  actions: s.list(s.cid()),
});

const postGroups = endpoint<RelayerContext>("POST", "/groups", {
  caller: "key",
  scopes: ["group:create"],
  summary: "Create a group (group:create; initial members need the wildcard scopes)",
  status: 201,
  body: createBody,
  answer: s.out({ ...s.groupFields, tx_hash: s.txHash }),
  errors: [...s.WRITE_ERRORS, "missing_scope", "pkp_not_found", "too_many_groups"],
  async handle(ctx, _req, res, body: BodyOf<typeof createBody>) {
    const auth = authOf(res);
    const { name, description, actions: cids } = body;
    const pkps = body.pkps.map((x, i) => resolvePkpRef(ctx, auth.account, x, `pkps[${i}]`));
    noDuplicates(pkps, "pkps");
    noDuplicates(cids, "actions");
    requireWriteScope(auth, Scope.CreateGroup, 0);
    // Initial members only where the key could add them afterwards: the wildcard (the new id is unknown).
    if (pkps.length) requireWriteScope(auth, Scope.AddPkp, 0);
    if (cids.length) requireWriteScope(auth, Scope.ManageActions, 0);
    const out = await write(
      ctx,
      auth,
      "create_group",
      registryInterface.encodeFunctionData("createGroup", [name, description, pkps, cids]),
    );
    const groupId = Number(firstEvent(out, "GroupCreated").args.groupId);
    return {
      status: 201,
      body: {
        group_id: groupId,
        name,
        description,
        pkps,
        actions: cids,
        policy_cid: null,
        tx_hash: out.txHash,
      },
    };
  },
});

const getGroups = endpoint<RelayerContext>("GET", "/groups", {
  caller: "key",
  summary: "List groups",
  params: s.pagingParams,
  answer: s.page(
    s.out({
      group_id: s.int(),
      name: s.str(),
      description: s.str(),
      pkp_count: s.int(),
      action_count: s.int(),
      policy_cid: s.nullable(s.str("CID of the group's signing policy; null: none")),
    }),
  ),
  errors: ["invalid_pagination"],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    const page = parsePage(req.query as Record<string, unknown>, ctx.cfg.limits.maxPageSize);
    const groups = [...auth.account.groups.values()].sort((a, b) => a.id - b.id);
    const p = paginate(groups, page);
    return { body: { ...p, items: p.items.map(groupSummary) } };
  },
});

const getGroupsId = endpoint<RelayerContext>("GET", "/groups/:id", {
  caller: "key",
  summary: "A group with its members (PKP ids and CIDs)",
  params: [s.idParam("id", s.int())],
  answer: s.ref("Group"),
  errors: ["invalid_group_id", "group_not_found"],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    const id = parseGroupId(req.params.id, "id");
    return { body: groupDetail(requireGroup(auth.account, id)) };
  },
});

const deleteGroupsId = endpoint<RelayerContext>("DELETE", "/groups/:id", {
  caller: "key",
  scopes: ["group:delete"],
  summary: "Delete a group (group:delete)",
  params: [s.idParam("id", s.int())],
  answer: s.out({ group_id: s.int(), deleted: { type: "boolean", const: true }, tx_hash: s.txHash }),
  // No body is declared, but its codes were listed before they were derived from the body: kept.
  errors: [
    ...s.BODY_ERRORS,
    "invalid_request",
    "unknown_field",
    ...s.WRITE_ERRORS,
    "missing_scope",
    "invalid_group_id",
    "group_not_found",
  ],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    const id = parseGroupId(req.params.id, "id");
    requireGroup(auth.account, id);
    requireWriteScope(auth, Scope.DeleteGroup, 0);
    const out = await write(
      ctx,
      auth,
      "delete_group",
      registryInterface.encodeFunctionData("deleteGroup", [id]),
    );
    return { body: { group_id: id, deleted: true, tx_hash: out.txHash } };
  },
});

/** Members: `{add, remove}`, CIDs or PKP references (an address is resolved to its PKP's id). */
const membersBody = (member: s.Typed<string>) => s.obj({ add: s.list(member), remove: s.list(member) });
const actionMembers = membersBody(s.cid());
const pkpMembers = membersBody(s.pkpRef);

/** Removals are sent first, then additions (one transaction each). */
function changeMembers(kind: "actions" | "pkps") {
  return async (ctx: RelayerContext, req: Request, res: Response, body: BodyOf<typeof pkpMembers>) => {
    const auth: AuthContext = authOf(res);
    const id = parseGroupId(req.params.id, "id");
    // Only a PKP's address needs the account (its id and any CID were read by the schema).
    const resolve = (list: string[], field: string) =>
      list.map((x, i) => (isPkpAddress(x) ? resolvePkpRef(ctx, auth.account, x, `${field}[${i}]`) : x));
    const add = resolve(body.add, "add");
    const remove = resolve(body.remove, "remove");
    if (add.length === 0 && remove.length === 0)
      throw new ApiError("invalid_request", "Send at least one entry in `add` or `remove`.", {
        details: { field: "add" },
      });
    noDuplicates([...add, ...remove], "add and remove");
    const group = requireGroup(auth.account, id);
    if (kind === "actions") {
      if (add.length || remove.length) requireWriteScope(auth, Scope.ManageActions, id);
      for (const cid of add)
        if (group.actions.has(cidHash(cid))) throw registryRefusal.actionAlreadyInGroup(id, cid);
      for (const cid of remove)
        if (!group.actions.has(cidHash(cid))) throw registryRefusal.actionNotInGroup(id, cid);
    } else {
      if (add.length) requireWriteScope(auth, Scope.AddPkp, id);
      if (remove.length) requireWriteScope(auth, Scope.RemovePkp, id);
      for (const p of add) {
        if (!auth.account.pkps.has(p)) throw registryRefusal.pkpNotFound(p);
        if (group.pkps.has(p)) throw registryRefusal.pkpAlreadyInGroup(id, p);
      }
      for (const p of remove) if (!group.pkps.has(p)) throw registryRefusal.pkpNotInGroup(id, p);
    }
    const txs: string[] = [];
    const [addFn, removeFn] =
      kind === "actions" ? ["addActions", "removeActions"] : ["addPkps", "removePkps"];
    if (remove.length)
      txs.push(
        (
          await write(
            ctx,
            auth,
            `group_${kind}_remove`,
            registryInterface.encodeFunctionData(removeFn, [id, remove]),
          )
        ).txHash,
      );
    if (add.length)
      txs.push(
        (await write(ctx, auth, `group_${kind}_add`, registryInterface.encodeFunctionData(addFn, [id, add])))
          .txHash,
      );
    const now = (await ctx.cache.account(auth.account.id)).groups.get(id);
    return { body: { ...(now ? groupDetail(now) : { group_id: id }), tx_hashes: txs } };
  };
}

const postGroupsIdActions = endpoint<RelayerContext>("POST", "/groups/:id/actions", {
  caller: "key",
  scopes: ["group:manageActions"],
  summary: "Add and remove action CIDs (group:manageActions)",
  params: [s.idParam("id", s.int())],
  body: actionMembers,
  answer: s.membersAnswer,
  errors: [
    ...s.WRITE_ERRORS,
    "missing_scope",
    "group_not_found",
    "action_already_in_group",
    "action_not_in_group",
    "too_many_members",
  ],
  handle: changeMembers("actions"),
});

const postGroupsIdPkps = endpoint<RelayerContext>("POST", "/groups/:id/pkps", {
  caller: "key",
  scopes: ["group:addPkp", "group:removePkp"],
  summary: "Add (group:addPkp) and remove (group:removePkp) PKPs",
  params: [s.idParam("id", s.int())],
  body: pkpMembers,
  answer: s.membersAnswer,
  errors: [
    ...s.WRITE_ERRORS,
    "missing_scope",
    "pkp_not_found",
    "group_not_found",
    "pkp_already_in_group",
    "pkp_not_in_group",
    "too_many_members",
  ],
  handle: changeMembers("pkps"),
});

export const GROUP_ENDPOINTS = [
  postGroups,
  getGroups,
  getGroupsId,
  deleteGroupsId,
  postGroupsIdActions,
  postGroupsIdPkps,
];
