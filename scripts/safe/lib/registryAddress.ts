import fs from "node:fs";
import path from "node:path";
import { ethers } from "ethers";
import { SafeCliError } from "./errors";

// Files the start command may write its deployment into, first match wins; any of the field names
// below is read as the registry's address.
const DEPLOYMENT_FILES = ["deployment.json", "deployments.json", "sigil-deployment.json"];
const REGISTRY_FIELDS = ["registry", "registryAddress", "AccountRegistry"];

/**
 * The registry address: an explicit flag, else SIGIL_REGISTRY_ADDRESS, else the deployment file the
 * start command keeps in the data dir.
 */
export function resolveRegistryAddress(explicit: string | undefined, dataDir: string): string {
  const candidate = explicit ?? process.env.SIGIL_REGISTRY_ADDRESS;
  if (candidate) {
    if (!ethers.isAddress(candidate))
      throw new SafeCliError("invalid_argument", `the registry is not an address: ${candidate}`);
    return ethers.getAddress(candidate);
  }
  for (const name of DEPLOYMENT_FILES) {
    const file = path.join(dataDir, name);
    if (!fs.existsSync(file)) continue;
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch {
      continue;
    }
    for (const field of REGISTRY_FIELDS) {
      const v = json[field];
      if (typeof v === "string" && ethers.isAddress(v)) return ethers.getAddress(v);
    }
  }
  throw new SafeCliError(
    "no_registry",
    `no registry address: pass --registry, set SIGIL_REGISTRY_ADDRESS, or start Sigil so ${path.join(dataDir, DEPLOYMENT_FILES[0])} exists`,
    { dataDir },
  );
}
