/**
 * AuditAnchor (contracts/AuditAnchor.sol): one event per anchored checkpoint with exactly its values,
 * refusals of an anchor that names no entry with the exact error, and the gas of one anchor (the figure
 * docs/audit-log.md quotes, "Anchoring").
 */
import { expect } from "chai";
import { ethers } from "hardhat";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { AuditAnchor__factory } from "../../typechain-types";

const HEAD = "0x" + "ab".repeat(32);

async function deployAnchor() {
  const [deployer, anyone] = await ethers.getSigners();
  const anchor = await new AuditAnchor__factory(deployer).deploy();
  await anchor.waitForDeployment();
  return { anchor, anyone };
}

describe("AuditAnchor", () => {
  it("emits AuditCheckpointAnchored with the account, the sequence and the head hash", async () => {
    const { anchor, anyone } = await loadFixture(deployAnchor);
    await expect(anchor.connect(anyone).anchor(7n, 100n, HEAD))
      .to.emit(anchor, "AuditCheckpointAnchored")
      .withArgs(7n, 100n, HEAD);
  });

  it("refuses sequence 0 with EmptyCheckpoint", async () => {
    const { anchor } = await loadFixture(deployAnchor);
    await expect(anchor.anchor(7n, 0n, HEAD)).to.be.revertedWithCustomError(anchor, "EmptyCheckpoint");
  });

  it("refuses a zero head hash with EmptyCheckpoint", async () => {
    const { anchor } = await loadFixture(deployAnchor);
    await expect(anchor.anchor(7n, 1n, ethers.ZeroHash)).to.be.revertedWithCustomError(
      anchor,
      "EmptyCheckpoint",
    );
  });

  it("one anchor costs under 26,000 gas (receipt gas, 21,000 of it the transaction's base cost)", async () => {
    const { anchor } = await loadFixture(deployAnchor);
    const receipt = await (await anchor.anchor(123456n, 4_000_000n, HEAD)).wait();
    expect(receipt!.gasUsed).to.be.lessThan(26_000n);
    expect(receipt!.gasUsed).to.be.greaterThan(21_000n);
  });
});
