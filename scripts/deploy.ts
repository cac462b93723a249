/**
 * Deploys the Sigil contracts: the ERC-2771 forwarder, then the registry that trusts it.
 *
 * As a module: `deploySigil(signer)` works against any provider (Hardhat's in-process network, anvil or any
 * JSON-RPC endpoint) because it only uses the signer and the TypeChain factories, never `hre`.
 * As a script: `npx hardhat run scripts/deploy.ts --network <name>` deploys with the first signer and writes
 * `deployments/<name>.json` ({chainId, registry, forwarder, deployBlock}); SIGIL_DEPLOYMENTS_DIR overrides the folder.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Signer } from "ethers";
import { AccountRegistry__factory, SigilForwarder__factory } from "../typechain-types";

export interface SigilDeployment {
  registry: string;
  forwarder: string;
  /** Block of the forwarder's deployment: the first block an indexer needs to scan. */
  deployBlock: number;
  chainId: number;
}

export interface DeploySigilOptions {
  /**
   * A migration (scripts/migrate): the registry whose PKP ids the new one continues (its `pkpIdDomain()`),
   * and its forwarder, which the new registry trusts so that signers keep their EIP-712 domain and nonces.
   */
  continues?: { pkpIdDomain: string; forwarder: string };
}

export async function deploySigil(
  deployer: Signer,
  options: DeploySigilOptions = {},
): Promise<SigilDeployment> {
  const provider = deployer.provider;
  if (!provider) throw new Error("deploySigil: the deployer signer has no provider");

  let forwarderAddress: string;
  let deployBlock: number | undefined;
  if (options.continues) {
    forwarderAddress = options.continues.forwarder;
  } else {
    const forwarder = await new SigilForwarder__factory(deployer).deploy();
    const forwarderReceipt = await forwarder.deploymentTransaction()?.wait();
    if (!forwarderReceipt) throw new Error("deploySigil: forwarder deployment has no receipt");
    forwarderAddress = await forwarder.getAddress();
    deployBlock = forwarderReceipt.blockNumber;
  }

  const registry = await new AccountRegistry__factory(deployer).deploy(
    forwarderAddress,
    options.continues?.pkpIdDomain ?? "0x0000000000000000000000000000000000000000",
  );
  const registryReceipt = await registry.deploymentTransaction()?.wait();
  if (!registryReceipt) throw new Error("deploySigil: registry deployment has no receipt");
  // A continuing registry's events start at its own deployment.
  deployBlock ??= registryReceipt.blockNumber;

  const { chainId } = await provider.getNetwork();
  return {
    registry: await registry.getAddress(),
    forwarder: forwarderAddress,
    deployBlock,
    chainId: Number(chainId),
  };
}

async function main(): Promise<void> {
  const hre = await import("hardhat");
  const [deployer] = await hre.ethers.getSigners();
  if (!deployer) throw new Error(`no signer configured for network ${hre.network.name}`);
  const deployment = await deploySigil(deployer);
  const outDir = process.env.SIGIL_DEPLOYMENTS_DIR ?? path.join(__dirname, "..", "deployments");
  mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `${hre.network.name}.json`);
  const { chainId, registry, forwarder, deployBlock } = deployment;
  writeFileSync(file, JSON.stringify({ chainId, registry, forwarder, deployBlock }, null, 2) + "\n");
  console.log(
    `Deployed to ${hre.network.name} (chain ${chainId}): registry ${registry}, forwarder ${forwarder}`,
  );
  console.log(`Wrote ${path.relative(process.cwd(), file)}`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
