/**
 * Writes with a usage key that never leaves the client (path A of the service, signed here): the SDK
 * encodes the registry call, asks the relayer to prepare the forward request (nonce, gas, deadline),
 * checks that what came back is its own call for the deployment it knows, signs the EIP-712
 * ForwardRequest and sends only the signed request. The relayer cannot change a signed byte: the
 * forwarder verifies the signature on chain.
 *
 * Answers have the same shape as the bearer endpoints' (a PKP, a group, `tx_hash`), read back after the
 * write with the same signed credentials.
 */
import type { Client } from "openapi-fetch";
import { getAddress, type TypedDataField, type Wallet } from "ethers";
import { SigilError } from "./errors";
import { registryWrites } from "./registryCalls";
import type { Answer, Body, paths, SigilConfig } from "./types";

export interface ForwardDeps {
  wallet: Wallet;
  api: Client<paths>;
  deployment: () => Promise<SigilConfig>;
}

export type ForwardAnswer = Answer<"/core/v1/forward", "post">;

/** Prepares, checks, signs and submits one registry call; the relayer's answer. */
export async function forwardCall(deps: ForwardDeps, data: string): Promise<ForwardAnswer> {
  const config = await deps.deployment();
  const prepared = (await deps.api.POST("/core/v1/forward/prepare", { body: { data } })).data!;
  const req = prepared.request;
  const d = prepared.domain;
  // The relayer chose nonce, gas and deadline; everything that says *what* is done must be ours.
  const mismatch =
    req.data.toLowerCase() !== data.toLowerCase()
      ? "data"
      : getAddress(req.to) !== getAddress(config.registry_address)
        ? "to"
        : getAddress(req.from) !== deps.wallet.address
          ? "from"
          : req.value !== "0"
            ? "value"
            : d.chain_id !== config.chain_id ||
                getAddress(d.verifying_contract) !== getAddress(config.forwarder_address)
              ? "domain"
              : null;
  if (mismatch !== null)
    throw new SigilError(
      `The relayer prepared a different request than asked for (${mismatch}); nothing was signed.`,
      {
        code: "invalid_response",
        details: { field: mismatch },
      },
    );
  const signature = await deps.wallet.signTypedData(
    { name: d.name, version: d.version, chainId: d.chain_id, verifyingContract: d.verifying_contract },
    prepared.types as unknown as Record<string, TypedDataField[]>,
    { ...req, value: BigInt(req.value), gas: BigInt(req.gas), nonce: BigInt(req.nonce) },
  );
  return (await deps.api.POST("/core/v1/forward", { body: { ...req, signature } })).data!;
}

export function forwardWrites(deps: ForwardDeps) {
  const call = (fn: string, args: unknown[]) =>
    forwardCall(deps, registryWrites.encodeFunctionData(fn, args));
  const group = async (id: number) =>
    (await deps.api.GET("/core/v1/groups/{id}", { params: { path: { id } } })).data!;

  async function members(
    id: number,
    body: { add?: string[]; remove?: string[] },
    addFn: string,
    removeFn: string,
  ): Promise<Answer<"/core/v1/groups/{id}/actions", "post">> {
    // As the bearer endpoint does: removals first, one transaction per non-empty list.
    const txs: string[] = [];
    if (body.remove?.length) txs.push((await call(removeFn, [id, body.remove])).tx_hash);
    if (body.add?.length) txs.push((await call(addFn, [id, body.add])).tx_hash);
    return { ...(await group(id)), tx_hashes: txs };
  }

  return {
    async createPkp(
      body: Body<"/core/v1/pkps/create", "post">,
    ): Promise<Answer<"/core/v1/pkps/create", "post">> {
      const out = await call("createPkp", [body.name ?? "", body.description ?? ""]);
      const pkp = (await deps.api.GET("/core/v1/pkps/{id}", { params: { path: { id: out.pkp_id! } } })).data!;
      const { account_id: _account, ...fields } = pkp;
      void _account;
      return { ...fields, tx_hash: out.tx_hash };
    },
    async createGroup(body: Body<"/core/v1/groups", "post">): Promise<Answer<"/core/v1/groups", "post">> {
      const out = await call("createGroup", [
        body.name ?? "",
        body.description ?? "",
        body.pkps ?? [],
        body.actions ?? [],
      ]);
      return { ...(await group(out.group_id!)), tx_hash: out.tx_hash };
    },
    async deleteGroup(id: number): Promise<Answer<"/core/v1/groups/{id}", "delete">> {
      const out = await call("deleteGroup", [id]);
      return { group_id: id, deleted: true, tx_hash: out.tx_hash };
    },
    updateGroupActions: (id: number, body: Body<"/core/v1/groups/{id}/actions", "post">) =>
      members(id, body, "addActions", "removeActions"),
    updateGroupPkps: (id: number, body: Body<"/core/v1/groups/{id}/pkps", "post">) =>
      members(id, body, "addPkps", "removePkps"),
    /** Sets (`cid`) or clears (`null`) the group's signing policy; the document must be uploaded first. */
    async setGroupPolicy(
      id: number,
      cid: string | null,
    ): Promise<Answer<"/core/v1/groups/{id}/policy", "post">> {
      const out = await call("setGroupPolicy", [id, cid ?? ""]);
      return { ...(await group(id)), tx_hash: out.tx_hash };
    },
  };
}

export type ForwardWrites = ReturnType<typeof forwardWrites>;
