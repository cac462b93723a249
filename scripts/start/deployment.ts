/**
 * Remembering the deployment: the registry and forwarder are deployed on the first start and their
 * addresses written to `<dataDir>/deployment.json`. Later starts reuse them after checking that the chain
 * is the same one (chain id) and still has code at both addresses. If it does not, the chain was reset
 * (state file deleted, another node, a different network): the ledger and cursor in the data folder
 * describe accounts that no longer exist, and silently redeploying would hand account #1's balance to a
 * stranger. So Sigil refuses to start and says exactly what happened and what to do.
 */
import * as fs from "node:fs";
import { Interface, type Provider } from "ethers";

/** The registry layout this code reads (AccountRegistry.REGISTRY_VERSION). */
export const REGISTRY_VERSION = 3n;
const versionCall = new Interface(["function registryVersion() view returns (uint256)"]);

/**
 * The layout version of the registry at `address`: 1 for the first registry, which stored names and CID
 * strings and has no `registryVersion` (the call reverts), else what it answers.
 */
export async function registryVersionAt(provider: Provider, address: string): Promise<bigint> {
  const data = versionCall.encodeFunctionData("registryVersion");
  try {
    const raw = await provider.call({ to: address, data });
    return versionCall.decodeFunctionResult("registryVersion", raw)[0] as bigint;
  } catch (e) {
    if ((e as { code?: string }).code === "CALL_EXCEPTION") return 1n;
    throw e;
  }
}

export interface Deployment {
  registry: string;
  forwarder: string;
  deployBlock: number;
  chainId: number;
}

export interface RememberedDeployment extends Deployment {
  /** "embedded" or the RPC URL (without credentials) the deployment was made on; informative only. */
  chain: string;
  deployedAt: string;
  /** Set by `npm run migrate:registry`: the registry this one took the accounts over from. */
  previous_registry?: string;
  previous_deploy_block?: number;
}

export class DeploymentError extends Error {
  constructor(
    readonly code:
      | "chain_reset"
      | "chain_mismatch"
      | "deployment_file_unreadable"
      | "deployer_missing"
      | "registry_outdated",
    message: string,
  ) {
    super(message);
    this.name = "DeploymentError";
  }
}

export function readDeployment(file: string): RememberedDeployment | undefined {
  if (!fs.existsSync(file)) return undefined;
  try {
    const d = JSON.parse(fs.readFileSync(file, "utf8")) as RememberedDeployment;
    if (typeof d.registry !== "string" || typeof d.forwarder !== "string" || !Number.isInteger(d.chainId))
      throw new Error("missing fields");
    return d;
  } catch (e) {
    throw new DeploymentError(
      "deployment_file_unreadable",
      `${file} is unreadable (${(e as Error).message}). Restore it, or move the data folder away to start from scratch.`,
    );
  }
}

export function writeDeployment(file: string, d: RememberedDeployment): void {
  // Write-then-rename so a crash never leaves a half-written file.
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(d, null, 2) + "\n");
  fs.renameSync(`${file}.tmp`, file);
}

async function hasCode(provider: Provider, address: string): Promise<boolean> {
  const code = await provider.getCode(address);
  return code !== "0x" && code !== "";
}

/** Strips user:password and query strings (API keys often live there) from an RPC URL before it is written down. */
export function describeRpc(rpcUrl: string | undefined): string {
  if (rpcUrl === undefined) return "embedded";
  try {
    const u = new URL(rpcUrl);
    return `${u.protocol}//${u.host}${u.pathname === "/" ? "" : "/…"}`;
  } catch {
    return "external";
  }
}

export interface EnsureDeploymentOptions {
  provider: Provider;
  file: string;
  chainLabel: string;
  /** A deployment fixed by configuration (SIGIL_REGISTRY_ADDRESS …): verified, never redeployed. */
  configured?: { registry: string; forwarder: string; deployBlock: number };
  /** Deploys fresh contracts; absent when there is nobody to pay for it (external chain, no deployer key). */
  deploy?: () => Promise<Deployment>;
  /** What the user can do when `deploy` is absent. */
  deployHint?: string;
}

