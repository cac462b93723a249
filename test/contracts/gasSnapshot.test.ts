/**
 * The gas snapshot guard: recomputes every write scenario of scripts/gas/scenarios.ts (direct, path A
 * single, path A batched) and compares with the committed `.gas-snapshot`. A write may not rise more than
 * 1% above its committed figure, nor above its goal once its committed line meets the goal.
 * After an intended change, `npm run gas` rewrites the snapshot.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { expect } from "chai";
import hre, { ethers } from "hardhat";
import {
  compareWithSnapshot,
  formatSnapshot,
  measureAll,
  parseSnapshot,
  type Figure,
} from "../../scripts/gas/scenarios";

const SNAPSHOT_FILE = path.join(__dirname, "..", "..", ".gas-snapshot");

describe("Gas snapshot", function () {
  let figures: Figure[];
  let committed: string;

  before(async function () {
    // Under `npm run coverage` the bytecode is instrumented: its gas says nothing about the registry's.
    if ((hre as unknown as { __SOLIDITY_COVERAGE_RUNNING?: boolean }).__SOLIDITY_COVERAGE_RUNNING)
      this.skip();
    committed = readFileSync(SNAPSHOT_FILE, "utf8");
    figures = await measureAll({ provider: ethers.provider, signers: await ethers.getSigners() });
  });

  it("no write rises more than 1% above its committed figure or above a goal it met", function () {
    expect(compareWithSnapshot(committed, figures)).to.deep.equal([]);
  });

  it("setting a group's policy costs no more than adding its first action, in every mode", function () {
    const gasOf = (mode: string, scenario: string) =>
      figures.find((f) => f.mode === mode && f.scenario === scenario)?.gas;
    for (const mode of ["direct", "single", "batch"]) {
      const policy = gasOf(mode, "group.setPolicy");
      const action = gasOf(mode, "action.add.first");
      expect(policy, `${mode} group.setPolicy`).to.be.a("number");
      expect(policy, `${mode}: group.setPolicy vs action.add.first`).to.be.at.most(action as number);
    }
  });

  it("the comparison refuses a write 1% above its line", function () {
    const raised = figures.map((f, i) => (i === 0 ? { ...f, gas: Math.floor(f.gas * 1.01) + 1 } : f));
    const [first] = figures;
    expect(compareWithSnapshot(formatSnapshot(figures), raised)).to.deep.equal([
      `${first.mode} ${first.scenario}: ${Math.floor(first.gas * 1.01) + 1} gas, more than 1% above the snapshot's ${first.gas}`,
    ]);
  });

  it("the comparison refuses a write above a goal its committed line met", function () {
    const atGoal = figures.map((f) => ({ ...f, gas: Math.floor(f.reference * f.goal) }));
    const over = atGoal.map((f, i) => (i === 0 ? { ...f, gas: f.gas + 1 } : f));
    const [first] = atGoal;
    expect(compareWithSnapshot(formatSnapshot(atGoal), over)).to.deep.equal([
      `${first.mode} ${first.scenario}: ${first.gas + 1} gas, above its goal of ${first.gas}`,
    ]);
  });

  it("the comparison refuses a snapshot missing a measured write", function () {
    const [first, ...rest] = figures;
    expect(compareWithSnapshot(formatSnapshot(rest), figures)).to.deep.equal([
      `${first.mode} ${first.scenario}: measured, not in the snapshot (run npm run gas)`,
    ]);
  });

  it("the snapshot parses back to the figures it was written from", function () {
    expect(parseSnapshot(formatSnapshot(figures))).to.deep.equal(
      figures.map(({ mode, scenario, gas, reference, goal }) => ({ mode, scenario, gas, reference, goal })),
    );
  });
});
