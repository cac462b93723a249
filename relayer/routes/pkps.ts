/** PKPs: create (pkp:create), list (any key of the account), get one (public: nothing secret). */
import { authOf } from "../auth";
import { requireWriteScope } from "../policy";
import { registryInterface, Scope } from "../chain/abi";
import { firstEvent, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { paginate, parsePage, parsePkpId } from "../http/validate";
import { pkpItem } from "../present";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

const createBody = s.obj({ name: s.name, description: s.description });

const postPkpsCreate = endpoint<RelayerContext>("POST", "/pkps/create", {
  caller: "key",
  scopes: ["pkp:create"],
  summary: "Create a PKP (pkp:create)",
  status: 201,
  body: createBody,
  answer: s.out({ ...s.pkpFields, tx_hash: s.txHash }),
  errors: [...s.WRITE_ERRORS, "missing_scope"],
  async handle(ctx, _req, res, { name, description }: BodyOf<typeof createBody>) {
    const auth = authOf(res);
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
  },
});

const getPkps = endpoint<RelayerContext>("GET", "/pkps", {
  caller: "key",
  summary: "List the account's PKPs",
  params: s.pagingParams,
  answer: s.page(s.out(s.pkpFields)),
  errors: ["invalid_pagination"],
  async handle(ctx, req, res) {
    const auth = authOf(res);
    const page = parsePage(req.query as Record<string, unknown>, ctx.cfg.limits.maxPageSize);
    const p = paginate([...auth.account.pkps.values()], page);
    return { body: { ...p, items: p.items.map((x) => pkpItem(x, ctx.enclave)) } };
  },
});

// Public: a PKP's public key and address are not secret, and wallets need them without a key. Answered
// from the permission cache (found PKPs kept, unknown ids remembered briefly) behind the per-IP limit,
// so a flood of ids costs the chain at most one call per distinct id.
const getPkpsId = endpoint<RelayerContext>("GET", "/pkps/:id", {
  caller: "public",
  summary: "A PKP's public key and address (no key needed)",
  params: [s.idParam("id", s.pkpId)],
  answer: s.ref("Pkp"),
  errors: ["invalid_pkp_id", "pkp_not_found", "chain_unavailable"],
  async handle(ctx, req) {
    const id = parsePkpId(req.params.id, "id");
    const info = await ctx.cache.pkp(id);
    if (!info) throw new ApiError("pkp_not_found", `No PKP has id ${id}.`, { details: { pkp_id: id } });
    return {
      body: {
        ...pkpItem({ id, name: info.name, description: info.description }, ctx.enclave),
        account_id: info.accountId,
      },
    };
  },
});

export const PKP_ENDPOINTS = [postPkpsCreate, getPkps, getPkpsId];
