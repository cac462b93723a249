import fs from "node:fs";
import path from "node:path";
import { ethers } from "ethers";
import { SafeCliError } from "./errors";
import { startSettings } from "./startSettings";

/**
 * The Safe 1.4.1 contract suite as protocol-kit's `ContractNetworkConfig` wants it. On public chains the
 * canonical deployments exist already; on a dev chain (anvil, Hardhat) we deploy the same bytecode from
 * the @safe-global/safe-contracts artifacts and remember where it went.
 */
export interface SafeSuiteAddresses {
  safeSingletonAddress: string;
  safeProxyFactoryAddress: string;
  multiSendAddress: string;
  multiSendCallOnlyAddress: string;
  fallbackHandlerAddress: string;
  signMessageLibAddress: string;
  createCallAddress: string;
  simulateTxAccessorAddress: string;
}

/** The deployments file: one entry per chain id, so one file can serve several chains. */
export type SafeDeploymentsFile = Record<string, SafeSuiteAddresses>;

const ARTIFACTS =
  path.dirname(require.resolve("@safe-global/safe-contracts/package.json")) + "/build/artifacts/contracts";

// Suite member → artifact path. Safe (not SafeL2): we tell protocol-kit `isL1SafeSingleton: true`.
const SUITE: Record<keyof SafeSuiteAddresses, string> = {
  safeSingletonAddress: "Safe.sol/Safe.json",
  safeProxyFactoryAddress: "proxies/SafeProxyFactory.sol/SafeProxyFactory.json",
  multiSendAddress: "libraries/MultiSend.sol/MultiSend.json",
  multiSendCallOnlyAddress: "libraries/MultiSendCallOnly.sol/MultiSendCallOnly.json",
  fallbackHandlerAddress: "handler/CompatibilityFallbackHandler.sol/CompatibilityFallbackHandler.json",
  signMessageLibAddress: "libraries/SignMessageLib.sol/SignMessageLib.json",
  createCallAddress: "libraries/CreateCall.sol/CreateCall.json",
  simulateTxAccessorAddress: "accessors/SimulateTxAccessor.sol/SimulateTxAccessor.json",
};

export function safeArtifact(member: keyof SafeSuiteAddresses): {
  abi: ethers.InterfaceAbi;
  bytecode: string;
} {
  const json = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, SUITE[member]), "utf8"));
  return { abi: json.abi, bytecode: json.bytecode };
}

/** Default data folder: the one `npm start` uses (SIGIL_DATA_DIR, in the environment or the config file). */
export function defaultDataDir(): string {
  return startSettings().dataDir;
}

export function defaultDeploymentsFile(dataDir = defaultDataDir()): string {
  return path.join(dataDir, "safe-deployments.json");
}

export function readDeploymentsFile(file: string): SafeDeploymentsFile {
  if (!fs.existsSync(file)) return {};
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as SafeDeploymentsFile;
  } catch (cause) {
    throw new SafeCliError(
      "invalid_argument",
      `the Safe deployments file ${file} is not valid JSON`,
      { file },
      cause,
    );
  }
}

/** The recorded suite for `chainId`, or null when the file has none. */
export function recordedSuite(file: string, chainId: bigint | number): SafeSuiteAddresses | null {
  return readDeploymentsFile(file)[String(chainId)] ?? null;
}

/** Whether every suite member has code at its recorded address (a reset dev chain loses them). */
export async function suiteIsLive(provider: ethers.Provider, suite: SafeSuiteAddresses): Promise<boolean> {
  const codes = await Promise.all(Object.values(suite).map((a) => provider.getCode(a)));
  return codes.every((c) => c !== "0x");
}

/**
 * The suite for the deployer's chain: the recorded one if it is still on chain, otherwise a fresh
 * deployment, written back to `file`. Deploys sequentially with explicit nonces (automining chains
 * reject out-of-order nonces).
 */
export async function ensureSafeSuite(
  deployer: ethers.Signer,
  file: string,
): Promise<{ suite: SafeSuiteAddresses; deployed: boolean; chainId: bigint }> {
  const provider = deployer.provider;
  if (!provider) throw new SafeCliError("invalid_argument", "the deployer needs a provider");
  const { chainId } = await provider.getNetwork();
  const existing = recordedSuite(file, chainId);
  if (existing && (await suiteIsLive(provider, existing)))
    return { suite: existing, deployed: false, chainId };

  let nonce = await provider.getTransactionCount(await deployer.getAddress(), "pending");
  const suite = {} as SafeSuiteAddresses;
  for (const member of Object.keys(SUITE) as (keyof SafeSuiteAddresses)[]) {
    const { abi, bytecode } = safeArtifact(member);
    const contract = await new ethers.ContractFactory(abi, bytecode, deployer).deploy({ nonce: nonce++ });
    await contract.waitForDeployment();
    suite[member] = await contract.getAddress();
  }
  const all = readDeploymentsFile(file);
  all[String(chainId)] = suite;
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(all, null, 2) + "\n");
  return { suite, deployed: true, chainId };
}

/** The suite recorded for `chainId`, or a clear error telling the user to deploy it. */
export function requireSuite(file: string, chainId: bigint | number): SafeSuiteAddresses {
  const suite = recordedSuite(file, chainId);
  if (!suite) {
    throw new SafeCliError(
      "no_safe_deployments",
      `no Safe contracts recorded for chain ${chainId} in ${file}; run \`safe deploy-suite\` first`,
      { file, chainId: String(chainId) },
    );
  }
  return suite;
}
