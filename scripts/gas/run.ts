/**
 * `npm run gas`: measures every write scenario (scripts/gas/scenarios.ts) in the three modes on Hardhat's
 * in-process network, prints the table and rewrites the snapshot file `.gas-snapshot` at the repository root.
 * `npm run gas -- --check` only compares with the committed snapshot (the same rule as the snapshot test).
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ethers } from "hardhat";
import { compareWithSnapshot, formatSnapshot, measureAll } from "./scenarios";

export const SNAPSHOT_FILE = path.join(__dirname, "..", "..", ".gas-snapshot");

async function main(): Promise<void> {
  const figures = await measureAll({ provider: ethers.provider, signers: await ethers.getSigners() });
  const table = formatSnapshot(figures);
  process.stdout.write(table);
  const over = figures.filter((f) => f.gas > Math.floor(f.reference * f.goal));
  console.log(`\n${figures.length - over.length} of ${figures.length} writes at or below their goal.`);
  if (process.env.GAS_CHECK === "1") {
    const problems = compareWithSnapshot(readFileSync(SNAPSHOT_FILE, "utf8"), figures);
    for (const p of problems) console.log(`FAIL ${p}`);
    if (problems.length) process.exitCode = 1;
    return;
  }
  writeFileSync(SNAPSHOT_FILE, table);
  console.log(`Wrote ${path.relative(process.cwd(), SNAPSHOT_FILE)}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
