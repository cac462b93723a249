import Safe from "@safe-global/protocol-kit";
import { ethers } from "ethers";
import { SafeCliError } from "./errors";
import type { SafeSuiteAddresses } from "./deployments";
import { normaliseKey, requireAddress, rpcProvider, walletFromKey } from "./chain";

export interface SafeContext {
  rpcUrl: string;
  chainId: bigint;
  suite: SafeSuiteAddresses;
}

function kitConfig(ctx: SafeContext, signerKey: string) {
  return {
    provider: ctx.rpcUrl,
    // Always a private key: without `signer` protocol-kit silently uses eth_accounts[0] (docs/development.md).
    signer: normaliseKey(signerKey),
    isL1SafeSingleton: true,
    contractNetworks: { [String(ctx.chainId)]: ctx.suite },
  };
}

/** protocol-kit bound to an existing Safe and a private-key signer. */
export async function connectSafe(ctx: SafeContext, safeAddress: string, signerKey: string): Promise<Safe> {
  const address = requireAddress(safeAddress, "the Safe address");
  const code = await rpcProvider(ctx.rpcUrl).getCode(address);
  if (code === "0x") {
    throw new SafeCliError("safe_not_deployed", `no contract at ${address} on chain ${ctx.chainId}`, {
      safe: address,
    });
  }
  return Safe.init({ ...kitConfig(ctx, signerKey), safeAddress: address });
}

export interface CreateSafeOptions {
  owners: string[];
  threshold: number;
  /** Distinguishes Safes with the same owners and threshold; defaults to a random value. */
  saltNonce?: string;
}

/**
 * Deploy a Safe proxy (version 1.4.1) with `owners` and `threshold`, paid for by `deployerKey` (which
 * need not be an owner). Returns its address.
 */
export async function createSafe(
  ctx: SafeContext,
  deployerKey: string,
  opts: CreateSafeOptions,
): Promise<string> {
  const owners = opts.owners.map((o) => requireAddress(o, "an owner"));
  if (new Set(owners).size !== owners.length)
    throw new SafeCliError("invalid_argument", "owners must be distinct");
  if (!Number.isInteger(opts.threshold) || opts.threshold < 1 || opts.threshold > owners.length) {
    throw new SafeCliError("invalid_argument", `threshold must be between 1 and ${owners.length}`);
  }
  const saltNonce = opts.saltNonce ?? BigInt(ethers.hexlify(ethers.randomBytes(8))).toString();
  const kit = await Safe.init({
    ...kitConfig(ctx, deployerKey),
    predictedSafe: {
      safeAccountConfig: { owners, threshold: opts.threshold },
      safeDeploymentConfig: { saltNonce, safeVersion: "1.4.1" },
    },
  });
  const address = await kit.getAddress();
  const provider = rpcProvider(ctx.rpcUrl);
  if ((await provider.getCode(address)) !== "0x") return address;
  const deployTx = await kit.createSafeDeploymentTransaction();
  const wallet = walletFromKey(deployerKey, provider);
  const sent = await wallet.sendTransaction({
    to: deployTx.to,
    data: deployTx.data,
    value: BigInt(deployTx.value),
  });
  const receipt = await sent.wait();
  if (!receipt || receipt.status !== 1)
    throw new SafeCliError("execution_reverted", "the Safe deployment reverted");
  return address;
}
