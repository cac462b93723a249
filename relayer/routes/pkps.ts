/** PKPs: create (pkp:create), list (any key of the account), get one (public: nothing secret). */
import { Router } from "express";
import { authOf } from "../auth";
import { requireWriteScope } from "../policy";
import { registryInterface, Scope } from "../chain/abi";
import { firstEvent, handler, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { BodyReader, paginate, parsePage, parsePkpId } from "../http/validate";
import { pkpItem } from "../present";

export function pkpRoutes(ctx: RelayerContext): Router {
  const r = Router();
  const { limits } = ctx.cfg;

  r.post(
    "/pkps/create",
    ctx.auth.requireKey(),
    handler(ctx, async (req, res) => {
      const auth = authOf(res);
      const b = new BodyReader(req.body);
      const name = b.string("name", { max: limits.maxNameLength });
      const description = b.string("description", { max: limits.maxDescriptionLength });
      b.done();
      requireWriteScope(auth, Scope.CreatePkp, 0);
      const out = await write(
        ctx,
        auth,
        "create_pkp",
        registryInterface.encodeFunctionData("createPkp", [name, description]),
      );
      const pkpId = (firstEvent(out, "PkpCreated").args.pkpId as string).toLowerCase();
      return {
        status: 201,
        body: { ...pkpItem({ id: pkpId, name, description }, ctx.enclave), tx_hash: out.txHash },
      };
    }),
  );

  r.get(
    "/pkps",
    ctx.auth.requireKey(),
    handler(ctx, async (req, res) => {
      const auth = authOf(res);
      const page = parsePage(req.query as Record<string, unknown>, limits.maxPageSize);
      const p = paginate([...auth.account.pkps.values()], page);
      return { body: { ...p, items: p.items.map((x) => pkpItem(x, ctx.enclave)) } };
    }),
  );

  // Public: a PKP's public key and address are not secret, and wallets need them without a key. Answered
  // from the permission cache (found PKPs kept, unknown ids remembered briefly) behind the per-IP limit,
  // so a flood of ids costs the chain at most one call per distinct id.
  r.get(
    "/pkps/:id",
    handler(ctx, async (req) => {
      const id = parsePkpId(req.params.id, "id");
      const info = await ctx.cache.pkp(id);
      if (!info) throw new ApiError("pkp_not_found", `No PKP has id ${id}.`, { details: { pkp_id: id } });
      return {
        body: {
          ...pkpItem({ id, name: info.name, description: info.description }, ctx.enclave),
          account_id: info.accountId,
        },
      };
    }),
  );

  return r;
}
