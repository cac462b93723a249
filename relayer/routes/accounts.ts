/** new_account, account info, ownership transfer (docs/background.md §5.1, §5.5). */
import { getAddress } from "ethers";
import { authOf } from "../auth";
import { accountMode, requireOwner } from "../policy";
import { registryInterface } from "../chain/abi";
import { firstEvent, submit, write, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { clientIp } from "../http/context";
import { limitedAddress } from "../rateLimit";
import { endpoint, type BodyOf } from "./endpoint";
import * as s from "./schemas";

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,190}\.[^\s@]{1,60}$/;

const newAccountBody = s.obj({
  account_name: s.name,
  account_description: s.description,
  email: { ...s.str("E-mail address"), "x-sigil-max-bytes": 254, pattern: EMAIL.source } as s.Typed<string>,
});

const newAccount = endpoint<RelayerContext>("POST", "/new_account", {
  caller: "public",
  summary: "Create an account (returns the account key, once)",
  status: 201,
  body: newAccountBody,
  answer: s.out(
    {
      api_key: s.nullable(s.str("The account key (shown once: null in a replayed answer)")),
      api_key_withheld: { type: "boolean", const: true, description: "Present in a replayed answer" },
      account_id: s.int(),
      owner_address: s.address,
      master_key_address: s.address,
      mode: s.mode,
      name: s.str(),
      description: s.str(),
      tx_hash: s.txHash,
    },
    ["api_key_withheld"],
  ),
  errors: [...s.WRITE_ERRORS, "rate_limited"],
  secretFields: { names: ["api_key"], mode: "drop" },
  async handle(ctx, req, _res, body: BodyOf<typeof newAccountBody>) {
    await ctx.newAccountLimit.take(`ip:${limitedAddress(clientIp(req))}`, "new accounts from this IP");
    const { account_name: name, account_description: description, email } = body;
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
    await ctx.profiles.put(String(accountId), { description, email: email ?? null, createdMs: Date.now() });
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
});

const accountInfo = endpoint<RelayerContext>("GET", "/account", {
  caller: "key",
  summary: "Account info, mode (api | chain_secured) and pending owner",
  answer: s.out(
    {
      account_id: s.int(),
      name: s.str(),
      description: s.str(),
      email: s.nullable(s.str("Only for the account key")),
      mode: s.mode,
      owner_address: s.address,
      pending_owner: s.nullable(s.address),
      master_key_address: s.nullable(s.address),
      group_count: s.int(),
      pkp_count: s.int(),
      usage_key_count: s.int(),
      caller: s.out({ kind: { type: "string", enum: ["account", "usage"] }, id: s.address }),
    },
    ["email"],
  ),
  errors: [],
  async handle(ctx, _req, res) {
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
  },
});

const transferBody = s.obj({ new_owner: s.addressIn }, ["new_owner"]);

const transferOwnership = endpoint<RelayerContext>("POST", "/account/transfer_ownership", {
  caller: "key",
  summary: "Propose a new owner (account key, API mode)",
  body: transferBody,
  answer: s.out({
    account_id: s.int(),
    owner_address: s.address,
    pending_owner: s.address,
    tx_hash: s.txHash,
    next_step: s.str(),
  }),
  errors: [...s.WRITE_ERRORS, "owner_only", "address_in_use"],
  async handle(ctx, _req, res, { new_owner: newOwner }: BodyOf<typeof transferBody>) {
    const auth = authOf(res);
    requireOwner(auth);
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
  },
});

const cancelOwnershipTransfer = endpoint<RelayerContext>("POST", "/account/cancel_ownership_transfer", {
  caller: "key",
  summary: "Withdraw a pending transfer (account key, API mode)",
  body: s.obj({}),
  answer: s.out({ account_id: s.int(), pending_owner: { type: "null" }, tx_hash: s.txHash }),
  errors: [...s.WRITE_ERRORS, "owner_only", "no_pending_transfer"],
  async handle(ctx, _req, res) {
    const auth = authOf(res);
    requireOwner(auth);
    if (!auth.account.pendingOwner)
      throw new ApiError("no_pending_transfer", "The account has no pending ownership transfer.");
    const out = await write(
      ctx,
      auth,
      "cancel_ownership_transfer",
      registryInterface.encodeFunctionData("cancelOwnershipTransfer", []),
    );
    return { body: { account_id: auth.account.id, pending_owner: null, tx_hash: out.txHash } };
  },
});

export const ACCOUNT_ENDPOINTS = [newAccount, accountInfo, transferOwnership, cancelOwnershipTransfer];