/** Returns the deployment to use and whether it was just made. */
export async function ensureDeployment(
  opts: EnsureDeploymentOptions,
): Promise<{ deployment: Deployment; fresh: boolean }> {
  const chainId = Number((await opts.provider.getNetwork()).chainId);
  const resetAdvice = (what: string) =>
    `${what}\nThe data folder (${opts.file.replace(/[/\\]deployment\.json$/, "")}) belongs to that old chain: ` +
    `its ledger and records describe accounts that no longer exist there. Either restore the chain (for the embedded ` +
    `chain: restore chain-state.json from a backup), or move the data folder away and start again to get a fresh, empty deployment.`;

  if (opts.configured) {
    for (const [name, address] of [
      ["registry", opts.configured.registry],
      ["forwarder", opts.configured.forwarder],
    ] as const)
      if (!(await hasCode(opts.provider, address)))
        throw new DeploymentError(
          "chain_mismatch",
          `SIGIL_${name.toUpperCase()}_ADDRESS=${address} has no contract code on chain ${chainId}. Check the address and SIGIL_RPC_URL.`,
        );
    const version = await registryVersionAt(opts.provider, opts.configured.registry);
    if (version !== REGISTRY_VERSION)
      throw new DeploymentError(
        "registry_outdated",
        `SIGIL_REGISTRY_ADDRESS=${opts.configured.registry} is a registry of layout ${version}; this version of Sigil ` +
          `reads layout ${REGISTRY_VERSION} only. Point it at a registry deployed by this version (npm run deploy).`,
      );
    return { deployment: { ...opts.configured, chainId }, fresh: false };
  }

  const remembered = readDeployment(opts.file);
  if (remembered) {
    if (remembered.chainId !== chainId)
      throw new DeploymentError(
        "chain_mismatch",
        resetAdvice(
          `The contracts remembered in ${opts.file} were deployed on chain ${remembered.chainId} (${remembered.chain}), ` +
            `but the chain Sigil is connected to now reports chain id ${chainId}.`,
        ),
      );
    const missing: string[] = [];
    if (!(await hasCode(opts.provider, remembered.registry))) missing.push(`registry ${remembered.registry}`);
    if (!(await hasCode(opts.provider, remembered.forwarder)))
      missing.push(`forwarder ${remembered.forwarder}`);
    if (missing.length > 0)
      throw new DeploymentError(
        "chain_reset",
        resetAdvice(
          `The chain was reset: there is no contract code at the remembered ${missing.join(" and ")} on chain ${chainId} ` +
            `(deployed ${remembered.deployedAt} on ${remembered.chain}).`,
        ),
      );
    const version = await registryVersionAt(opts.provider, remembered.registry);
    if (version !== REGISTRY_VERSION)
      throw new DeploymentError(
        "registry_outdated",
        `The data folder (${opts.file.replace(/[/\\]deployment\.json$/, "")}) was made with registry layout ${version} ` +
          `at ${remembered.registry}; this version of Sigil reads layout ${REGISTRY_VERSION} only (names, CIDs and ` +
          `members in events), so it would misread every account. It will not redeploy either: a fresh registry binds ` +
          `PKP ids, and so PKP keys, to its own address, and would change every PKP's key. ` +
          (version === 2n
            ? `Run \`npm run migrate:registry\` (same configuration as npm start) to move every account onto a new ` +
              `registry that keeps every PKP's key, or keep serving this data with the Sigil release that made it`
            : `Keep serving this data with the Sigil release that made it (npm run migrate:registry moves layout 2 ` +
              `only), or move the data folder away to start a fresh, empty deployment`) +
          ` (see docs/contracts.md, "Existing deployments").`,
      );
    const { registry, forwarder, deployBlock } = remembered;
    return { deployment: { registry, forwarder, deployBlock, chainId }, fresh: false };
  }

  if (!opts.deploy)
    throw new DeploymentError(
      "deployer_missing",
      opts.deployHint ?? "No contracts are deployed yet and no deployer is configured.",
    );
  const deployed = await opts.deploy();
  writeDeployment(opts.file, { ...deployed, chain: opts.chainLabel, deployedAt: new Date().toISOString() });
  return { deployment: deployed, fresh: true };
}
