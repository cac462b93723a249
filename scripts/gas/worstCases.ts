/**
 * `npx hardhat run scripts/gas/worstCases.ts`: the registry's bounded worst cases (receipt gas for writes,
 * eth_estimateGas for views), printed as the table of docs/contracts.md section 7.
 */
import { ethers } from "hardhat";
import { deploySigil } from "../deploy";
import { AccountRegistry__factory } from "../../typechain-types";
import { cidV0 } from "./scenarios";

async function main(): Promise<void> {
  const [deployer, owner] = await ethers.getSigners();
  const d = await deploySigil(deployer);
  const registry = AccountRegistry__factory.connect(d.registry, owner);
  const gas = async (tx: Promise<{ wait(): Promise<{ gasUsed: bigint } | null> }>) =>
    Number((await (await tx).wait())!.gasUsed);
  const rows: [string, number][] = [];
  await (await registry.createAccount("worst", ethers.ZeroAddress)).wait();
  for (let i = 0; i < 257; i++) await (await registry.createPkp("", "")).wait();
  const pkpIds = Array.from({ length: 257 }, (_, i) =>
    ethers.keccak256(
      ethers.AbiCoder.defaultAbiCoder().encode(
        ["uint256", "address", "uint64", "uint256"],
        [d.chainId, d.registry, 1n, BigInt(i + 1)],
      ),
    ),
  );
  for (let g = 0; g < 1024; g++) await (await registry.createGroup("", "", [], [])).wait();
  const ids = (from: number) => Array.from({ length: 32 }, (_, i) => BigInt(from + i));
  const wide = (base: number) => ({
    canCreateGroups: true,
    canDeleteGroups: true,
    canCreatePkps: true,
    executeInGroups: ids(base + 1),
    manageIpfsIdsInGroups: ids(base + 33),
    addPkpToGroups: ids(base + 65),
    removePkpFromGroups: ids(base + 97),
  });
  const key = ethers.Wallet.createRandom().address;
  rows.push([
    "`addKey` with 128 distinct scope ids (4 × 32)",
    await gas(registry.addKey(key, ethers.ZeroHash, "", "", 0, wide(0))),
  ]);
  rows.push([
    "`updateKey` replacing those 128 ids by 128 others",
    await gas(registry.updateKey(key, "", "", 0, wide(128))),
  ]);
  const none = {
    ...wide(0),
    executeInGroups: [],
    manageIpfsIdsInGroups: [],
    addPkpToGroups: [],
    removePkpFromGroups: [],
  };
  rows.push(["`updateKey` to no per-group scope", await gas(registry.updateKey(key, "", "", 0, none))]);
  rows.push(["`removeKey`", await gas(registry.removeKey(key))]);
  const cids = Array.from({ length: 64 }, (_, i) => cidV0(`worst ${i}`));
  rows.push(["`addActions` with 64 new CIDs", await gas(registry.addActions(1, cids))]);
  for (let i = 0; i < 4; i++)
    await (
      await registry.addActions(
        2,
        Array.from({ length: 64 }, (_, j) => cidV0(`full ${i} ${j}`)),
      )
    ).wait();
  for (let i = 0; i < 4; i++) await (await registry.addPkps(2, pkpIds.slice(i * 64, i * 64 + 64))).wait();
  rows.push(["`addPkps` with 64 PKPs", await gas(registry.addPkps(3, pkpIds.slice(0, 64)))]);
  rows.push(["`deleteGroup` of a full group (256 PKPs + 256 CIDs)", await gas(registry.deleteGroup(2))]);
  await (await registry.createGroup("", "", [], [])).wait();
  const wildcard = ethers.Wallet.createRandom().address;
  const scoped = ethers.Wallet.createRandom().address;
  await (
    await registry.addKey(wildcard, ethers.ZeroHash, "", "", 0, { ...none, executeInGroups: [0n] })
  ).wait();
  await (
    await registry.addKey(scoped, ethers.ZeroHash, "", "", 0, {
      ...none,
      executeInGroups: ids(100).concat(ids(132)),
    })
  ).wait();
  const unknown = ethers.id("never listed");
  rows.push([
    "`canExecute` by a wildcard key (or the owner), 1,024 live groups, no match",
    Number(await registry.canExecute.estimateGas(wildcard, unknown, pkpIds[0])),
  ]);
  rows.push([
    "`canExecute` by a key scoped on 64 of 1,024 live groups, no match",
    Number(await registry.canExecute.estimateGas(scoped, unknown, pkpIds[0])),
  ]);
  rows.push([
    "`getKey` of that key (1,024 live groups scanned)",
    Number(await registry.getKey.estimateGas(scoped)),
  ]);
  for (const [what, n] of rows)
    console.log(`| ${what.padEnd(76)} | ${n.toLocaleString("en-US").padStart(10)} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
