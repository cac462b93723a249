/**
 * Deploys the optional AuditAnchor contract (docs/audit-log.md, "Anchoring"):
 * `npx hardhat run scripts/deployAuditAnchor.ts --network <name>` deploys it with the first signer and
 * prints its address, which goes into SIGIL_AUDIT_ANCHOR_CONTRACT (with SIGIL_AUDIT_ANCHOR=true).
 * As a module: `deployAuditAnchor(signer)` works against any provider (no `hre`).
 */
import type { Signer } from "ethers";
import { AuditAnchor__factory } from "../typechain-types";

export async function deployAuditAnchor(signer: Signer): Promise<string> {
  const anchor = await new AuditAnchor__factory(signer).deploy();
  await anchor.waitForDeployment();
  return anchor.getAddress();
}

async function main(): Promise<void> {
  const { ethers } = await import("hardhat");
  const [signer] = await ethers.getSigners();
  console.log(`AuditAnchor: ${await deployAuditAnchor(signer)}`);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
