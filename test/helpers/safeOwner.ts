/**
 * A 2-of-3 Safe as an account's owner, for path-B tests: three of anvil's funded dev keys own it, the
 * first two sign every transaction, and a fourth key pays for the deployment and the executions (so no
 * owner's balance or nonce moves). `tx` is the whole multisig round trip for one registry call; the
 * relayer takes no part in it.
 */
import { ethers } from "ethers";
import {
  createSafe,
  encodeRegistryCall,
  proposeSignExecute,
  type RegistryOp,
  type SafeContext,
} from "../../scripts/safe/lib";
import { AccountRegistry__factory } from "../../typechain-types";
import { devKey } from "../../testkit/anvil";

/** The owners' keys (anvil accounts 1-3) and the payer's (account 5) every Safe test uses by default. */
export const SAFE_OWNER_KEYS = [devKey(1), devKey(2), devKey(3)];
export const SAFE_PAYER_KEY = devKey(5);

export interface SafeOwner {
  /** The Safe's address. */
  address: string;
  ownerKeys: string[];
  /** The keys that sign each transaction (two: the threshold). */
  signerKeys: string[];
  payerKey: string;
  /** Proposes, signs with `signerKeys` and executes one call of the registry through the Safe. */
  tx(op: RegistryOp): Promise<{ txHash: string; blockNumber: number }>;
}

/** Deploys a fresh 2-of-3 Safe on the chain of `ctx`, bound to the registry at `registry`. */
export async function createSafeOwner(
  ctx: SafeContext,
  registry: string,
  opts: { ownerKeys?: string[]; signerKeys?: string[]; payerKey?: string } = {},
): Promise<SafeOwner> {
  const ownerKeys = opts.ownerKeys ?? SAFE_OWNER_KEYS;
  const signerKeys = opts.signerKeys ?? ownerKeys.slice(0, 2);
  const payerKey = opts.payerKey ?? SAFE_PAYER_KEY;
  const address = await createSafe(ctx, payerKey, {
    owners: ownerKeys.map((k) => new ethers.Wallet(k).address),
    threshold: 2,
  });
  const tx = async (op: RegistryOp) => {
    const { txHash, blockNumber } = await proposeSignExecute(ctx, {
      safe: address,
      to: registry,
      data: encodeRegistryCall(op).data,
      ownerKeys: signerKeys,
      executorKey: payerKey,
    });
    return { txHash, blockNumber };
  };
  return { address, ownerKeys, signerKeys, payerKey, tx };
}

/**
 * The Safe creates its account (`name`), one PKP and group 1 holding that PKP and the actions `cids`:
 * the usual start of a path-B test. Answers the account's and the PKP's ids.
 */
export async function safeAccountWithGroup(
  safe: SafeOwner,
  registry: string,
  provider: ethers.Provider,
  name: string,
  cids: string[],
): Promise<{ accountId: bigint; pkpId: string }> {
  await safe.tx({ op: "call", method: "createAccount", args: [name, ethers.ZeroAddress] });
  await safe.tx({ op: "create-pkp", name: "p" });
  const contract = AccountRegistry__factory.connect(registry, provider);
  const accountId = await contract.accountOfOwner(safe.address);
  const pkpId = (await contract.listPkps(accountId, 0, 1))[0][0].id;
  await safe.tx({ op: "create-group", name: "g", pkpIds: [pkpId], cids });
  return { accountId, pkpId };
}
