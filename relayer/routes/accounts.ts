/** new_account, account info, ownership transfer (docs/background.md §5.1, §5.5). */
import { Router } from "express";
import { getAddress } from "ethers";
import { authOf } from "../auth";
import { accountMode, requireOwner } from "../policy";
import { registryInterface } from "../chain/abi";
import { firstEvent, handler, submit, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { clientIp } from "../http/context";
import { BodyReader, parseAddress } from "../http/validate";
import { limitedAddress } from "../rateLimit";

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,190}\.[^\s@]{1,60}$/;

export function accountRoutes(ctx: RelayerContext): Router {
  const r = Router();
  const { limits } = ctx.cfg;

  r.post(
    "/new_account",
    handler(
      ctx,
      async (req) => {
        await ctx.newAccountLimit.take(`ip:${limitedAddress(clientIp(req))}`, "new accounts from this IP");
        const b = new BodyReader(req.body);
        const name = b.string("account_name", { max: limits.maxNameLength });
        const description = b.string("account_description", { max: limits.maxDescriptionLength });
        const email = b.optionalString("email", 254);
        b.done();
        if (email !== undefined && !EMAIL.test(email))
          throw new ApiError("invalid_request", "`email` must be an e-mail address.", {
            details: { field: "email" },
          });

        const gen = ctx.enclave.generateAccountKey();
        const owner = ctx.enclave.ownerAddress(gen.address);
        const out = await submit(
          ctx,
          { apiKey: gen.apiKey, principal: owner, kind: "account" },
          registryInterface.encodeFunctionData("createAccount", [name, gen.address]),
        );
        const accountId = Number(firstEvent(out, "AccountCreated").args.accountId);
        await ctx.profiles.put(String(accountId), {
          description,
          email: email ?? null,
          createdMs: Date.now(),
        });
        await ctx.billing?.onAccountCreated(String(accountId));
        return {
          status: 201,
          body: {
            api_key: gen.apiKey,
            account_id: accountId,
            owner_address: owner,
            master_key_address: gen.address,
            mode: "api",
            name,
            description,
            tx_hash: out.txHash,
          },
        };
      },
      { secretFields: { names: ["api_key"], mode: "drop" } },
    ),
  );

  r.get(
    "/account",
    ctx.auth.requireKey(),
    handler(ctx, async (_req, res) => {
      const auth = authOf(res);
      const a = auth.account;
      const profile = await ctx.profiles.get(String(a.id));
      const liveKeys = [...a.keys.values()].filter(
        (k) => k.expiration === 0 || k.expiration > Date.now() / 1000,
      ).length;
      return {
        body: {
          account_id: a.id,
          name: a.name,
          description: profile?.description ?? "",
          // Personal data only for the account key.
          ...(auth.principal.kind === "account" ? { email: profile?.email ?? null } : {}),
          mode: accountMode(ctx.enclave, a),
          owner_address: a.owner,
          pending_owner: a.pendingOwner,
          master_key_address: a.masterKey,
          group_count: a.groups.size,
          pkp_count: a.pkps.size,
          usage_key_count: liveKeys,
          caller: { kind: auth.principal.kind, id: auth.principal.keyAddress },
        },
      };
    }),
  );

  r.post(
    "/account/transfer_ownership",
    ctx.auth.requireKey(),
    handler(ctx, async (req, res) => {
      const auth = authOf(res);
      requireOwner(auth);
      const b = new BodyReader(req.body);
      const newOwner = parseAddress(b.raw("new_owner"), "new_owner");
      b.done();
      if (getAddress(newOwner) === auth.account.owner)
        throw new ApiError("address_in_use", "The new owner is the current owner.");
      const out = await write(
        ctx,
        auth,
        "transfer_ownership",
        registryInterface.encodeFunctionData("transferOwnership", [newOwner]),
      );
      return {
        body: {
          account_id: auth.account.id,
          owner_address: auth.account.owner,
          pending_owner: newOwner,
          tx_hash: out.txHash,
          next_step:
            "The new owner calls acceptOwnership(account_id) on the registry; until then nothing changes.",
        },
      };
    }),
  );

  r.post(
    "/account/cancel_ownership_transfer",
    ctx.auth.requireKey(),
    handler(ctx, async (req, res) => {
      const auth = authOf(res);
      requireOwner(auth);
      new BodyReader(req.body).done();
      if (!auth.account.pendingOwner)
        throw new ApiError("no_pending_transfer", "The account has no pending ownership transfer.");
      const out = await write(
        ctx,
        auth,
        "cancel_ownership_transfer",
        registryInterface.encodeFunctionData("cancelOwnershipTransfer", []),
      );
      return { body: { account_id: auth.account.id, pending_owner: null, tx_hash: out.txHash } };
    }),
  );

  return r;
}
